"""Blocking database work of the async routes, abandoned after a deadline.

A frozen PostgreSQL (the host is stopped, or the server hangs without resetting anything) accepts
TCP and answers nothing: no server-side timeout fires, and a pooled connection's pre-ping waits
forever. ``/ready`` and ``/v1/best`` hung past 15 s. Here the waiting request gives up after
``api_database_deadline_seconds`` and answers 503 with Retry-After; the stuck thread is abandoned
(it returns, holding its pooled connection until then, once the server answers or its TCP
keepalives declare it gone).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TypeVar

import anyio

from kernelfarm.core.errors import Unavailable

T = TypeVar("T")


async def in_thread(deadline: float, fn: Callable[..., T], *args: object) -> T:
    """``fn(*args)`` in a worker thread; Unavailable when it has not returned after ``deadline`` s."""
    try:
        with anyio.fail_after(deadline):
            return await anyio.to_thread.run_sync(partial(fn, *args), abandon_on_cancel=True)
    except TimeoutError:
        raise Unavailable(f"the database did not answer within {deadline:g} s; retry later") from None

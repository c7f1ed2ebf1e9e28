"""Run several processes as one component: when any of them exits, or this process is told to stop,
the others are stopped too, and when this process dies (even by SIGKILL) the kernel stops them
(PR_SET_PDEATHSIG). ``kernelfarm coordinator`` runs the Celery worker and its scheduler (Celery beat)
this way, so killing the coordinator never leaves a scheduler behind: one scheduler per coordinator,
whatever dies (with Celery's embedded ``-B`` beat, killing the worker's main process orphaned the
beat child, and every restart added one more).
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence

logger = logging.getLogger(__name__)
PR_SET_PDEATHSIG = 1


def _die_with_parent(parent: int) -> None:
    """In the child, before exec: SIGTERM when the parent dies; exit at once if it already has."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


def run_together(commands: Mapping[str, Sequence[str]], grace: float = 10.0) -> int:
    """Start every command, wait until one exits or SIGTERM/SIGINT arrives, stop the rest.

    Returns 0 after a requested stop, else 1 (a member exited on its own: whoever supervises this
    component restarts it whole)."""
    parent = os.getpid()
    children = {name: subprocess.Popen(list(argv), preexec_fn=lambda: _die_with_parent(parent))
                for name, argv in commands.items()}  # fmt: skip
    requested = False

    def _stop(signum: int, _frame: object) -> None:
        nonlocal requested
        requested = True

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    exited = None
    while not requested and exited is None:
        exited = next((name for name, child in children.items() if child.poll() is not None), None)
        time.sleep(0.2)
    if exited:
        logger.error("%s exited (code %s); stopping %s", exited, children[exited].returncode,
                     ", ".join(n for n in children if n != exited))  # fmt: skip
    for child in children.values():
        if child.poll() is None:
            child.terminate()
    deadline = time.monotonic() + grace
    for child in children.values():
        try:
            child.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
    return 0 if requested and exited is None else 1

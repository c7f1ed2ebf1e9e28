"""Best-config answers, per API process, kept while the database says nothing they depend on changed.

A lookup used to cost a threadpool hop, a pooled connection (with its pre-ping), one to six queries,
ORM loading and response validation: most of the API's CPU at 200 lookups/s on 2 cores. An answer
(the response body, or the 404's reason) depends only on the query and on rows whose changes bump
a stamp in ``best_versions`` (core/store/best.py, migrations/versions/0003_best_versions.py). An
answer is kept with the stamps of its kernel and of the worker registry as they were read before
its queries ran, and served while they are unchanged.

Freshness: the stamps are re-read by the first request that finds them older than ``max_age``
seconds, before it is answered. A request is therefore answered from stamps read less than
``max_age`` before it arrived, and a new best that committed before that read is never missed: a
new faster trial is served at most ``max_age`` seconds late (plus the version read itself, about a
millisecond). Between two requests nothing is read, so an idle API costs the database nothing.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass

from kernelfarm.core.db import session_scope
from kernelfarm.core.store.best import REGISTRY_SCOPE, answer_versions

Stamp = tuple[int, int]  # (the kernel's version, the worker registry's version)


@dataclass(frozen=True)
class Answer:
    """Exactly one of ``body`` (the 200 response's JSON) and ``missing`` (the 404's reason)."""

    stamp: Stamp
    body: bytes | None = None
    missing: str | None = None


class BestCache:
    def __init__(
        self, max_age: float, read_versions: Callable[[], Mapping[str, int]], max_entries: int = 10_000
    ) -> None:
        self.max_age, self.max_entries = max_age, max_entries
        self._read_versions = read_versions
        self._versions: Mapping[str, int] = {}
        self._read_at = -math.inf
        self._entries: dict[Hashable, Answer] = {}
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self.max_age > 0

    def current(self) -> bool:
        """The stamps are young enough to answer from."""
        return time.monotonic() - self._read_at < self.max_age

    def refresh(self) -> None:
        """Read the stamps again (blocking: call it from a worker thread). Concurrent callers wait
        for one read instead of each making their own."""
        with self._lock:
            if self.current():
                return
            started = time.monotonic()  # commits before this instant are in what the query sees
            versions = dict(self._read_versions())
            self._versions, self._read_at = versions, started

    def stamp(self, kernel: str) -> Stamp:
        """The stamps an answer computed from now on depends on (read them BEFORE its queries)."""
        versions = self._versions
        return versions.get(kernel, 0), versions.get(REGISTRY_SCOPE, 0)

    def get(self, key: Hashable, kernel: str) -> Answer | None:
        answer = self._entries.get(key)
        if answer is None or answer.stamp != self.stamp(kernel):
            return None
        return answer

    def put(self, key: Hashable, answer: Answer) -> None:
        if len(self._entries) >= self.max_entries:
            self._entries.clear()  # bounded memory; answers are cheap to compute again
        self._entries[key] = answer


def read_best_versions(database_url: str | None) -> dict[str, int]:
    with session_scope(database_url) as session:
        return answer_versions(session)

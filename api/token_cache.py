"""Recently authenticated tokens, per API process, dropped within a fraction of a second of any
revocation.

Authenticating reads the token row and stamps ``last_used_at`` (a write): on every request that is
the most expensive part of a best-config lookup. Caching the outcome for ``ttl`` seconds removes it
from the hot path. A revocation must still take effect at once in every API process (a cached
admin token used to keep working ~8 s after its revocation), so the cache is only trusted together
with a revocation stamp (``core.store.tokens.revocation_stamp``: how many tokens are revoked, and
when the last one was), re-read from the database by the first request that finds it older than
``check_seconds``. When it changed, every cached token is forgotten.

Every entry remembers the stamp generation in force when its authentication began: an entry whose
database read may predate a revocation that the cache has since seen is never served (it would
otherwise survive the clearing if its write raced it).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass

from kernelfarm.core.db import session_scope
from kernelfarm.core.store.tokens import hash_token, revocation_stamp
from kernelfarm.core.store.ui_sessions import ended_stamp


@dataclass(frozen=True)
class CachedToken:
    name: str
    scopes: tuple[str, ...]
    expires: float
    generation: int


class TokenCache:
    def __init__(
        self,
        ttl_seconds: float,
        read_stamp: Callable[[], Hashable] | None = None,
        check_seconds: float = 0.5,
        max_entries: int = 10_000,
    ) -> None:
        self.ttl, self.max_entries, self.check_seconds = ttl_seconds, max_entries, check_seconds
        self._read_stamp = read_stamp
        self._stamp: Hashable = None
        self._checked_at = -math.inf
        self.generation = 0
        self._entries: dict[str, CachedToken] = {}
        self._lock = threading.Lock()
        self._check_lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self.ttl > 0

    def current(self) -> bool:
        """The revocation stamp is young enough to trust cached tokens."""
        return self._read_stamp is None or time.monotonic() - self._checked_at < self.check_seconds

    def refresh(self) -> None:
        """Re-read the revocation stamp (blocking: call it from a worker thread); forget every cached
        token if it changed. Concurrent callers wait for one read."""
        assert self._read_stamp is not None
        with self._check_lock:
            if self.current():
                return
            started = time.monotonic()
            stamp = self._read_stamp()
            with self._lock:
                if stamp != self._stamp:
                    self._stamp = stamp
                    self.generation += 1
                    self._entries.clear()
            self._checked_at = started

    def forget_all(self) -> None:
        """After a revocation made by this process: no cached token is trusted any more, and the
        next request re-reads the stamp (other processes see it within ``check_seconds``)."""
        with self._lock:
            self.generation += 1
            self._entries.clear()
            self._checked_at = -math.inf

    def get(self, token: str) -> CachedToken | None:
        key = hash_token(token)  # never keep plaintext tokens in memory longer than the request
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry.expires < time.monotonic() or entry.generation != self.generation:
                self._entries.pop(key, None)
                return None
            return entry

    def put(self, token: str, name: str, scopes: tuple[str, ...], generation: int) -> None:
        """``generation``: ``self.generation`` as read before the database was asked."""
        if not self.enabled:
            return
        with self._lock:
            if generation != self.generation:
                return  # a revocation was seen since this token was read
            if len(self._entries) >= self.max_entries:
                self._entries.clear()
            self._entries[hash_token(token)] = CachedToken(name, scopes, time.monotonic() + self.ttl, generation)


def read_revocation_stamp(database_url: str | None) -> Hashable:
    """Tokens revoked and dashboard sessions ended: either drops every cached credential."""
    with session_scope(database_url) as session:
        return revocation_stamp(session), ended_stamp(session)

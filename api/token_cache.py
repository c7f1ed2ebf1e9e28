"""Recently authenticated tokens, per API process.

Authenticating reads the token row and stamps ``last_used_at`` (a write): on every request that is
the most expensive part of a best-config lookup. Caching the outcome for a few seconds removes it
from the hot path; the price is that a revoked token keeps working for at most ``ttl`` seconds in
each process that saw it, and ``last_used_at`` is stamped at most once per ``ttl``.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from kernelfarm.core.store.tokens import hash_token


@dataclass(frozen=True)
class CachedToken:
    name: str
    scopes: tuple[str, ...]
    expires: float


class TokenCache:
    def __init__(self, ttl_seconds: float, max_entries: int = 10_000) -> None:
        self.ttl, self.max_entries = ttl_seconds, max_entries
        self._entries: dict[str, CachedToken] = {}
        self._lock = threading.Lock()

    def get(self, token: str) -> CachedToken | None:
        key = hash_token(token)  # never keep plaintext tokens in memory longer than the request
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry.expires < time.monotonic():
                self._entries.pop(key, None)
                return None
            return entry

    def put(self, token: str, name: str, scopes: tuple[str, ...]) -> None:
        if self.ttl <= 0:
            return
        with self._lock:
            if len(self._entries) >= self.max_entries:
                self._entries.clear()
            self._entries[hash_token(token)] = CachedToken(name, scopes, time.monotonic() + self.ttl)

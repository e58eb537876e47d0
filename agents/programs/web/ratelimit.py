"""A sliding-window rate limit per key (a client address), with a global ceiling.

Small on purpose: one process, a few routes (login attempts, caller tokens), in memory. Keys
that have gone quiet are dropped, so a stream of new addresses cannot grow it without bound.
"""

from __future__ import annotations

import time
from collections import deque

MAX_KEYS = 10_000


class RateLimit:
    def __init__(self, per_key: int, total: int, window: float = 60.0) -> None:
        self.per_key = per_key
        self.total = total
        self.window = window
        self._seen: dict[str, deque[float]] = {}
        self._all: deque[float] = deque()

    def _trim(self, times: deque[float], now: float) -> None:
        while times and times[0] <= now - self.window:
            times.popleft()

    def take(self, key: str, now: float | None = None) -> float | None:
        """Count one request for ``key``: None if allowed, else seconds until it would be."""
        now = time.monotonic() if now is None else now
        self._trim(self._all, now)
        times = self._seen.get(key)
        if times is None:
            if len(self._seen) >= MAX_KEYS:
                for k in [k for k, t in self._seen.items() if not t or t[-1] <= now - self.window]:
                    del self._seen[k]
            times = self._seen[key] = deque()
        self._trim(times, now)
        if len(times) >= self.per_key:
            return times[0] + self.window - now
        if len(self._all) >= self.total:
            return self._all[0] + self.window - now
        times.append(now)
        self._all.append(now)
        return None

"""Per-key rate limits (token buckets) and admission control (a bounded number of pending requests)."""

from __future__ import annotations

import math
import threading
import time


class RateLimiter:
    """One token bucket per key: ``burst`` requests at once, refilled at ``rate_per_minute``.

    ``take(key)`` returns 0 when the request may go, else the seconds until it could
    (the ``Retry-After`` a 429 carries). Buckets of idle keys are dropped once full again.
    """

    def __init__(self, rate_per_minute: float, burst: int, clock=time.monotonic) -> None:
        self.rate_s = rate_per_minute / 60.0
        self.burst = float(burst)
        self.clock = clock
        self.buckets: dict[str, tuple[float, float]] = {}  # key -> (tokens, at)
        self.lock = threading.Lock()

    def take(self, key: str) -> float:
        now = self.clock()
        with self.lock:
            tokens, at = self.buckets.get(key, (self.burst, now))
            tokens = min(self.burst, tokens + (now - at) * self.rate_s)
            if tokens >= 1.0:
                self.buckets[key] = (tokens - 1.0, now)
                if len(self.buckets) > 10_000:
                    self._forget_full(now)
                return 0.0
            self.buckets[key] = (tokens, now)
            return (1.0 - tokens) / self.rate_s

    def _forget_full(self, now: float) -> None:
        full = [k for k, (t, at) in self.buckets.items() if t + (now - at) * self.rate_s >= self.burst]
        for key in full:
            del self.buckets[key]


def retry_after(seconds: float) -> str:
    return str(max(1, math.ceil(seconds)))


class Admission:
    """At most ``limit`` requests inside the gateway at once (routing, queued or streaming).

    Beyond that the gateway answers 503 at once instead of queueing without bound:
    a client retrying later is better than a queue that only grows.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.pending = 0
        self.lock = threading.Lock()

    def enter(self) -> bool:
        with self.lock:
            if self.pending >= self.limit:
                return False
            self.pending += 1
            return True

    def leave(self) -> None:
        with self.lock:
            self.pending -= 1

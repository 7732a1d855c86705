"""Per-key rate limits (token buckets) and admission control (a bounded number of pending requests)."""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Refusal:
    """Why a key must wait: ``limit`` names the setting it ran into, ``message`` says it to the client."""

    wait_s: float
    limit: str  # "burst" or "rate_per_minute" (the gateway.limits key)
    message: str


class RateLimiter:
    """One token bucket per key: ``burst`` requests at once, refilled at ``rate_per_minute``.

    ``take(key)`` returns None when the request may go, else a ``Refusal`` with the seconds
    until it could (the ``Retry-After`` a 429 carries) and the limit that was hit: the rate
    when the key sent more than ``rate_per_minute`` requests within a minute, else the burst
    (many requests at once, fewer than the rate allows in a minute). Buckets of idle keys are
    dropped once full again.
    """

    def __init__(self, rate_per_minute: float, burst: int, clock=time.monotonic) -> None:
        self.rate_per_minute = rate_per_minute
        self.rate_s = rate_per_minute / 60.0
        self.burst = float(burst)
        self.clock = clock
        # key -> (tokens, at, full_at: when the bucket was last full, taken: requests let through since)
        self.buckets: dict[str, tuple[float, float, float, int]] = {}
        self.lock = threading.Lock()

    def take(self, key: str) -> Refusal | None:
        now = self.clock()
        with self.lock:
            tokens, at, full_at, taken = self.buckets.get(key, (self.burst, now, now, 0))
            tokens = min(self.burst, tokens + (now - at) * self.rate_s)
            if tokens >= self.burst:
                full_at, taken = now, 0
            if tokens >= 1.0:
                self.buckets[key] = (tokens - 1.0, now, full_at, taken + 1)
                if len(self.buckets) > 10_000:
                    self._forget_full(now)
                return None
            self.buckets[key] = (tokens, now, full_at, taken)
        return self._refusal((1.0 - tokens) / self.rate_s, now - full_at, taken)

    def _refusal(self, wait_s: float, since_full_s: float, taken: int) -> Refusal:
        # `taken` requests since the bucket was last full, and none refused before it was: beyond the rate
        # only if they are more than a minute's worth, or went on for longer than a minute.
        after = f"retry after {retry_after(wait_s)} s"
        if taken > self.rate_per_minute or since_full_s >= 60.0:
            return Refusal(wait_s, "rate_per_minute",
                           f"rate limit of {self.rate_per_minute:g} requests per minute exceeded for this key "
                           f"({taken} in {since_full_s:.0f} s); {after}, or raise gateway.limits.rate_per_minute")
        return Refusal(wait_s, "burst", f"burst limit of {self.burst:g} requests exceeded for this key ({taken} in "
                                        f"{since_full_s:.1f} s, refilled at {self.rate_per_minute:g} per minute); "
                                        f"{after}, or raise gateway.limits.burst")

    def _forget_full(self, now: float) -> None:
        full = [k for k, (t, at, _, _) in self.buckets.items() if t + (now - at) * self.rate_s >= self.burst]
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

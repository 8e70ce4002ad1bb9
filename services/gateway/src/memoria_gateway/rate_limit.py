"""A token bucket: how many messages one WebSocket connection may send.

Up to ``burst`` messages pass at once; after that the bucket refills at ``per_minute`` a
minute, so a steady sender is held to that rate and a quiet one gets its burst back.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

SECONDS_PER_MINUTE = 60.0


class TokenBucket:
    def __init__(
        self, per_minute: int, burst: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if per_minute < 1 or burst < 1:
            raise ValueError("a rate limit needs at least one message a minute and a burst of 1")
        self.per_minute = per_minute
        self.burst = burst
        self._rate = per_minute / SECONDS_PER_MINUTE  # tokens per second
        self._clock = clock
        self._tokens = float(burst)
        self._at = clock()

    def take(self) -> float:
        """Take a token: 0 when one was there, else the seconds until one will be (and
        nothing is taken: a refused message costs nothing)."""
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._at) * self._rate)
        self._at = now
        if self._tokens >= 1:
            self._tokens -= 1
            return 0.0
        return (1 - self._tokens) / self._rate

    def give_back(self) -> None:
        """Return the token just taken, for a message refused after all (by another limit)."""
        self._tokens = min(self.burst, self._tokens + 1)


def retry_after_seconds(wait: float) -> int:
    """A wait as whole seconds for people: never "0 s" while a message would still fail."""
    return max(1, math.ceil(wait))

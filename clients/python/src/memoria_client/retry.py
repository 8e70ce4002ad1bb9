"""When to send a refused request again: on 429 and 503, after the wait the gateway asks for
(``Retry-After``) or a doubling backoff, a bounded number of times."""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from memoria_client.errors import retry_after


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 4
    """Tries in all, the first included; 1 turns retrying off."""
    backoff: float = 0.5
    """The first wait when the gateway names none; it doubles each time."""
    max_wait: float = 30.0
    """The longest single wait: a longer ``Retry-After`` is not waited for, the error is
    raised at once (its ``retry_after`` says how long)."""
    unavailable: bool = True
    """Whether a 503 is retried at all: False reports it at once, for a caller (an
    interactive one) that would rather tell its user than wait through the backoff."""

    def wait(
        self, response: httpx.Response, attempt: int, *, retry_unavailable: bool
    ) -> float | None:
        """Seconds to wait before try ``attempt + 1``, or None to give the answer as it is."""
        status = response.status_code
        if attempt >= self.attempts:
            return None
        if status != 429 and not (status == 503 and retry_unavailable and self.unavailable):
            return None
        asked = retry_after(response)
        delay = asked if asked is not None else self.backoff * 2 ** (attempt - 1)
        return delay if delay <= self.max_wait else None


NO_RETRY = RetryPolicy(attempts=1)

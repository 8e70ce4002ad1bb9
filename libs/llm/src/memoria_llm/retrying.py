"""One remote LLM call, attempted until it succeeds or stops being worth retrying.

Both remote providers (Gemini, OpenAI-compatible) need the same loop: a timeout per attempt,
exponential backoff with jitter that never waits less than the server asked for (a 429's
retry delay), and any failure that escapes turned into the port's errors. What differs per
provider — which failures are transient, where the server's delay is, how a failure reads —
comes in as functions.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

import tenacity

from memoria_llm.port import LLMError

log = logging.getLogger("memoria.llm")

R = TypeVar("R")

Translate = Callable[[BaseException, int], LLMError | None]
"""A failure and the attempts made → the port's error, or None to let it propagate."""


class CallPolicy:
    def __init__(
        self,
        *,
        attempts: int,
        timeout_s: float,
        backoff_base_s: float,
        backoff_max_s: float,
        is_transient: Callable[[BaseException], bool],
        server_delay: Callable[[BaseException | None], float],
    ) -> None:
        self.attempts = max(1, attempts)
        self.timeout_s = timeout_s
        self._backoff = tenacity.wait_exponential_jitter(
            initial=backoff_base_s, max=backoff_max_s, jitter=backoff_base_s
        )
        self._backoff_max_s = backoff_max_s
        self._is_transient = is_transient
        self._server_delay = server_delay

    async def call(self, send: Callable[[], Awaitable[R]], translate: Translate) -> R:
        retrying = tenacity.AsyncRetrying(
            stop=tenacity.stop_after_attempt(self.attempts),
            wait=self._wait,
            retry=tenacity.retry_if_exception(self._is_transient),
            before_sleep=tenacity.before_sleep_log(log, logging.WARNING),
            reraise=True,
        )
        attempts = 0
        try:
            async for attempt in retrying:
                with attempt:
                    attempts = attempt.retry_state.attempt_number
                    async with asyncio.timeout(self.timeout_s):
                        return await send()
        except LLMError:
            raise
        except Exception as exc:
            error = translate(exc, attempts)
            if error is None:
                raise
            raise error from exc
        raise AssertionError("tenacity re-raises the last failure")

    def _wait(self, state: tenacity.RetryCallState) -> float:
        failure = state.outcome.exception() if state.outcome else None
        return min(self._backoff_max_s, max(self._backoff(state), self._server_delay(failure)))

    async def piece(self, receive: Callable[[], Awaitable[R]], translate: Translate) -> R:
        """The next piece of an open stream within the per-attempt timeout. Not retried: the
        pieces already yielded cannot be taken back."""
        try:
            async with asyncio.timeout(self.timeout_s):
                return await receive()
        except Exception as exc:
            error = translate(exc, 1)
            if error is None:
                raise
            raise error from exc

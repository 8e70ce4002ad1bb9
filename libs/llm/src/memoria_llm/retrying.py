"""Each remote request attempted until it succeeds or stops being worth retrying: a timeout
per attempt, exponential backoff with jitter that never waits less than the server asked for,
and any failure that escapes turned into the port's errors. Which failures are transient and
where the server says how long to wait differ per provider, and come in as functions."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import NoReturn, TypeVar

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
        self.is_transient = is_transient
        self._backoff = tenacity.wait_exponential_jitter(
            initial=backoff_base_s, max=backoff_max_s, jitter=backoff_base_s
        )
        self._backoff_max_s = backoff_max_s
        self._server_delay = server_delay

    async def call(self, send: Callable[[], Awaitable[R]], translate: Translate) -> R:
        retrying = tenacity.AsyncRetrying(
            stop=tenacity.stop_after_attempt(self.attempts),
            wait=self._wait,
            retry=tenacity.retry_if_exception(self.is_transient),
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
            _reraise(exc, translate(exc, attempts))
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
            _reraise(exc, translate(exc, 1))


def _reraise(exc: Exception, error: LLMError | None) -> NoReturn:
    if error is None:
        raise exc
    raise error from exc

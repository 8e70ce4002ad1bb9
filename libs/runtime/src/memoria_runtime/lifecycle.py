"""The start and stop of a service's parts, in one order: started in the order added,
stopped in the reverse order, so a part stops before what it uses does."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from memoria_runtime.health import ReadinessCheck, stop_task

Step = Callable[[], Awaitable[None]]


class Lifecycle:
    """Steps of a service: each a start, a stop, or both. A start that fails stops what had
    started, and the failure goes on to the caller."""

    def __init__(self) -> None:
        self._steps: list[tuple[Step | None, Step | None]] = []
        self._started: contextlib.AsyncExitStack | None = None
        self.readiness_checks: list[ReadinessCheck] = []

    def add_readiness_check(self, check: ReadinessCheck) -> None:
        """Something of this part that can make the service unready (health.Health)."""
        self.readiness_checks.append(check)

    def add(self, start: Step | None = None, stop: Step | None = None) -> None:
        self._steps.append((start, stop))

    def include(self, other: Lifecycle) -> None:
        """``other``'s steps as one step of this one (and its readiness checks)."""
        self.add(other.start, other.stop)
        self.readiness_checks.extend(other.readiness_checks)

    def add_task(self, loop: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """A background loop, started at this step and stopped with the bounded stop
        (health.stop_task: a loop that ignores its cancel cannot hang the stop)."""
        running: list[asyncio.Task[None]] = []

        async def start() -> None:
            running.append(asyncio.create_task(loop(), name=getattr(loop, "__name__", None)))

        async def stop() -> None:
            while running:
                await stop_task(running.pop())

        self.add(start, stop)

    async def start(self) -> None:
        if self._started is not None:
            raise RuntimeError("already started")
        started = contextlib.AsyncExitStack()
        async with contextlib.AsyncExitStack() as on_failure:
            on_failure.push_async_callback(started.aclose)
            for start, stop in self._steps:
                if start is not None:
                    await start()
                if stop is not None:
                    started.push_async_callback(stop)
            on_failure.pop_all()  # all started: keep them running
        self._started = started

    async def stop(self) -> None:
        """Stop what started, last first; every stop runs even when one fails."""
        started, self._started = self._started, None
        if started is not None:
            await started.aclose()

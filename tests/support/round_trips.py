"""Counting how many times a service waits for Redis (a wait is a round trip, a pipeline's
commands included), its appends to the streams included: each one is latency on the user's
answer, so a change that adds one should be a choice, not an accident."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pytest
from in_process_bus import RecordingPublisher
from redis.asyncio.connection import AbstractConnection

from memoria_contracts.events import Envelope
from memoria_contracts.streams import Stream
from memoria_runtime.bus import EventPublisher, create_bus
from memoria_runtime.bus.signing import Signer
from memoria_runtime.settings import Settings


class WritingPublisher(RecordingPublisher):
    """Appends to the streams for real (so its round trips count) and keeps what it sent."""

    def __init__(self, redis_url: str, streams: Iterable[Stream]) -> None:
        super().__init__()
        settings = Settings.load(_env_file=None, redis_url=redis_url)
        self._real = EventPublisher(create_bus(settings.bus), settings.bus, Signer("test secret"))
        for stream in streams:
            self._real.declare(stream, "the service's output")

    async def publish(self, stream: Stream, event: Envelope) -> None:
        await super().publish(stream, event)
        await self._real.publish(stream, event)

    async def publish_all(self, stream: Stream, events: Sequence[Envelope]) -> None:
        await super().publish_all(stream, events)
        await self._real.publish_all(stream, events)

    async def queue(self, pipe: Any, stream: Stream, event: Envelope) -> None:
        await super().queue(pipe, stream, event)
        await self._real.queue(pipe, stream, event)

    async def execute(self, pipe: Any, *, raise_on_error: bool = True) -> list[Any]:
        return await self._real.execute(pipe, raise_on_error=raise_on_error)


@contextmanager
def round_trips(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Counts what is sent to Redis: one packet per command, or per pipeline."""
    sent = [0]
    send = AbstractConnection.send_packed_command

    async def counting(self: AbstractConnection, *args: Any, **kwargs: Any) -> None:
        sent[0] += 1
        await send(self, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(AbstractConnection, "send_packed_command", counting)
        yield sent

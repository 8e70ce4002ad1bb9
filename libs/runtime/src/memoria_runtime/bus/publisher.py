"""Publishing envelopes: signed, framed entries with approximate MAXLEN trimming, and the
AsyncAPI description of each published stream."""

from __future__ import annotations

from collections.abc import Sequence

from faststream.redis import StreamSub
from prometheus_client import Counter
from redis.asyncio.client import Pipeline

from memoria_contracts.events import Envelope
from memoria_contracts.streams import Stream
from memoria_runtime import metrics
from memoria_runtime.bus.broker import MemoriaBroker
from memoria_runtime.bus.entries import DATA_FIELD
from memoria_runtime.bus.framing import frame_for_stream
from memoria_runtime.bus.signing import Signer, signer_for
from memoria_runtime.settings import Settings


class EventPublisher:
    """Declares a FastStream publisher per stream a service writes, so the stream appears in
    the service's AsyncAPI document, and appends envelopes to those streams.

    The append itself is one XADD on the bus' client rather than FastStream's ``publish``:
    that runs the telemetry and Prometheus middlewares per entry, and a cycle publishes
    about ten (ADR 0013). The entry is framed exactly as FastStream frames it."""

    def __init__(
        self, broker: MemoriaBroker, settings: Settings, signer: Signer | None = None
    ) -> None:
        self._broker = broker
        self._maxlen = settings.stream_maxlen
        self._signer = signer or signer_for(settings)
        self._published: dict[Stream, Counter] = {}

    def declare(self, stream: Stream, description: str) -> None:
        self._broker.publisher(
            stream=StreamSub(stream.value, maxlen=self._maxlen),
            title=f"{stream.value}:publish",
            description=description,
            schema=Envelope,
        )
        self._published[stream] = metrics.published_counter(self._broker.service, stream.value)

    async def publish(self, stream: Stream, event: Envelope) -> None:
        framed = await self._framed(stream, event)
        # approximate=True (redis-py's default) sends MAXLEN with '~': trimming stays O(1).
        await self._broker.redis.xadd(stream.value, {DATA_FIELD: framed}, maxlen=self._maxlen)
        self._published[stream].inc()

    async def publish_all(self, stream: Stream, events: Sequence[Envelope]) -> None:
        """Append ``events`` in order, in one round trip."""
        if len(events) <= 1:  # nothing to send, or one append: no pipeline needed
            for event in events:
                await self.publish(stream, event)
            return
        async with self._broker.redis.pipeline(transaction=False) as pipe:
            for event in events:
                await self.queue(pipe, stream, event)
            await pipe.execute()

    async def queue(self, pipe: Pipeline, stream: Stream, event: Envelope) -> None:
        """The append queued on ``pipe``, to go in the round trip of the writes it must follow
        (the server runs a pipeline's commands in order). Counted as published when queued."""
        framed = await self._framed(stream, event)
        pipe.xadd(stream.value, {DATA_FIELD: framed}, maxlen=self._maxlen)
        self._published[stream].inc()

    async def _framed(self, stream: Stream, event: Envelope) -> bytes:
        if stream not in self._published:
            raise KeyError(f"stream {stream.value} was not declared by this service")
        return await frame_for_stream(self._broker, self._signer, stream, event)

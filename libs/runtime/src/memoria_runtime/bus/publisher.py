"""Publishing envelopes: signed, framed entries with approximate MAXLEN trimming, each
published stream declared on the service's bus (its AsyncAPI document). An envelope goes to
its user's partition of the stream (partitions.py); with routed fan-out, a chat.out entry is
also copied to the inboxes of the gateways holding its user's sockets (routed.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from weakref import WeakKeyDictionary

from prometheus_client import Counter
from redis.asyncio.client import Pipeline
from redis.exceptions import NoScriptError

from memoria_contracts.events import Envelope
from memoria_contracts.streams import Stream
from memoria_runtime import metrics
from memoria_runtime.bus.channels import Channel
from memoria_runtime.bus.entries import DATA_FIELD
from memoria_runtime.bus.framing import frame_for_stream
from memoria_runtime.bus.routed import RoutedAppend
from memoria_runtime.bus.service_bus import ServiceBus
from memoria_runtime.bus.signing import Signer, signer_for
from memoria_runtime.bus.topology import append, groups_of
from memoria_runtime.partitions import Partition, Partitions
from memoria_runtime.settings import BusSettings


@dataclass(frozen=True, slots=True)
class _Queued:
    """An append queued on a pipeline: where its reply will be, and what to append again if
    its stream was missing."""

    index: int
    key: str
    """The partition of the stream appended to."""
    framed: bytes
    routed: tuple[Partition, str] | None = None
    """A routed chat.out append: its partition and user."""


class EventPublisher:
    """Appends envelopes to the streams a service declares it writes (each declaration is a
    channel of the service's AsyncAPI document).

    The append is one XADD on the bus' client rather than FastStream's ``publish``: that
    runs the telemetry and Prometheus middlewares per entry, and a cycle publishes about ten
    (ADR 0013). The entry is framed exactly as FastStream frames it."""

    def __init__(
        self, broker: ServiceBus, settings: BusSettings, signer: Signer | None = None
    ) -> None:
        self._broker = broker
        self._partitions = settings.partitions
        self._maxlen = settings.stream_maxlen
        self._signer = signer or signer_for(settings)
        self._published: dict[Stream, Counter] = {}
        self._queued: WeakKeyDictionary[Pipeline, list[_Queued]] = WeakKeyDictionary()
        self._routed = (
            RoutedAppend(broker.redis, maxlen=self._maxlen) if settings.routed_fan_out else None
        )

    def declare(self, stream: Stream, description: str) -> None:
        self._broker.declare(Channel(stream.value, "publish", "xadd", description))
        self._published[stream] = metrics.published_counter(self._broker.service, stream.value)

    @property
    def partitions(self) -> Partitions:
        return self._partitions

    def key(self, stream: Stream, event: Envelope) -> str:
        """The partition of ``stream`` that ``event`` goes to: its user's."""
        return self._partitions.of(event.user_id).scoped(stream.value)

    async def publish(self, stream: Stream, event: Envelope) -> None:
        framed = await self._framed(stream, event)
        if self._routed is not None and stream is Stream.CHAT_OUT:
            part = self._partitions.of(event.user_id)
            await self._routed.append(part, event.user_id, framed)
        else:
            await append(self._broker.redis, self.key(stream, event), framed, maxlen=self._maxlen)
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
            await self.execute(pipe)

    async def queue(self, pipe: Pipeline, stream: Stream, event: Envelope) -> None:
        """The append queued on ``pipe``, to go in the round trip of the writes it must follow
        (the server runs a pipeline's commands in order). Counted as published when queued.
        Run the pipeline with :meth:`execute`, which makes again an append that found its
        stream missing."""
        framed = await self._framed(stream, event)
        key = self.key(stream, event)
        if self._routed is not None and stream is Stream.CHAT_OUT:
            part = self._partitions.of(event.user_id)
            routed = _Queued(len(pipe), key, framed, (part, event.user_id))
            self._queued.setdefault(pipe, []).append(routed)
            self._routed.queue(pipe, part, event.user_id, framed)
            self._published[stream].inc()
            return
        self._queued.setdefault(pipe, []).append(_Queued(len(pipe), key, framed))
        # approximate=True (redis-py's default) sends MAXLEN with '~': trimming stays O(1).
        pipe.xadd(
            key,
            {DATA_FIELD: framed},
            maxlen=self._maxlen,
            nomkstream=bool(groups_of(stream.value)),  # topology.py
        )
        self._published[stream].inc()

    async def execute(self, pipe: Pipeline, *, raise_on_error: bool = True) -> list[Any]:
        """``pipe.execute()``; then each queued append that found no stream (a broker flushed
        or restarted empty since the last one) is made again, in order, once its stream
        exists with its groups, and each routed append the broker had no script for (it
        restarted) is made again with the script loaded. Returns the pipeline's replies."""
        queued = self._queued.pop(pipe, [])
        routed = any(item.routed for item in queued)
        replies = await pipe.execute(raise_on_error=raise_on_error and not routed)
        for item in queued:
            reply = replies[item.index]
            if item.routed is not None and self._routed is not None:
                if isinstance(reply, NoScriptError):
                    part, user_id = item.routed
                    replies[item.index] = await self._routed.append(part, user_id, item.framed)
            elif reply is None:
                replies[item.index] = await append(
                    self._broker.redis, item.key, item.framed, maxlen=self._maxlen
                )
        if raise_on_error and routed:
            for reply in replies:
                if isinstance(reply, Exception):
                    raise reply
        return replies

    async def _framed(self, stream: Stream, event: Envelope) -> bytes:
        if stream not in self._published:
            raise KeyError(f"stream {stream.value} was not declared by this service")
        return await frame_for_stream(self._signer, stream, event)

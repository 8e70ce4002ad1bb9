"""Publishing envelopes: signed JSON bytes, approximate MAXLEN trimming, and AsyncAPI
descriptions."""

from __future__ import annotations

from faststream.redis import RedisBroker, StreamSub
from faststream.redis.publisher.usecase import StreamPublisher

from memoria_contracts.events import Envelope
from memoria_contracts.streams import Stream
from memoria_runtime.bus.signing import Signer, signer_for
from memoria_runtime.settings import Settings


class EventPublisher:
    """Declares one FastStream publisher per stream a service writes, so the published
    streams appear in the service's AsyncAPI document, and publishes envelopes to them."""

    def __init__(
        self, broker: RedisBroker, settings: Settings, signer: Signer | None = None
    ) -> None:
        self._broker = broker
        self._maxlen = settings.stream_maxlen
        self._signer = signer or signer_for(settings)
        self._publishers: dict[Stream, StreamPublisher] = {}

    def declare(self, stream: Stream, description: str) -> None:
        # redis-py sends MAXLEN with '~' (approximate) by default: trimming stays O(1).
        self._publishers[stream] = self._broker.publisher(
            stream=StreamSub(stream.value, maxlen=self._maxlen),
            title=f"{stream.value}:publish",
            description=description,
            schema=Envelope,
        )

    async def publish(self, stream: Stream, event: Envelope) -> None:
        publisher = self._publishers.get(stream)
        if publisher is None:
            raise KeyError(f"stream {stream.value} was not declared by this service")
        # Bytes with no content type: consumers check the signature, JSON-decode them, then
        # validate the envelope.
        body = event.model_dump_json().encode()
        await publisher.publish(body, headers=self._signer.headers(stream.value, body))

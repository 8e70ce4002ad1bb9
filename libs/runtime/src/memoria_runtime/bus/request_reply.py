"""Request/reply over Redis: the request is a stream entry (durable, load-balanced by the
consumer group), the reply comes back on the process' reply channel (bus/replies.py). Both
are signed (bus/signing.py); a reply is signed for the request it answers."""

from __future__ import annotations

from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt

from memoria_contracts.events import Envelope, RpcFailure
from memoria_contracts.streams import Stream
from memoria_runtime.bus.service_bus import ServiceBus
from memoria_runtime.bus.signing import reply_channel, signer_for
from memoria_runtime.settings import BusSettings
from memoria_runtime.telemetry import current_trace_carrier

_ATTEMPTS = 2  # one retry: covers a reply lost while the serving replica restarted


class RpcError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


class RpcClient:
    def __init__(self, broker: ServiceBus, settings: BusSettings, stream: Stream) -> None:
        self._broker = broker
        self._stream = stream
        self._partitions = settings.partitions
        self._timeout = settings.rpc_timeout_seconds
        self._maxlen = settings.stream_maxlen
        self._signer = signer_for(settings)

    async def call(self, request: Envelope) -> Envelope:
        """Send ``request`` and return the reply; raise :class:`RpcError` on a failure reply
        and ``TimeoutError`` when nobody answered."""
        body = request.model_dump_json().encode()
        headers = {
            **current_trace_carrier(),
            **self._signer.headers(self._stream.value, body),
        }
        inbox = self._broker.replies
        # The event id correlates: a reply to the first attempt that comes late still
        # answers the second, which is the same request.
        try:
            async for attempt in AsyncRetrying(
                stop=stop_after_attempt(_ATTEMPTS),
                retry=retry_if_exception_type(TimeoutError),
                reraise=True,
            ):
                with attempt:
                    reply_body, reply_headers = await inbox.request(
                        # the user's partition; signed for the stream, as every entry is
                        self._partitions.of(request.user_id).scoped(self._stream.value),
                        body,
                        correlation_id=request.event_id,
                        headers=headers,
                        timeout_s=self._timeout,
                        maxlen=self._maxlen,
                    )
        finally:
            inbox.forget(request.event_id)
        problem = self._signer.problem(
            reply_channel(request.event_id), reply_body, dict(reply_headers)
        )
        if problem is not None:
            raise RpcError("bad_signature", f"refused a reply: {problem}")
        reply = Envelope.model_validate_json(reply_body)
        if isinstance(reply.payload, RpcFailure):
            raise RpcError(reply.payload.code, reply.payload.message)
        return reply

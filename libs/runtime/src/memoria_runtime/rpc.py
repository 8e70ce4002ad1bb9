"""Request/reply over Redis: the request is a stream entry (durable, load-balanced by the
consumer group), the reply comes back on a private pub/sub channel (FastStream ``request``).
Both are signed (bus/signing.py); a reply is signed for the request it answers."""

from __future__ import annotations

from typing import Any

from faststream.redis import RedisBroker
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt

from memoria_contracts.events import Envelope, RpcFailure
from memoria_contracts.streams import Stream
from memoria_runtime.bus.signing import reply_channel, signer_for
from memoria_runtime.settings import Settings

_ATTEMPTS = 2  # one retry: covers a reply lost while the serving replica restarted


class RpcError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


class RpcClient:
    def __init__(self, broker: RedisBroker, settings: Settings, stream: Stream) -> None:
        self._broker = broker
        self._stream = stream
        self._timeout = settings.rpc_timeout_seconds
        self._maxlen = settings.stream_maxlen
        self._signer = signer_for(settings)

    async def call(self, request: Envelope) -> Envelope:
        """Send ``request`` and return the reply; raise :class:`RpcError` on a failure reply
        and ``TimeoutError`` when nobody answered."""
        body = request.model_dump_json().encode()
        async for attempt in AsyncRetrying(
            stop=stop_after_attempt(_ATTEMPTS),
            retry=retry_if_exception_type(TimeoutError),
            reraise=True,
        ):
            with attempt:
                message = await self._broker.request(
                    body,
                    stream=self._stream.value,
                    timeout=self._timeout,
                    maxlen=self._maxlen,
                    headers=self._signer.headers(self._stream.value, body),
                )
        problem = self._signer.problem(
            reply_channel(request.event_id), bytes(message.body), message.headers
        )
        if problem is not None:
            raise RpcError("bad_signature", f"refused a reply: {problem}")
        decoded: Any = await message.decode()
        reply = (
            Envelope.model_validate(decoded)
            if isinstance(decoded, dict)
            else Envelope.model_validate_json(decoded)
        )
        if isinstance(reply.payload, RpcFailure):
            raise RpcError(reply.payload.code, reply.payload.message)
        return reply

"""Where the replies to this process' requests arrive: one pub/sub channel per process.

A request is a stream entry (durable, load-balanced by the consumer group) naming a reply
channel in its frame; the server publishes the reply there with the request's correlation
id. FastStream's ``request`` opens a pub/sub connection, subscribes a fresh channel, and
closes it again for every request: a new Redis connection (HELLO, CLIENT SETINFO,
SUBSCRIBE, UNSUBSCRIBE) per memory call, two per cycle. The inbox subscribes once and
matches replies to waiting requests by correlation id. Servers are unchanged: they answer
to whatever channel the frame names, as they did for FastStream's requests.

After a broker restart redis-py reconnects the pub/sub connection and subscribes the
channel again; a reply published while it was away is lost, which the caller sees as a
timeout (request_reply.py retries once).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Mapping
from typing import Any

from faststream.redis.parser.message import MessageFormat

from memoria_runtime.bus.topology import append
from memoria_runtime.health import stop_task

log = logging.getLogger("memoria.bus.replies")

_LISTEN_TIMEOUT_S = 1.0
_RETRY_AFTER_S = 0.2

Reply = tuple[bytes, Mapping[str, Any]]
"""A reply's body and headers."""


class ReplyInbox:
    def __init__(
        self,
        redis: Any,
        message_format: type[MessageFormat],
        consumer: str,
        *,
        sharded: bool = False,
    ) -> None:
        """``sharded``: listen with ``SSUBSCRIBE`` (a cluster: replies are published on the
        channel's shard only, not broadcast to every node)."""
        self.channel = f"memoria:reply:{consumer}:{uuid.uuid4().hex[:12]}"
        self._redis = redis
        self._sharded = sharded
        self._format = message_format
        self._waiting: dict[str, asyncio.Future[Reply]] = {}
        self._listener: asyncio.Task[None] | None = None
        self._opening = asyncio.Lock()

    async def request(
        self,
        stream: str,
        body: bytes,
        *,
        correlation_id: str,
        headers: Mapping[str, str],
        timeout_s: float,
        maxlen: int,
    ) -> Reply:
        """Append a request to ``stream`` and wait for its reply; ``TimeoutError`` when none
        came. Requests sent again with the same correlation id take whichever reply comes
        first."""
        await self._open()
        waiting = self._waiting.get(correlation_id)
        if waiting is None or waiting.done():
            waiting = asyncio.get_running_loop().create_future()
            self._waiting[correlation_id] = waiting
        try:
            frame = await self._format.encode(
                message=body,
                reply_to=self.channel,
                headers=dict(headers),
                correlation_id=correlation_id,
            )
            await append(self._redis, stream, frame, maxlen=maxlen)
            async with asyncio.timeout(timeout_s):
                return await asyncio.shield(waiting)
        finally:
            if waiting.done():
                self._waiting.pop(correlation_id, None)

    def forget(self, correlation_id: str) -> None:
        """The caller gave up on this request: a late reply is dropped."""
        waiting = self._waiting.pop(correlation_id, None)
        if waiting is not None and not waiting.done():
            waiting.cancel()

    async def close(self) -> None:
        if self._listener is not None:
            await stop_task(self._listener)
            self._listener = None
        for waiting in self._waiting.values():
            waiting.cancel()
        self._waiting.clear()

    async def _open(self) -> None:
        if self._listener is not None:
            return
        async with self._opening:
            if self._listener is not None:
                return
            pubsub = self._redis.pubsub(ignore_subscribe_messages=True)
            # before any request names the channel
            if self._sharded:
                # the channel's shard is looked up in the slots the client learns at its
                # first command: learn them now if none was sent yet
                await self._redis.initialize()
                await pubsub.ssubscribe(self.channel)
            else:
                await pubsub.subscribe(self.channel)
            self._listener = asyncio.create_task(self._listen(pubsub), name="reply inbox")

    async def _listen(self, pubsub: Any) -> None:
        try:
            while True:
                try:
                    message = await self._next(pubsub)
                except Exception as exc:  # the broker away, a shard failing over
                    log.warning("reply inbox: %r; listening again", exc)
                    await asyncio.sleep(_RETRY_AFTER_S)
                    continue
                if message is None or message.get("type") not in ("message", "smessage"):
                    continue
                try:
                    self._deliver(message["data"])
                except Exception:  # anyone can publish here; the inbox must keep listening
                    log.exception("reply inbox: dropped an unreadable reply")
        finally:
            with contextlib.suppress(Exception):
                await pubsub.aclose()

    async def _next(self, pubsub: Any) -> Any:
        if self._sharded:
            return await pubsub.get_sharded_message(
                ignore_subscribe_messages=True, timeout=_LISTEN_TIMEOUT_S
            )
        return await pubsub.get_message(ignore_subscribe_messages=True, timeout=_LISTEN_TIMEOUT_S)

    def _deliver(self, data: bytes) -> None:
        body, headers = self._format.parse(data)
        waiting = self._waiting.get(str(headers.get("correlation_id", "")))
        if waiting is None or waiting.done():
            return  # a late reply to a request given up on
        waiting.set_result((body, headers))

"""Chat over the gateway's WebSocket: send one message, yield the frames of the cycle that
answers it, end at its ``cycle_end``.

A dropped connection is resumed with ``?since=<last event id>`` (nothing lost, nothing
repeated); a message not yet accepted is sent again under the same client id, which the
gateway takes at most once. ``rate_limited`` and ``broker_unavailable`` refusals are waited
out and the message sent again, a bounded number of times.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import urlencode

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus
from websockets.typing import Subprotocol

from memoria_client.errors import AuthenticationError, ChatError, GatewayUnreachable
from memoria_client.models import (
    AcceptedFrame,
    CycleEndFrame,
    ErrorFrame,
    Frame,
    Memory,
    Message,
    ResumedFrame,
    parse_frame,
)

SOCKET_REFUSED: Final = {4401: "unauthorized", 4429: "too_many_connections"}
RESEND_CODES: Final = frozenset({"rate_limited", "broker_unavailable"})
MAX_FRAME_BYTES: Final = 4 * 1024 * 1024


@dataclass(frozen=True)
class ChatOptions:
    idle_timeout: float = 180.0
    """Longest wait for the next frame of the cycle; a cycle's steps send status lines."""
    reconnects: int = 5
    """Reconnections after a dropped socket within one chat."""
    resends: int = 5
    """Sends again after ``rate_limited`` / ``broker_unavailable``."""
    max_wait: float = 30.0
    """Longest wait before a resend."""


SOCKET_SUBPROTOCOL: Final = "memoria.v1"
BEARER_SUBPROTOCOL_PREFIX: Final = "bearer."


def ws_url(base_url: str, since: str | None) -> str:
    """The socket's URL. It holds no token: that travels as a subprotocol (URLs get logged
    by proxies and servers)."""
    base = base_url.rstrip("/")
    scheme, _, rest = base.partition("://")
    ws_scheme = {"https": "wss", "http": "ws"}.get(scheme, scheme)
    query = f"?{urlencode({'since': since})}" if since else ""
    return f"{ws_scheme}://{rest}/ws{query}"


def subprotocols(token: str) -> list[Subprotocol]:
    """What the gateway reads the token from: ``memoria.v1`` and ``bearer.<token>``; it
    echoes only the first."""
    return [Subprotocol(SOCKET_SUBPROTOCOL), Subprotocol(BEARER_SUBPROTOCOL_PREFIX + token)]


@dataclass
class _Cycle:
    """What is known so far of the cycle answering our message."""

    message_id: str | None = None  # from ``accepted``
    cycle_id: str | None = None  # from the echo of our message
    early: list[Frame] = field(default_factory=list)  # frames seen before ``accepted``

    def owns(self, frame: Frame, thread: str) -> bool:
        if getattr(frame, "thread_id", None) != thread:
            return False
        if self.cycle_id is None and isinstance(frame, Message) and frame.id == self.message_id:
            self.cycle_id = frame.cycle_id
        return self.cycle_id is not None and getattr(frame, "cycle_id", None) == self.cycle_id


async def chat_frames(
    base_url: str,
    token: str,
    content: str,
    *,
    thread: str,
    message_id: str | None = None,
    since: str | None = None,
    cycle_id: str | None = None,
    options: ChatOptions = ChatOptions(),
) -> AsyncIterator[Frame]:
    """The ``accepted`` frame, then every frame of the answering cycle up to its
    ``cycle_end``. To pick up a chat that was interrupted, pass the same ``message_id``, the
    last ``event_id`` received as ``since`` and the frames' ``cycle_id``."""
    client_id = message_id or uuid.uuid4().hex
    cycle = _Cycle(cycle_id=cycle_id)
    last_event = since
    reconnects = resends = 0
    outgoing = json.dumps(
        {"type": "message", "thread_id": thread, "content": content, "id": client_id}
    )
    while True:
        try:
            async with await _open(base_url, token, last_event) as socket:
                if cycle.message_id is None:
                    await socket.send(outgoing)
                while True:
                    frame = await _next_frame(socket, options.idle_timeout)
                    if frame is None:
                        continue
                    last_event = getattr(frame, "event_id", None) or last_event
                    if isinstance(frame, ErrorFrame):
                        if frame.code not in RESEND_CODES or resends >= options.resends:
                            raise ChatError(frame.code, frame.message, frame.retry_after)
                        resends += 1
                        await asyncio.sleep(_resend_wait(frame, resends, options))
                        await socket.send(outgoing)
                    elif isinstance(frame, AcceptedFrame) and cycle.message_id is None:
                        cycle.message_id = frame.id
                        yield frame
                        for early in cycle.early:
                            if cycle.owns(early, thread):
                                yield early
                        cycle.early.clear()
                    elif isinstance(frame, ResumedFrame):
                        continue  # replay done; live frames follow
                    elif cycle.message_id is None:
                        cycle.early.append(frame)
                    elif cycle.owns(frame, thread):
                        yield frame
                        if isinstance(frame, CycleEndFrame):
                            return
        except ConnectionClosed as exc:
            code = exc.rcvd.code if exc.rcvd is not None else None
            if code in SOCKET_REFUSED:
                raise ChatError(SOCKET_REFUSED[code], "the gateway refused the socket") from None
            if reconnects >= options.reconnects:
                raise ChatError("connection_lost", "the chat socket kept closing") from None
            reconnects += 1
            await asyncio.sleep(min(options.max_wait, 0.5 * 2 ** (reconnects - 1)))


async def _open(base_url: str, token: str, since: str | None) -> ClientConnection:
    try:
        return await connect(
            ws_url(base_url, since),
            subprotocols=subprotocols(token),
            max_size=MAX_FRAME_BYTES,
            open_timeout=10,
        )
    except InvalidStatus as exc:
        status = exc.response.status_code
        if status == 401:
            raise AuthenticationError(status, "the gateway refused the token") from None
        raise ChatError("handshake_failed", f"the gateway answered {status}") from None
    except (OSError, TimeoutError, InvalidHandshake) as exc:
        # Name the gateway only: the exception's text may quote the handshake's headers.
        raise GatewayUnreachable(
            f"cannot open the chat socket at {base_url}: {type(exc).__name__}"
        ) from None


async def _next_frame(socket: ClientConnection, idle_timeout: float) -> Frame | None:
    try:
        raw = await asyncio.wait_for(socket.recv(), idle_timeout)
    except TimeoutError:
        raise ChatError("timeout", f"no frame for {idle_timeout:g} s") from None
    return parse_frame(raw)


def _resend_wait(frame: ErrorFrame, attempt: int, options: ChatOptions) -> float:
    asked = frame.retry_after if frame.retry_after is not None else 2 ** (attempt - 1)
    if asked > options.max_wait:
        raise ChatError(frame.code, frame.message, frame.retry_after)
    return float(asked)


@dataclass(frozen=True)
class ChatReply:
    """A finished cycle, read from its frames: the assistant's answer, the memories shown
    (found or saved), the steps taken and why the cycle ended."""

    thread_id: str
    cycle_id: str | None
    message_id: str
    answer: str
    actions: list[str]
    reason: str
    memories: list[Memory | Any]
    messages: list[Message]
    usage: dict[str, Any] | None = None

    @classmethod
    async def collect(cls, frames: AsyncIterator[Frame]) -> ChatReply:
        accepted: AcceptedFrame | None = None
        latest: dict[str, Message] = {}  # by id: a message may come again, keep the latest
        async for frame in frames:
            if isinstance(frame, AcceptedFrame):
                accepted = frame
            elif isinstance(frame, Message) and frame.modal != "textForReplace":
                latest[frame.id] = frame
            elif isinstance(frame, CycleEndFrame):
                if accepted is None:
                    break
                messages = list(latest.values())
                return cls(
                    thread_id=frame.thread_id,
                    cycle_id=frame.cycle_id,
                    message_id=accepted.id,
                    answer="\n\n".join(
                        str(m.content)
                        for m in messages
                        if m.role == "assistant" and m.modal == "text"
                    ),
                    actions=frame.actions,
                    reason=frame.reason,
                    memories=[_memory(m.content) for m in messages if m.modal == "memory"],
                    messages=messages,
                    usage=frame.usage,
                )
        raise ChatError("incomplete", "the chat ended before its cycle did")


def _memory(content: Any) -> Memory | Any:
    """A memory message's content as a ``Memory`` when it is one, else as sent."""
    try:
        return Memory.model_validate(content)
    except ValueError:
        return content

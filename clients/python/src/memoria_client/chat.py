"""One message and its answer, over a :class:`~memoria_client.conversation.Conversation`:
send it, yield the frames of the cycle that answers it, end at its ``cycle_end``.

The conversation resumes a dropped socket with ``?since=<last event id>`` (nothing lost,
nothing repeated) and sends a message whose reply was lost again under the same client id,
which the gateway takes at most once. ``rate_limited`` and ``broker_unavailable`` refusals
are waited out here and the message sent again, a bounded number of times.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Final

from memoria_client.conversation import (
    Conversation,
    Disconnected,
    Reconnected,
    ReconnectFailed,
    subprotocols,
    ws_url,
)
from memoria_client.errors import ChatError
from memoria_client.models import (
    AcceptedFrame,
    CycleEndFrame,
    ErrorFrame,
    Frame,
    Memory,
    Message,
)

__all__ = ["ChatOptions", "ChatReply", "chat_frames", "subprotocols", "ws_url"]

RESEND_CODES: Final = frozenset({"rate_limited", "broker_unavailable"})


@dataclass(frozen=True)
class ChatOptions:
    idle_timeout: float = 180.0
    """Longest wait for the next frame of the cycle; a cycle's steps send status lines."""
    reconnects: int = 5
    """Reconnections after a dropped socket within one chat."""
    resends: int = 5
    """Sends again after ``rate_limited`` / ``broker_unavailable``."""
    max_wait: float = 30.0
    """Longest wait before a resend or a reconnection."""

    def reconnect_delays(self) -> tuple[float, ...]:
        """Doubling from half a second, ``reconnects`` of them, none over ``max_wait``."""
        return tuple(min(self.max_wait, 0.5 * 2**n) for n in range(self.reconnects))


@dataclass
class _Cycle:
    """What is known so far of the cycle answering our message."""

    message_id: str
    cycle_id: str | None = None  # from the echo of our message

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
    trust_env: bool = True,
) -> AsyncIterator[Frame]:
    """The ``accepted`` frame, then every frame of the answering cycle up to its
    ``cycle_end``. To pick up a chat that was interrupted, pass the same ``message_id``, the
    last ``event_id`` received as ``since`` and the frames' ``cycle_id``."""
    client_id = message_id or uuid.uuid4().hex
    async with Conversation(
        base_url,
        token,
        since=since,
        reconnect_delays=options.reconnect_delays(),
        trust_env=trust_env,
    ) as conversation:
        accepted = await _send_until_taken(conversation, thread, content, client_id, options)
        yield accepted
        cycle = _Cycle(accepted.id, cycle_id)
        while True:
            try:
                async with asyncio.timeout(options.idle_timeout):
                    item = await conversation.receive()
            except TimeoutError:
                raise ChatError("timeout", f"no frame for {options.idle_timeout:g} s") from None
            if isinstance(item, Disconnected | ReconnectFailed | Reconnected):
                continue  # the conversation reconnects by itself
            if cycle.owns(item, thread):
                yield item
                if isinstance(item, CycleEndFrame):
                    return


async def _send_until_taken(
    conversation: Conversation, thread: str, content: str, client_id: str, options: ChatOptions
) -> AcceptedFrame:
    resends = 0
    while True:
        reply = await conversation.send(thread, content, message_id=client_id)
        if isinstance(reply, AcceptedFrame):
            return reply
        if reply.code not in RESEND_CODES or resends >= options.resends:
            raise ChatError(reply.code, reply.message, reply.retry_after)
        resends += 1
        await asyncio.sleep(_resend_wait(reply, resends, options))


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

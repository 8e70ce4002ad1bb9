"""What an action gets to do its work: the request, the LLM, and a way to talk to the user."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

from memoria_contracts.chat import ChatRecord, Role
from memoria_contracts.events import (
    ActionRequested,
    ChatDelta,
    ChatPosted,
    CycleContext,
    Envelope,
    Language,
    Payload,
)
from memoria_contracts.streams import Stream
from memoria_llm.port import LanguageModel
from memoria_runtime.bus import EventPublisher
from memoria_runtime.envelopes import follow
from memoria_runtime.settings import Settings


class ChatSink:
    """Publishes a step's messages to chat.out. Message ids are derived from (cycle, step,
    n), so a step that runs again after a crash replaces its messages instead of repeating
    them."""

    def __init__(self, publisher: EventPublisher, event: Envelope, step: int) -> None:
        self._publisher = publisher
        self._event = event
        self._prefix = f"{event.cycle_id}.{step}"
        self._count = 0

    def _next_id(self) -> str:
        self._count += 1
        return f"{self._prefix}.{self._count}"

    async def _send(self, payload: Payload) -> None:
        await self._publisher.publish(Stream.CHAT_OUT, follow(self._event, payload))

    async def status(self, text: str) -> None:
        """A ``textForReplace`` line: shown until the next message replaces it."""
        await self._send(
            ChatPosted(
                message=ChatRecord(
                    id=self._next_id(),
                    cycle_id=self._event.cycle_id,
                    chat_history=False,
                    modal="textForReplace",
                    role="system",
                    content=text,
                )
            )
        )

    async def stream(
        self, pieces: AsyncIterator[str], *, chat_history: bool, role: Role, model: str
    ) -> ChatRecord:
        """Forward each piece as a delta, then the complete message under the same id."""
        message_id = self._next_id()
        parts: list[str] = []
        async for piece in pieces:
            parts.append(piece)
            await self._send(ChatDelta(message_id=message_id, content=piece))
        record = ChatRecord(
            id=message_id,
            cycle_id=self._event.cycle_id,
            chat_history=chat_history,
            modal="text",
            role=role,
            content="".join(parts),
            model=model,
        )
        await self._send(ChatPosted(message=record))
        return record


@dataclass(frozen=True)
class ActionContext:
    event: Envelope
    request: ActionRequested
    llm: LanguageModel
    chat: ChatSink
    settings: Settings

    @property
    def cycle(self) -> CycleContext:
        return self.request.context

    @property
    def language(self) -> Language:
        return self.request.context.language

"""What an action gets to do its work: the request, the LLM, and a way to talk to the user."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from memoria_contracts.chat import CardInfo, ChatRecord, Modal, Role
from memoria_contracts.events import (
    ActionRequested,
    ChatDelta,
    ChatPosted,
    CycleContext,
    Envelope,
    Language,
    Payload,
)
from memoria_contracts.personas import ActivePersona
from memoria_contracts.session import SessionConfig
from memoria_contracts.streams import Stream
from memoria_llm.port import LanguageModel
from memoria_runtime import keys
from memoria_runtime.bus import EventPublisher
from memoria_runtime.bus.memory_requests import MemoryClient
from memoria_runtime.envelopes import follow
from memoria_runtime.partitions import Partition
from memoria_runtime.personas import load_personas
from memoria_runtime.session_defaults import session_defaults
from memoria_runtime.settings import SessionSettings

P = TypeVar("P", bound=BaseModel)


class ChatSink:
    """Publishes a step's messages to chat.out. Message ids are derived from (cycle, step,
    n), so a step that runs again after a crash replaces its messages instead of repeating
    them.

    A *closing* message is the last thing a step says: its complete form is kept back and
    the runner sends it in the round trip of the step's completion (its streamed pieces went
    out as they came, so the reader has already seen it). Should anything be sent after it,
    it goes first, so the order on chat.out is always the order of the calls."""

    def __init__(self, publisher: EventPublisher, event: Envelope, step: int) -> None:
        self._publisher = publisher
        self._event = event
        self._prefix = f"{event.cycle_id}.{step}"
        self._count = 0
        self._closing: list[Envelope] = []

    def _next_id(self) -> str:
        self._count += 1
        return f"{self._prefix}.{self._count}"

    async def _send(self, *payloads: Payload, closing: bool = False) -> None:
        events = [follow(self._event, payload) for payload in payloads]
        if closing:
            self._closing.extend(events)
            return
        await self._publisher.publish_all(Stream.CHAT_OUT, [*self.take_closing(), *events])

    @property
    def closing(self) -> tuple[Envelope, ...]:
        """The closing messages kept back, in order."""
        return tuple(self._closing)

    def take_closing(self) -> list[Envelope]:
        """The closing messages kept back, in order; the sink no longer holds them."""
        taken, self._closing = self._closing, []
        return taken

    def _record(
        self,
        record_id: str,
        *,
        modal: Modal,
        role: Role,
        content: Any,
        chat_history: bool,
        model: str | None = None,
        card: CardInfo | None = None,
    ) -> ChatRecord:
        return ChatRecord(
            id=record_id,
            cycle_id=self._event.cycle_id,
            chat_history=chat_history,
            modal=modal,
            role=role,
            content=content,
            model=model,
            card=card,
        )

    async def status(self, text: str) -> None:
        """A ``textForReplace`` line: shown until the next message replaces it."""
        record = self._record(
            self._next_id(), modal="textForReplace", role="system", content=text, chat_history=False
        )
        await self._send(ChatPosted(message=record))

    async def post(
        self,
        *,
        modal: Modal,
        role: Role,
        content: Any,
        chat_history: bool,
        model: str | None = None,
        closing: bool = False,
    ) -> ChatRecord:
        """A complete message (a notice) under the step's next id."""
        (record,) = await self.post_all(
            modal=modal,
            role=role,
            contents=[content],
            chat_history=chat_history,
            model=model,
            closing=closing,
        )
        return record

    async def post_all(
        self,
        *,
        modal: Modal,
        role: Role,
        contents: Sequence[Any],
        chat_history: bool,
        cards: Sequence[CardInfo | None] = (),
        model: str | None = None,
        closing: bool = False,
    ) -> list[ChatRecord]:
        """Several complete messages (memory cards, each with its ``cards`` note when
        given), each under its own id, in one round trip."""
        notes = [*cards, *([None] * (len(contents) - len(cards)))]
        records = [
            self._record(
                self._next_id(),
                modal=modal,
                role=role,
                content=content,
                chat_history=chat_history,
                model=model,
                card=note,
            )
            for content, note in zip(contents, notes, strict=True)
        ]
        await self._send(*(ChatPosted(message=record) for record in records), closing=closing)
        return records

    async def stream(
        self,
        pieces: AsyncIterator[str],
        *,
        chat_history: bool,
        role: Role,
        model: str,
        closing: bool = False,
    ) -> ChatRecord | None:
        """Forward each piece as a delta, then the complete message under the same id. A
        model with nothing to say (no text at all) posts nothing: the offline planner's
        closing after a step whose own answer said it all would be an empty bubble."""
        message_id = self._next_id()
        parts: list[str] = []
        async for piece in pieces:
            if not piece:
                continue
            parts.append(piece)
            await self._send(ChatDelta(message_id=message_id, content=piece))
        if not parts:
            return None
        record = self._record(
            message_id,
            modal="text",
            role=role,
            content="".join(parts),
            chat_history=chat_history,
            model=model,
        )
        await self._send(ChatPosted(message=record), closing=closing)
        return record


@dataclass
class StoredPlan:
    """The step's plan as stored (None: none yet), read in the round trip that took the
    step's lease and kept up to date by :meth:`ActionContext.plan`: while the lease is held,
    nobody else writes it."""

    raw: bytes | None


@dataclass(frozen=True)
class ActionContext:
    event: Envelope
    request: ActionRequested
    llm: LanguageModel
    chat: ChatSink
    settings: SessionSettings
    memory: MemoryClient
    redis: Any
    partition: Partition
    """The cycle's partition: where its keys are (partitions.py)."""
    stored_plan: StoredPlan | None = None  # None: not read yet, ask the broker

    @property
    def user_id(self) -> str:
        """The authenticated user the cycle runs for: the only owner memory calls use."""
        return self.event.user_id

    async def plan(self, schema: type[P], produce: Callable[[], Awaitable[P]]) -> P:
        """The step's plan (an LLM's structured answer), made once per step: a step that
        runs again after a crash reuses it, so it repeats the same writes (with the same
        idempotency keys) instead of asking the model again for possibly different ones."""
        key = keys.step_plan(self.partition, self.event.cycle_id or "", self.request.step)
        if self.stored_plan is not None:
            stored = self.stored_plan.raw
        else:
            stored = await self.redis.get(key)
        if stored is not None:
            try:
                return schema.model_validate_json(stored)
            except ValidationError:
                pass  # written by an older version of the action: make a new one
        made = await produce()
        raw = made.model_dump_json()
        ttl_s = keys.step_record_ttl_s(self.settings.cycle.thread_lock_ttl_s)
        await self.redis.set(key, raw, ex=ttl_s)
        if self.stored_plan is not None:
            self.stored_plan.raw = raw.encode()
        return made

    @property
    def cycle(self) -> CycleContext:
        return self.request.context

    @property
    def said_at(self) -> datetime:
        """When the user sent the message the cycle answers (the gateway's time for it, not
        the time this step runs): what a memory's relative dates are counted from, and the
        memory's creation time. A time without a zone is UTC, as the services write it."""
        said = self.request.context.original_message.created_at
        return said if said.tzinfo is not None else said.replace(tzinfo=UTC)

    @property
    def language(self) -> Language:
        return self.request.context.language

    @property
    def session(self) -> SessionConfig:
        """The thread's session config the cycle runs with; the settings' defaults when the
        request comes from a decision service that does not send it."""
        sent = self.request.context.session
        return sent or session_defaults(self.settings, self.event.thread_id)

    @property
    def persona(self) -> ActivePersona:
        """The persona the cycle answers as; the configured default, with no reset,
        when the request comes from a decision service that does not send it."""
        sent = self.request.context.persona
        return sent or ActivePersona(persona=load_personas(self.settings.cycle).default)

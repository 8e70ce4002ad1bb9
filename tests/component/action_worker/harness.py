"""Run an action's coroutine in process: the real ActionContext and ChatSink, the scripted
LLM, a real Redis for plan caching, and in-memory stand-ins for the two network edges (the
event publisher and the memory service) that record what the step sent."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, TypeVar

import in_process_bus
from redis.asyncio import Redis

from memoria_action_worker.context import ActionContext, ChatSink
from memoria_contracts.chat import ChatRecord
from memoria_contracts.events import (
    ActionRequested,
    ChatPosted,
    CycleContext,
    Envelope,
    Language,
    Payload,
)
from memoria_contracts.memory import (
    Memory,
    MemoryDelete,
    MemoryDeleted,
    MemoryEmbed,
    MemoryFailure,
    MemoryFound,
    MemorySave,
    MemorySaved,
    MemorySearch,
    MemoryType,
    MemoryUpdate,
    MemoryUpdated,
    MemoryVectors,
)
from memoria_contracts.streams import Stream
from memoria_llm.port import LLMRequest, LLMUnavailable, T
from memoria_llm.scripted import Script, ScriptedModel, ScriptRule
from memoria_runtime.bus import Delivery
from memoria_runtime.bus.memory_requests import MemoryClient
from memoria_runtime.partitions import Partitions
from memoria_runtime.settings import Settings

USER_ID: Final = "ana"
THREAD_ID: Final = "t1"
CYCLE_ID: Final = "cyc_test1"
STEP: Final = 2
EMBEDDER: Final = "test-embedder"
NOW: Final = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
SAID_AT: Final = datetime(2026, 11, 27, 15, 0, tzinfo=UTC)  # a Friday: when the user wrote

Q = TypeVar("Q")


def memory(
    memory_id: str,
    content: Any,
    *,
    memory_type: MemoryType = "user_profile",
    bindings: Sequence[str] = ("some key",),
) -> Memory:
    return Memory(
        memory_id=memory_id,
        memory_type=memory_type,
        content_kind="text" if isinstance(content, str) else "json",
        content=content,
        bindings=list(bindings),
        creation_datetime=NOW,
        last_accessed=NOW,
        updated_at=NOW,
    )


def card(found: Memory, record_id: str = "cyc_test1.1.1") -> ChatRecord:
    """A memory card as an earlier step posted it."""
    return ChatRecord.memory_card(record_id, CYCLE_ID, found)


class RecordingPublisher(in_process_bus.RecordingPublisher):
    """Keeps what a step publishes instead of writing it to Redis Streams; with what its
    chat sinks keep back for the step's completion (the runner sends that, after the rest)."""

    def __init__(self) -> None:
        super().__init__()
        self.sinks: list[ChatSink] = []

    def _chat_out(self) -> list[Envelope]:
        closing = [e for sink in self.sinks for e in sink.closing]
        return [e for s, e in self.sent if s is Stream.CHAT_OUT] + closing

    def posted(self) -> list[ChatRecord]:
        return [e.payload.message for e in self._chat_out() if isinstance(e.payload, ChatPosted)]

    def frames(self) -> list[dict[str, Any]]:
        """The complete messages as they go on the wire (with the chat message's key names)."""
        return [
            e.model_dump(mode="json")["payload"]["message"]
            for e in self._chat_out()
            if isinstance(e.payload, ChatPosted)
        ]

    def statuses(self) -> list[Any]:
        return [m.content for m in self.posted() if m.modal == "textForReplace"]

    def notices(self) -> list[Any]:
        return [m.content for m in self.posted() if m.modal == "text" and m.role == "system"]


@dataclass(frozen=True)
class Sent:
    user_id: str
    thread_id: str
    cycle_id: str | None
    request: Payload


class FakeMemoryService(MemoryClient):
    """Answers memory requests from an in-memory store of one user's memories, as the memory
    service would, and keeps every request with the user and thread it was sent for.
    ``failures`` (by request type) replace the answer with a failure reply or an exception,
    after the first ``answered_before_failing[type]`` requests of that type."""

    def __init__(self, memories: Iterable[Memory] = ()) -> None:  # no broker: in process
        self.memories = {m.memory_id: m for m in memories}
        self.sent: list[Sent] = []
        self.failures: dict[str, Payload | Exception] = {}
        self.answered_before_failing: dict[str, int] = {}

    async def _call(
        self, user_id: str, thread_id: str, cycle_id: str | None, payload: Payload
    ) -> Payload:
        self.sent.append(Sent(user_id, thread_id, cycle_id, payload))
        same_type = sum(s.request.type == payload.type for s in self.sent)
        failure = self.failures.get(payload.type)
        if same_type <= self.answered_before_failing.get(payload.type, 0):
            failure = None
        if isinstance(failure, Exception):
            raise failure
        return failure if failure is not None else self._answer(payload)

    def requests(self, kind: type[Q]) -> list[Q]:
        return [s.request for s in self.sent if isinstance(s.request, kind)]

    def _answer(self, payload: Payload) -> Payload:
        match payload:
            case MemoryEmbed():
                # Distinct, recognisable vectors: [position in the request, text length].
                vectors = [[float(i), float(len(t))] for i, t in enumerate(payload.texts)]
                return MemoryVectors(embedder=EMBEDDER, vectors=vectors)
            case MemorySearch():
                excluded = set(payload.exclude_ids)
                found = [m for m in self.memories.values() if m.memory_id not in excluded]
                return MemoryFound(memories=found)
            case MemorySave():
                return self._save(payload)
            case MemoryUpdate():
                return self._update(payload)
            case MemoryDelete():
                gone = self.memories.pop(payload.memory_id, None)
                if gone is None:
                    return _not_found(payload.memory_id)
                return MemoryDeleted(
                    memory_id=gone.memory_id, deleted_content=gone.content, memory=gone
                )
        raise AssertionError(f"unexpected memory request {payload.type}")

    def _save(self, request: MemorySave) -> MemorySaved:
        # Like the service: the id derives from the idempotency key, so a repeat finds it.
        memory_id = "mem_" + hashlib.sha256(request.idempotency_key.encode()).hexdigest()[:12]
        if request.reuse_same_content and memory_id not in self.memories:
            for held in self.memories.values():
                if held.content == request.content:  # the service also ignores case, spacing
                    return MemorySaved(memory_id=held.memory_id, created=False, memory=held)
        created = memory_id not in self.memories
        if created:
            self.memories[memory_id] = memory(
                memory_id,
                request.content,
                memory_type=request.memory_type,
                bindings=request.bindings,
            )
        return MemorySaved(memory_id=memory_id, created=created, memory=self.memories[memory_id])

    def _update(self, request: MemoryUpdate) -> MemoryUpdated | MemoryFailure:
        old = self.memories.get(request.memory_id)
        if old is None:
            return _not_found(request.memory_id)
        new = memory(
            old.memory_id,
            old.content if request.content is None else request.content,
            memory_type=request.memory_type or old.memory_type,
            bindings=request.bindings or old.bindings,
        )
        self.memories[new.memory_id] = new
        return MemoryUpdated(
            memory_id=new.memory_id, old_content=old.content, new_content=new.content, memory=new
        )


def _not_found(memory_id: str) -> MemoryFailure:
    return MemoryFailure(code="not_found", error_message="no such memory", memory_id=memory_id)


class RecordingModel(ScriptedModel):
    """The scripted provider, keeping the requests it was given; ``chat_fails`` makes its
    chat mode fail like an unreachable provider."""

    def __init__(self, script: Script, *, chat_fails: bool = False) -> None:
        super().__init__(script)
        self.requests: list[LLMRequest] = []
        self._chat_fails = chat_fails

    async def reasoning(self, request: LLMRequest, schema: type[T]) -> T:
        self.requests.append(request)
        return await super().reasoning(request, schema)

    async def chat(self, request: LLMRequest) -> AsyncIterator[str]:
        self.requests.append(request)
        if self._chat_fails:
            raise LLMUnavailable("the provider is down")
        async for piece in super().chat(request):
            yield piece


@dataclass
class Harness:
    redis: Redis
    memory: FakeMemoryService = field(default_factory=FakeMemoryService)
    publisher: RecordingPublisher = field(default_factory=RecordingPublisher)
    settings: Settings = field(default_factory=lambda: Settings.load(_env_file=None))

    def context(
        self,
        action: str,
        reasoning: object,
        *,
        message: str = "please help with my memories",
        language: Language = "en",
        earlier: Sequence[ChatRecord] = (),
        history: Sequence[ChatRecord] = (),
        chat: str = "Done.",
        chat_fails: bool = False,
        said_at: datetime = SAID_AT,
        also: Mapping[str, object] | None = None,
    ) -> tuple[ActionContext, RecordingModel]:
        """A context for step STEP of CYCLE_ID running ``action``; the scripted model answers
        ``reasoning`` to its plan and ``chat`` as its explanation. The user's message was sent
        at ``said_at`` (the same for every run of the step, as a redelivery carries it).
        ``also``: the model's structured answers to the step's other tasks, by task."""
        original = ChatRecord(
            id="msg_1",
            cycle_id=CYCLE_ID,
            chat_history=True,
            modal="text",
            role="user",
            content=message,
            created_at=said_at,
        )
        request = ActionRequested(
            step=STEP,
            action=action,
            context=CycleContext(
                original_message=original,
                history=list(history),
                transcript=[original, *earlier],
                language=language,
            ),
        )
        event = Envelope(cycle_id=CYCLE_ID, user_id=USER_ID, thread_id=THREAD_ID, payload=request)
        rule = ScriptRule(
            match="", reasoning={action: reasoning, **(also or {})}, chat={action: chat}
        )
        llm = RecordingModel(Script(rules=[rule]), chat_fails=chat_fails)
        ctx = ActionContext(
            event=event,
            request=request,
            llm=llm,
            chat=self._sink(event),
            settings=self.settings,
            memory=self.memory,
            redis=self.redis,
            partition=Partitions().of(USER_ID),
        )
        return ctx, llm

    def _sink(self, event: Envelope) -> ChatSink:
        sink = ChatSink(self.publisher, event, STEP)
        self.publisher.sinks.append(sink)
        return sink


def step_requested(action: str, step: int) -> Envelope:
    """A request for ``step`` of CYCLE_ID to run ``action``, as decision sends it."""
    original = ChatRecord(id="msg_1", chat_history=True, modal="text", role="user", content="hi")
    request = ActionRequested(
        step=step, action=action, context=CycleContext(original_message=original)
    )
    return Envelope(cycle_id=CYCLE_ID, user_id=USER_ID, thread_id=THREAD_ID, payload=request)


def step_delivery(step: int) -> Delivery:
    """The first delivery of that request from the actions stream."""
    return Delivery(
        stream=Stream.ACTIONS.value,
        group="action-worker",
        entry_id=f"1-{step}",
        data=b"",
        redelivered=False,
    )

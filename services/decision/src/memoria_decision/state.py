"""A cycle's state, kept in Redis between events (decision holds none in memory)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from memoria_contracts.chat import ChatRecord, utcnow
from memoria_contracts.events import (
    CycleContext,
    CycleEndReason,
    Language,
    StepRecord,
)
from memoria_contracts.history import HistorySummary
from memoria_contracts.personas import ActivePersona, PersonaApplied
from memoria_contracts.session import SessionConfig
from memoria_decision.routes import Route
from memoria_runtime import keys
from memoria_runtime.gate import KeyWrite
from memoria_runtime.partitions import Partition, Partitions

_STATE_TTL_S = keys.CYCLE_TTL_S


class PendingStep(BaseModel):
    step: int
    action: str
    request_event_id: str
    tool_call: bool = False
    """The step is kept in the history as a tool call, so its result must be too."""


class CycleState(BaseModel):
    cycle_id: str
    user_id: str
    thread_id: str
    message_id: str
    trace: dict[str, str]
    language: Language
    original: ChatRecord
    history: list[ChatRecord]
    history_summary: HistorySummary | None = None
    """The summary of the thread before ``history``, already bounded for prompts."""
    transcript: list[ChatRecord]
    echoed: bool = False
    """The user's message was published on chat.out (a redelivery echoes it if not)."""
    steps: list[StepRecord] = Field(default_factory=list)
    pending: PendingStep | None = None
    status: Literal["running", "ended"] = "running"
    end_reason: CycleEndReason | None = None
    end_announced: bool = False
    session: SessionConfig | None = None
    """The thread's session config, read once at the start (None: state of an older version)."""
    persona: ActivePersona | None = None
    """The persona the cycle answers as, with the reset due after a switch."""
    persona_record: PersonaApplied | None = None
    """What the cycle applies of the thread's agentHistory, recorded when it first asks a
    model (a fast path asks none and leaves the reset to the next cycle)."""
    persona_recorded: bool = False
    route: Route | None = None
    """The route decided before the first decision (fast path or model; routes.py)."""
    started_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)

    @property
    def next_step(self) -> int:
        return len(self.steps) + 1

    @property
    def actions(self) -> list[str]:
        return [step.action for step in self.steps]

    def context(self) -> CycleContext:
        return CycleContext(
            original_message=self.original,
            history=self.history,
            history_summary=self.history_summary,
            transcript=self.transcript,
            steps=self.steps,
            language=self.language,
            session=self.session,
            persona=self.persona,
        )


class CycleStore:
    """Each state is kept in its user's partition (partitions.py)."""

    def __init__(self, redis: Any, partitions: Partitions) -> None:
        self._redis = redis
        self.partitions = partitions

    async def load(self, part: Partition, cycle_id: str) -> CycleState | None:
        raw = await self._redis.get(keys.cycle_state(part, cycle_id))
        return self.parse(raw) if raw else None

    @staticmethod
    def parse(raw: bytes) -> CycleState:
        """A state as stored (read elsewhere, e.g. with the thread gate's ``open``)."""
        return CycleState.model_validate_json(raw)

    def queue_create(self, pipe: Any, state: CycleState) -> None:
        """Store a new cycle, with the commands of the same pipeline; :meth:`created` reads
        the answer (another delivery of the message may have stored it first)."""
        key = keys.cycle_state(self.partitions.of(state.user_id), state.cycle_id)
        pipe.set(key, state.model_dump_json(), nx=True, ex=_STATE_TTL_S)

    async def created(self, state: CycleState, created: bool | None) -> CycleState:
        """``state`` if its create stored it, else the one a concurrent delivery stored."""
        if created:
            return state
        existing = await self.load(self.partitions.of(state.user_id), state.cycle_id)
        return existing or state

    async def save(self, state: CycleState) -> None:
        write = self.write(state)
        await self._redis.set(write.key, write.value, ex=write.ttl_s)

    def queue_save(self, pipe: Any, state: CycleState) -> None:
        """:meth:`save` queued on a pipeline, sent with the step's other writes."""
        write = self.write(state)
        pipe.set(write.key, write.value, ex=write.ttl_s)

    def write(self, state: CycleState) -> KeyWrite:
        """The SET that saves ``state`` (for a write made with another, atomically)."""
        state.updated_at = utcnow()
        key = keys.cycle_state(self.partitions.of(state.user_id), state.cycle_id)
        return KeyWrite(key, state.model_dump_json(), _STATE_TTL_S)

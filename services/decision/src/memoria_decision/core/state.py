"""A cycle's state and what a thread waits for: immutable, changed only as a transition's
output, stored in Redis between events by the shell (``work`` never is)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from memoria_contracts.chat import ChatRecord
from memoria_contracts.events import (
    CycleContext,
    CycleEndReason,
    Language,
    PendingQuestion,
    StepRecord,
)
from memoria_contracts.history import HistorySummary
from memoria_contracts.memory import ContentKind
from memoria_contracts.personas import ActivePersona, Persona, PersonaApplied
from memoria_contracts.session import SessionConfig, SessionConfigOverrides, SessionConfigState
from memoria_text import i18n


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


PendingKind = Literal["delete_all", "choose_update", "choose_forget", "question"]


class UpdateCandidate(Frozen):
    memory_id: str
    content: Any  # when the question was asked (its excerpt is what was shown)


class PendingAction(Frozen):
    """What a thread's next message may answer: a confirmation, a choice among the session
    user's memories (candidates in the order shown), or a question the assistant asked."""

    id: str
    kind: PendingKind
    language: Language  # the question's
    asked_in_cycle: str
    candidates: tuple[UpdateCandidate, ...] = ()
    content: Any = None  # choose_update: the new content; question: the message asked about
    content_kind: ContentKind | None = None
    asked: str | None = None  # question: what the assistant asked


_Asks = Literal["ask_delete_all", "ask_choice", "forget_last", "expired", "cancel"]
RouteKind = _Asks | Literal["model", "list_all", "delete_all", "update_chosen", "forget_chosen"]


class Route(Frozen):
    """``model`` (the thought cycle) or a fast path; stored with the cycle: a redelivered
    message takes the same route after the pending action it answered was cleared."""

    kind: RouteKind
    language: Language
    resolves: str | None = None  # the pending action answered, replaced or dropped
    dropped: PendingKind | None = None  # a confirmation or choice left unanswered: told
    expired: PendingKind | None = None
    declined: bool = False  # a cancel that answered a pending action
    targets: tuple[str, ...] | None = None  # delete_all: listed once, kept; *_chosen: the one
    choice: PendingAction | None = None  # the choice answered (the store's copy is cleared)
    question: PendingQuestion | None = None  # the question the message came after

    @property
    def chosen(self) -> UpdateCandidate:
        """``*_chosen``: the candidate picked."""
        picked = self.targets[0] if self.targets else None
        candidates = self.choice.candidates if self.choice else ()
        return next(c for c in candidates if c.memory_id == picked)


class PendingStep(Frozen):
    step: int
    action: str
    request_event_id: str
    tool_call: bool = False  # kept in the history as a tool call: its result must be too


class Work(Frozen):
    """What one delivery carries from an event to the next."""

    now: datetime = datetime.min.replace(tzinfo=UTC)  # the event's (``decide`` sets it)
    pending: PendingAction | None = None  # the thread's, read as the cycle opened
    lock_fresh: bool = False  # taken in this delivery: the first decision need not refresh it
    history_missing: bool = False
    listed: tuple[str, ...] = ()
    deleted: int = 0
    failed: int = 0
    target: str | None = None


class CycleState(Frozen):
    cycle_id: str
    user_id: str
    thread_id: str
    message_id: str
    trace: dict[str, str]
    language: Language
    original: ChatRecord
    started_at: datetime
    status: Literal["opening", "running", "ended"] = "running"
    history: tuple[ChatRecord, ...] = ()
    history_summary: HistorySummary | None = None  # bounded for prompts
    transcript: tuple[ChatRecord, ...] = ()
    echoed: bool = False  # the message is on chat.out (a redelivery echoes it if not)
    steps: tuple[StepRecord, ...] = ()
    pending: PendingStep | None = None
    end_reason: CycleEndReason | None = None
    end_announced: bool = False
    session: SessionConfig | None = None
    persona: ActivePersona | None = None
    # What the cycle applies of the thread's agentHistory, recorded when it first asks a
    # model (a fast path asks none and leaves the reset to the next cycle).
    persona_record: PersonaApplied | None = None
    persona_recorded: bool = False
    route: Route | None = None
    tokens: dict[str, tuple[int, int]] = {}  # what its LLM calls spent, by model: (in, out)
    work: Work = Field(default_factory=Work, exclude=True)

    @property
    def next_step(self) -> int:
        return len(self.steps) + 1

    @property
    def actions(self) -> list[str]:
        return [step.action for step in self.steps]

    @property
    def routed(self) -> Route:
        return self.route or Route(kind="model", language=self.language)

    def text(self, key: str, **values: object) -> str:
        """The catalogue's text ``key``, in the cycle's language."""
        return i18n.text(key, self.language, **values)

    def asking(self, kind: PendingKind, **fields: Any) -> PendingAction:
        """Asked of the thread's next message, under the cycle's id (a redelivery: the same)."""
        cycle_id = self.cycle_id
        pending_id = f"pa_{cycle_id.removeprefix('cyc_')}"
        return PendingAction(
            id=pending_id, kind=kind, language=self.language, asked_in_cycle=cycle_id, **fields
        )

    def but(self, **changes: Any) -> CycleState:
        return self.model_copy(update=changes)

    def spending(self, tokens: Mapping[str, tuple[int, int]]) -> CycleState:
        """With ``tokens`` (by model) added to what the cycle spent."""
        if not tokens:
            return self
        total = dict(self.tokens)
        for model, (input_tokens, output_tokens) in tokens.items():
            before_in, before_out = total.get(model, (0, 0))
            total[model] = (before_in + input_tokens, before_out + output_tokens)
        return self.but(tokens=total)

    def working(self, **changes: Any) -> CycleState:
        return self.but(work=self.work.model_copy(update=changes))

    def context(self) -> CycleContext:
        return CycleContext(
            original_message=self.original,
            history=list(self.history),
            history_summary=self.history_summary,
            transcript=list(self.transcript),
            steps=list(self.steps),
            language=self.language,
            session=self.session,
            persona=self.persona,
            pending_question=self.route.question if self.route else None,
        )


class Released(Frozen):
    """What an ended cycle leaves: enough to know its late events, nothing of what was said."""

    status: Literal["released"] = "released"
    cycle_id: str
    user_id: str
    thread_id: str
    message_id: str
    end_reason: CycleEndReason | None = None


Stored = CycleState | Released


@dataclass(frozen=True)
class Config:
    max_steps: int
    step_timeout_s: float
    history_limit: int
    summary_chars: int
    default_session: SessionConfig
    personas: Mapping[str, Persona]
    default_persona: str
    pending_ttl_s: int
    relative_relevance: float  # recalled cards: the least share of the best match's score

    @property
    def pending_minutes(self) -> int:
        return max(1, self.pending_ttl_s // 60)

    def defaults(self, thread_id: str) -> SessionConfigState:
        """A thread's session config when none can be read: the settings' own."""
        session = self.default_session.model_copy(update={"thread_id": thread_id})
        return SessionConfigState(config=session, overrides=SessionConfigOverrides())

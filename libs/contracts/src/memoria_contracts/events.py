"""The event envelope and every payload that crosses a stream.

One envelope carries routing and tracing facts; the payload is a discriminated union on
``type``, so a consumer gets a typed object or a validation error, never a half-read dict.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints, computed_field

from memoria_contracts import threads as _threads
from memoria_contracts.base import ContractModel
from memoria_contracts.chat import ChatRecord, utcnow
from memoria_contracts.cycles import CycleFailure, CycleFound, CycleGet
from memoria_contracts.history import HistorySummary
from memoria_contracts.ids import new_id
from memoria_contracts.memory import (
    MemoryDelete,
    MemoryDeleted,
    MemoryEmbed,
    MemoryFailure,
    MemoryFound,
    MemoryGet,
    MemoryHistory,
    MemoryHistoryQuery,
    MemoryList,
    MemoryPage,
    MemorySave,
    MemorySaved,
    MemorySearch,
    MemoryUpdate,
    MemoryUpdated,
    MemoryVectors,
)
from memoria_contracts.personas import ActivePersona
from memoria_contracts.session import (
    SessionConfig,
    SessionConfigGet,
    SessionConfigState,
    SessionConfigUpdate,
    SessionPersonaApplied,
)
from memoria_contracts.threads import (
    ThreadCreate,
    ThreadFailure,
    ThreadList,
    ThreadPage,
    ThreadRename,
    ThreadSaved,
)

SCHEMA_VERSION: Literal[1] = 1

UserId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9._@-]{1,64}$")]
ThreadId = _threads.ThreadId  # defined beside the thread requests, which need it too
ActionName = Annotated[str, StringConstraints(pattern=r"^[A-Z][A-Za-z0-9]{0,63}$")]
Language = Literal["en", "pt"]

CycleEndReason = Literal[
    "done",  # an action ended the cycle (Finalize, Question)
    "max_steps",  # the step budget ran out
    "step_timeout",  # a step did not finish in time
    "llm_error",  # the language model failed after retries
    "no_workers",  # no action worker advertises any action
    "action_failed",  # an action reported a failure it cannot recover from
]


class ActionSpec(ContractModel):
    """What an action worker advertises; the decision prompt is built from these."""

    name: ActionName
    description: str = Field(description="When to use the action, shown to the LLM verbatim.")
    ends_cycle: bool


class StepRecord(ContractModel):
    """One executed step as the next decision sees it."""

    step: int = Field(ge=1)
    action: ActionName
    status: Literal["ok", "failed"]
    summary: str


class PendingQuestion(ContractModel):
    """A question the assistant ended the thread's previous cycle with, still open when the
    user's next message came (decision keeps it as the thread's pending action, with the
    same expiry as a confirmation)."""

    user_question: str = Field(description="The user's message the assistant asked about.")
    assistant_question: str = Field(description="What the assistant asked.")
    answered: bool = Field(
        description="Whether this message answers it, by decision's rules: a fragment that "
        "fills what was asked, or a statement of it, does; a refusal, a new question or a "
        "statement about something else does not, and is handled as a new message."
    )


class CycleContext(ContractModel):
    """Everything an action needs to do its work, carried with the request."""

    original_message: ChatRecord
    history: list[ChatRecord] = Field(
        default_factory=list, description="chat-history messages of earlier cycles, oldest first"
    )
    transcript: list[ChatRecord] = Field(
        default_factory=list, description="chat-history messages of this cycle so far"
    )
    steps: list[StepRecord] = Field(default_factory=list)
    language: Language = "en"
    history_summary: HistorySummary | None = Field(
        default=None,
        description="The summary of the thread's messages before ``history``, already "
        "cut to the prompt's bound; null when there is none.",
    )
    session: SessionConfig | None = Field(
        default=None,
        description="The thread's effective session configuration, read once at cycle "
        "start; null from a decision service older than this field (use the settings).",
    )
    persona: ActivePersona | None = Field(
        default=None,
        description="The persona the cycle answers as, with the reset due after a "
        "switch; null from a decision service older than this field.",
    )
    pending_question: PendingQuestion | None = Field(
        default=None,
        description="The question the assistant asked at the end of the thread's previous "
        "cycle, when this message came while it was open; null otherwise.",
    )


class UserMessageReceived(ContractModel):
    type: Literal["user.message"] = "user.message"
    message_id: str
    content: str

    def record(self, cycle_id: str, at: datetime) -> ChatRecord:
        """The message as the thread keeps it: the user's turn of cycle ``cycle_id``."""
        return ChatRecord(
            id=self.message_id,
            chat_history=True,
            modal="text",
            role="user",
            content=self.content,
            cycle_id=cycle_id,
            created_at=at,
        )


class ActionRequested(ContractModel):
    type: Literal["action.requested"] = "action.requested"
    step: int = Field(ge=1)
    action: ActionName
    context: CycleContext


class ChoiceCandidate(ContractModel):
    memory_id: str
    content: Any


class UpdateChoice(ContractModel):
    """A MemoryUpdate that could not tell which memory was meant: the user is asked to choose
    among ``candidates`` (memories loaded in the thread, in the order to show); the chosen
    one then gets ``content``. Decision asks and keeps it as the thread's pending action."""

    candidates: list[ChoiceCandidate] = Field(min_length=2)
    content: Any
    content_kind: Literal["text", "json"] | None = None


class ActionOutcome(ContractModel):
    status: Literal["ok", "failed"]
    ends_cycle: bool
    summary: str = Field(description="One line for the next decision, e.g. 'answered the user'.")
    messages: list[ChatRecord] = Field(
        default_factory=list, description="chat-history messages the step produced"
    )
    error: str | None = None
    arguments: dict[str, Any] | None = Field(
        default=None,
        description="What the step worked out to do, compact (e.g. its search queries): the "
        "arguments of its tool call in the thread's history; null: none to tell.",
    )
    choice: UpdateChoice | None = Field(
        default=None,
        description="The step needs the user to choose a memory first (with ends_cycle true): "
        "decision asks and resolves the answer without the model.",
    )


class ActionCompleted(ContractModel):
    type: Literal["action.completed"] = "action.completed"
    step: int = Field(ge=1)
    action: ActionName
    outcome: ActionOutcome
    worker: str
    tokens: dict[str, tuple[int, int]] = Field(
        default_factory=dict,
        description="The LLM tokens the step spent, by model: (input, output); a failed one's too.",
    )


class ChatPosted(ContractModel):
    """A complete message for the user's screen (and for the history unless transient)."""

    type: Literal["chat.message"] = "chat.message"
    message: ChatRecord


class ChatDelta(ContractModel):
    """A piece of a message being streamed; the complete ChatPosted with the same id follows."""

    type: Literal["chat.delta"] = "chat.delta"
    message_id: str
    content: str


class ModelUsage(ContractModel):
    """Tokens one model used in a cycle, and what they cost by ``MEMORIA_LLM_PRICES``."""

    input_tokens: int = Field(ge=0)
    output_tokens: int = Field(ge=0)
    cost_usd: float = Field(ge=0, description="An estimate: 0 for a model without a price.")


class CycleUsage(ContractModel):
    """A cycle's LLM usage: totals over every model, and each model's share."""

    input_tokens: int = Field(ge=0)
    output_tokens: int = Field(ge=0)
    cost_usd: float = Field(ge=0, description="An estimate, from MEMORIA_LLM_PRICES.")
    by_model: dict[str, ModelUsage] = Field(default_factory=dict)


class CycleEnded(ContractModel):
    type: Literal["cycle.ended"] = "cycle.ended"
    actions: list[str]
    reason: CycleEndReason
    usage: CycleUsage | None = Field(
        default=None,
        description="Token usage and cost estimate of the cycle's LLM calls; absent when no "
        "call reported usage (or from a decision service older than this field).",
    )


class CycleSummary(ContractModel):
    """How an ended cycle went, kept with the thread's history so a client drawing the
    thread again (a reload) shows it under the reply as it did live."""

    cycle_id: str
    actions: list[str]
    reason: CycleEndReason
    usage: CycleUsage | None = None
    ended_at: datetime
    duration_ms: int | None = Field(
        default=None,
        ge=0,
        description="From the user's message being accepted to the cycle's end; None when "
        "that message is not in the history.",
    )


class HistoryQuery(ContractModel):
    """Ask the memory service for a thread's stored messages, newest ``limit``, oldest first."""

    type: Literal["history.query"] = "history.query"
    limit: int = Field(default=50, ge=1, le=1000)
    exclude_cycle_id: str | None = None
    only_chat_history: bool = True
    tool_records: bool = Field(
        default=True,
        description="Include the steps' tool calls and results; false: only the "
        "messages people see.",
    )
    summary: bool = Field(
        default=False,
        description="Also return the thread's stored summary; the messages are then "
        "those newer than the summary, at most ``limit``.",
    )
    session: bool = Field(
        default=False,
        description="Also return the thread's effective session config (the defaults for a "
        "thread not stored yet): what a cycle reads as it starts, in one request.",
    )
    before_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="Only messages older than this stored message of the thread (paging "
        "back through a long thread); an id the thread does not hold is answered with an "
        "``rpc.failure`` ``not_found``.",
    )
    cycles: bool = Field(
        default=False,
        description="Also return the summaries of the ended cycles the messages belong to.",
    )


class HistoryPage(ContractModel):
    type: Literal["history.page"] = "history.page"
    messages: list[ChatRecord]
    summary: HistorySummary | None = Field(
        default=None,
        description="The summary of the messages before ``messages``, when asked for and "
        "there is one.",
    )
    session: SessionConfigState | None = Field(
        default=None,
        description="The thread's session config, when asked for; null from a memory service "
        "that could not read it (or predates the field): ask with session.get then.",
    )
    cycles: list[CycleSummary] = Field(
        default_factory=list,
        description="When asked for: the summaries of the ended cycles of ``messages`` (none "
        "from a memory service older than the field).",
    )


class RpcFailure(ContractModel):
    type: Literal["rpc.failure"] = "rpc.failure"
    code: str
    message: str


Payload = Annotated[
    UserMessageReceived
    | ActionRequested
    | ActionCompleted
    | ChatPosted
    | ChatDelta
    | CycleEnded
    | HistoryQuery
    | HistoryPage
    | RpcFailure
    | MemoryEmbed
    | MemorySearch
    | MemorySave
    | MemoryUpdate
    | MemoryDelete
    | MemoryGet
    | MemoryList
    | MemoryHistoryQuery
    | MemoryVectors
    | MemoryFound
    | MemorySaved
    | MemoryUpdated
    | MemoryDeleted
    | MemoryPage
    | MemoryHistory
    | MemoryFailure
    | ThreadList
    | ThreadCreate
    | ThreadRename
    | ThreadPage
    | ThreadSaved
    | ThreadFailure
    | CycleGet
    | CycleFound
    | CycleFailure
    | SessionConfigGet
    | SessionConfigUpdate
    | SessionPersonaApplied
    | SessionConfigState,
    Field(discriminator="type"),
]


class Envelope(ContractModel):
    """The one shape every stream entry has."""

    event_id: str = Field(default_factory=lambda: new_id("evt"))
    schema_version: Literal[1] = SCHEMA_VERSION
    time: datetime = Field(default_factory=utcnow)
    cycle_id: str | None = None
    user_id: UserId
    thread_id: ThreadId
    trace: dict[str, str] = Field(
        default_factory=dict, description="W3C trace context (traceparent, tracestate)"
    )
    payload: Payload

    @computed_field  # type: ignore[prop-decorator]
    @property
    def type(self) -> str:
        return self.payload.type

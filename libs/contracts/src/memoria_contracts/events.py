"""The event envelope and every payload that crosses a stream.

One envelope carries routing and tracing facts; the payload is a discriminated union on
``type``, so a consumer gets a typed object or a validation error, never a half-read dict.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, computed_field

from memoria_contracts.chat import ChatRecord, utcnow
from memoria_contracts.ids import new_id

SCHEMA_VERSION: Literal[1] = 1

UserId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9._@-]{1,64}$")]
ThreadId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9._-]{1,64}$")]
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


class _Model(BaseModel):
    model_config = ConfigDict(
        frozen=True,
        extra="ignore",  # newer producers may add fields; older consumers keep working
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )


class ActionSpec(_Model):
    """What an action worker advertises; the decision prompt is built from these."""

    name: ActionName
    description: str = Field(description="When to use the action, shown to the LLM verbatim.")
    ends_cycle: bool


class StepRecord(_Model):
    """One executed step as the next decision sees it."""

    step: int = Field(ge=1)
    action: ActionName
    status: Literal["ok", "failed"]
    summary: str


class CycleContext(_Model):
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


class UserMessageReceived(_Model):
    type: Literal["user.message"] = "user.message"
    message_id: str
    content: str


class ActionRequested(_Model):
    type: Literal["action.requested"] = "action.requested"
    step: int = Field(ge=1)
    action: ActionName
    context: CycleContext


class ActionOutcome(_Model):
    status: Literal["ok", "failed"]
    ends_cycle: bool
    summary: str = Field(description="One line for the next decision, e.g. 'answered the user'.")
    messages: list[ChatRecord] = Field(
        default_factory=list, description="chat-history messages the step produced"
    )
    error: str | None = None


class ActionCompleted(_Model):
    type: Literal["action.completed"] = "action.completed"
    step: int = Field(ge=1)
    action: ActionName
    outcome: ActionOutcome
    worker: str


class ChatPosted(_Model):
    """A complete message for the user's screen (and for the history unless transient)."""

    type: Literal["chat.message"] = "chat.message"
    message: ChatRecord


class ChatDelta(_Model):
    """A piece of a message being streamed; the complete ChatPosted with the same id follows."""

    type: Literal["chat.delta"] = "chat.delta"
    message_id: str
    content: str


class CycleEnded(_Model):
    type: Literal["cycle.ended"] = "cycle.ended"
    actions: list[str]
    reason: CycleEndReason


class HistoryQuery(_Model):
    """Ask the memory service for a thread's stored messages, newest ``limit``, oldest first."""

    type: Literal["history.query"] = "history.query"
    limit: int = Field(default=50, ge=1, le=1000)
    exclude_cycle_id: str | None = None
    only_chat_history: bool = True


class HistoryPage(_Model):
    type: Literal["history.page"] = "history.page"
    messages: list[ChatRecord]


class RpcFailure(_Model):
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
    | RpcFailure,
    Field(discriminator="type"),
]


class Envelope(_Model):
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

"""A thought cycle's trace (every message and event of the cycle, in order): the
request that asks the memory service for it, and its replies.

The memory service records every event of a cycle it sees on ``chat.in``, ``actions``,
``actions.done`` and ``chat.out``. What a trace holds is compact on purpose: streamed
``chat.delta`` pieces are left out (the complete message with the same id follows them), and
an action request's copy of the conversation (``context``) is too, since its messages are in
the trace already. Like every request to the memory service, :class:`CycleGet` names no
user: the user is the envelope's, which comes from the authenticated session only.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Final, Literal

from pydantic import Field, StringConstraints

from memoria_contracts.base import ContractModel, FailureReply, SuccessReply
from memoria_contracts.chat import ChatRecord

CYCLE_PREFIX: Final = "cyc_"
MESSAGE_PREFIX: Final = "msg_"
MAX_TRACE_EVENTS: Final = 1000
"""Most events one trace returns. A cycle is bounded by its step budget; this bounds the
reply even for a cycle that posted an unusual number of messages."""

CycleId = Annotated[str, StringConstraints(pattern=r"^cyc_[A-Za-z0-9_-]{1,80}$")]
CycleFailureCode = Literal["not_found"]
TraceStream = Literal["chat.in", "actions", "actions.done", "chat.out"]


def cycle_id_for(message_id: str) -> str:
    """The cycle a user message starts: one message, one cycle, so redeliveries of the
    message find the same cycle, and a trace or a waiting client can name the cycle before
    any event carries its id."""
    return f"{CYCLE_PREFIX}{message_id.removeprefix(MESSAGE_PREFIX)}"


class CycleEvent(ContractModel):
    """One event of a cycle, as the trace keeps it. Which optional fields are set depends on
    ``type``: ``user.message`` and ``chat.message`` carry ``message``; ``action.requested``
    carries ``step`` and ``action``; ``action.completed`` those and the outcome (``status``,
    ``ends_cycle``, ``summary``, ``error``, ``worker``); ``cycle.ended`` ``actions`` and
    ``reason``. The HTTP API leaves out the fields an event's type does not have."""

    event_id: str = Field(description="The envelope's id (the first one, if it came twice).")
    at: datetime = Field(description="When the event was made (the envelope's time).")
    stream: TraceStream
    type: str = Field(description="The payload type, e.g. `action.requested`.")
    trace_id: str | None = Field(
        default=None, description="W3C trace id of the envelope's traceparent (32 hex)."
    )
    step: int | None = None
    action: str | None = None
    status: Literal["ok", "failed"] | None = None
    ends_cycle: bool | None = None
    summary: str | None = None
    error: str | None = None
    worker: str | None = None
    message: ChatRecord | None = None
    actions: list[str] | None = None
    reason: str | None = Field(default=None, description="Why the cycle ended (`cycle.ended`).")


class Cycle(ContractModel):
    """A cycle and its events, oldest first."""

    cycle_id: str
    thread_id: str
    trace_id: str | None = Field(
        description="The cycle's trace id (that of its first event that has one)."
    )
    started_at: datetime = Field(description="Time of the cycle's first recorded event.")
    ended_at: datetime | None = Field(description="Time of `cycle.ended`; None while it runs.")
    end_reason: str | None = Field(description="The `cycle.ended` reason; None while it runs.")
    actions: list[str] = Field(
        description="Actions in the order they ran: from `cycle.ended`, else those requested "
        "so far."
    )
    events: list[CycleEvent]
    truncated: bool = Field(
        default=False, description=f"True when only the first {MAX_TRACE_EVENTS} events are here."
    )


# -- request ----------------------------------------------------------------------------------


class CycleGet(ContractModel):
    """The trace of one of the envelope user's cycles."""

    type: Literal["cycle.get"] = "cycle.get"
    cycle_id: CycleId


# -- replies ----------------------------------------------------------------------------------


class CycleFound(SuccessReply):
    type: Literal["cycle.found"] = "cycle.found"
    cycle: Cycle


class CycleFailure(FailureReply):
    """``not_found`` is also the answer for another user's cycle of the same id."""

    type: Literal["cycle.failure"] = "cycle.failure"
    code: CycleFailureCode
    cycle_id: str | None = None

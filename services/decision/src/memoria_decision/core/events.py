"""What reaches the core: a message, a worker's completion, a deadline, and what the shell
found carrying out an effect. Each says when it was handed in, the time of the records the
transition writes: the core reads no clock."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from memoria_contracts.chat import ChatRecord
from memoria_contracts.events import ActionCompleted, Payload
from memoria_decision.core.state import PendingAction, Stored


@dataclass(frozen=True)
class Event:
    at: datetime


@dataclass(frozen=True)
class Arrived(Event):
    """A message whose cycle was never stored; ``owns``: it has the thread's lock."""

    message: ChatRecord
    user_id: str
    thread_id: str
    trace: dict[str, str]
    owns: bool
    pending: PendingAction | None  # the thread's
    framed: bytes  # the stream entry as stored, to queue it again unchanged


@dataclass(frozen=True)
class Redelivered(Event):
    """The message again, its cycle stored."""


@dataclass(frozen=True)
class Unanswered:
    detail: str  # the memory service did not answer (timeout), or refused on the way
    timeout: bool


Purpose = Literal[
    "opening", "session", "recall", "persona", "list", "ids", "delete", "update", "get", "forget"
]
Reply = Payload | Unanswered


@dataclass(frozen=True)
class Answered(Event):
    purpose: Purpose
    replies: tuple[Reply, ...]  # in the order asked


@dataclass(frozen=True)
class Created(Event):
    stored: Stored | None  # another delivery of the message stored the cycle first


@dataclass(frozen=True)
class Chosen(Event):
    action: str
    tool_call: bool
    request_event_id: str
    spent: dict[str, tuple[int, int]]  # the decision's tokens by model


@dataclass(frozen=True)
class Undecided(Event):
    """No next action: the model failed, or no worker advertised any (even after a wait)."""

    reason: Literal["llm_error", "no_workers"]
    detail: str = ""
    spent: dict[str, tuple[int, int]] = field(default_factory=dict)  # a failed call's tokens


@dataclass(frozen=True)
class Completed(Event):
    completed: ActionCompleted


@dataclass(frozen=True)
class StepOverdue(Event):
    step: int  # its deadline passed, and this replica claimed it

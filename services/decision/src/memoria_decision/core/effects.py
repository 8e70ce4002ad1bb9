"""What the core asks the shell to do, in order. Only the last effect of a transition may
lead to an event (:data:`LEADS_ON`); the others' results are not read."""

from __future__ import annotations

from dataclasses import dataclass

from memoria_contracts.chat import ChatRecord
from memoria_contracts.events import Payload
from memoria_decision.core.events import Purpose
from memoria_decision.core.state import CycleState, PendingAction, Released, Stored


@dataclass(frozen=True)
class Post:
    record: ChatRecord  # on chat.out: every socket shows it, the history keeps it


@dataclass(frozen=True)
class Create:
    state: CycleState  # stored unless a delivery of its message did first (→ Created)


@dataclass(frozen=True)
class Save:
    state: CycleState


@dataclass(frozen=True)
class AskMemory:
    purpose: Purpose  # requests to the memory service as the cycle's user (→ Answered)
    requests: tuple[Payload, ...]


@dataclass(frozen=True)
class Choose:
    step: int  # the model's choice among the live actions (→ Chosen, Undecided)


@dataclass(frozen=True)
class RefreshLock:
    """The thread's lock extended while the cycle makes progress."""


@dataclass(frozen=True)
class SetDeadline:
    step: int


@dataclass(frozen=True)
class ClearDeadline:
    step: int


@dataclass(frozen=True)
class RequestAction:
    """``action.requested`` for the pending step (workers drop a duplicate)."""


@dataclass(frozen=True)
class PutPending:
    action: PendingAction


@dataclass(frozen=True)
class ClearPending:
    action_id: str  # only if it is still the thread's pending action


@dataclass(frozen=True)
class MarkEnded:
    """The mark that stops the cycle's running steps."""


@dataclass(frozen=True)
class Announce:
    """``cycle.ended`` on ``chat.out``, with the cycle's usage."""


@dataclass(frozen=True)
class Release:
    released: Released | None  # stored in place of the state as the thread is handed on


@dataclass(frozen=True)
class Requeue:
    framed: bytes  # the message, back at the head of its thread's queue


@dataclass(frozen=True)
class Note:
    why: str  # nothing to do but say why (logged)


_Writes = Post | Save | RefreshLock | SetDeadline | ClearDeadline | RequestAction
_Thread = PutPending | ClearPending | MarkEnded | Announce | Release | Requeue | Note
Effect = Create | AskMemory | Choose | _Writes | _Thread
LEADS_ON = (Create, AskMemory, Choose)


@dataclass(frozen=True)
class Transition:
    state: Stored | None  # None: no cycle (an event of one never stored, or long gone)
    effects: tuple[Effect, ...]

    def after(self, *first: Effect) -> Transition:
        """This transition, with ``first`` carried out before its effects."""
        return Transition(self.state, (*first, *self.effects))

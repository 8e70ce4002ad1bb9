"""Personas and persona switching.

A persona is who the assistant is in a thread: a name and an identity prompt, defined in
configuration. A thread switches persona through its session config (``persona``); every
switch is appended to the thread's ``agentHistory``, and the cycle after a switch is told
so, because models keep the voice of the conversation so far unless told plainly to drop it
(contextual inertia).

Detection goes by the log, not by comparing ids: a cycle records which entry of
the log it applied (:class:`PersonaApplied`), and a later entry is a switch.
:func:`detect_switch` is the whole rule, a pure function so it can be tested alone and gives
the same answer to a redelivered cycle.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Final

from pydantic import Field, StringConstraints

from memoria_contracts.base import ContractModel

DEFAULT_PERSONA_ID: Final = "memoria"
MAX_AGENT_HISTORY: Final = 50
"""Entries of a thread's agentHistory kept; older ones are dropped (the log only needs to
reach back to the last entry a cycle applied)."""
MAX_RESET_TURNS: Final = 5
"""Most cycles after a switch that a strategy may repeat the reset in; past it a cycle no
longer records anything."""
MAX_PERSONA_NAME_CHARS: Final = 80
MAX_PERSONA_DESCRIPTION_CHARS: Final = 300
MAX_IDENTITY_CHARS: Final = 4000
MAX_STYLE_CHARS: Final = 1000

PersonaId = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9_-]{0,39}$")]
"""Lower-case letters, digits, ``_`` and ``-``, at most 40 characters."""


def _text(max_length: int) -> StringConstraints:
    return StringConstraints(strip_whitespace=True, min_length=1, max_length=max_length)


class Persona(ContractModel):
    """One configured persona."""

    id: PersonaId
    name: Annotated[str, _text(MAX_PERSONA_NAME_CHARS)]
    description: Annotated[str, _text(MAX_PERSONA_DESCRIPTION_CHARS)]
    identity: Annotated[str, _text(MAX_IDENTITY_CHARS)] = Field(
        description="Who the assistant is, in the second person ('You are ...')."
    )
    style: Annotated[str, _text(MAX_STYLE_CHARS)] | None = Field(
        default=None, description="How it writes (tone, length, format); optional."
    )


class AgentHistoryEntry(ContractModel):
    """One persona switch of a thread."""

    seq: int = Field(ge=1, description="Position in the thread's log: 1, 2, ... never reused.")
    persona: PersonaId = Field(description="The persona switched to.")
    previous: PersonaId = Field(description="The thread's persona before the switch.")
    at: datetime
    by: str = Field(description="The user who switched (the session's user).")


class PersonaApplied(ContractModel):
    """What a thread's latest cycle after a switch applied: the log position it ran with,
    the persona the thread had before (what the reset speaks of) and how many cycles after
    that switch it was (0: the first)."""

    seq: int = Field(ge=1)
    cycle_id: str
    previous: PersonaId
    turn: int = Field(ge=0)


class PersonaReset(ContractModel):
    """The switch a cycle must make the model accept (the hard reset)."""

    seq: int = Field(ge=1, description="The agentHistory entry that is applied.")
    previous_id: PersonaId = Field(description="The persona the thread's last cycle ran as.")
    previous_name: str
    turn: int = Field(
        ge=0, description="Cycles since the switch before this one: 0 is the first after it."
    )


class ActivePersona(ContractModel):
    """The persona a cycle runs as, resolved by decision and sent to the workers."""

    persona: Persona
    reset: PersonaReset | None = Field(
        default=None, description="Set in the cycles right after a switch; null otherwise."
    )


class SwitchDetection(ContractModel):
    """:func:`detect_switch`'s answer: the reset due in this cycle (None: none) and what the
    cycle must record (None: nothing)."""

    seq: int | None = None
    previous: PersonaId | None = None
    turn: int | None = None
    record: PersonaApplied | None = None

    @property
    def switched(self) -> bool:
        return self.turn is not None


def detect_switch(
    history: list[AgentHistoryEntry], applied: PersonaApplied | None, cycle_id: str
) -> SwitchDetection:
    """Whether ``cycle_id`` is a cycle after a persona switch, from the thread's log and
    what its last cycle after a switch applied.

    * No entry: the thread never switched; nothing to do.
    * ``applied`` names this very cycle: a redelivery; the same answer as the first time.
    * An entry after ``applied.seq`` (or any entry, with nothing applied): a switch, turn 0.
      The reset speaks of the persona the last cycle ran as: the ``previous`` of the first
      entry not applied (A→B→C between two cycles resets from A, not from B). When that is
      the persona switched to (A→B→A), the conversation is already in that voice: no reset,
      only the new position is recorded.
    * Otherwise the next turn after the same switch, recorded while a strategy may still
      repeat the reset (``MAX_RESET_TURNS``); after that, nothing.
    """
    if not history:
        return SwitchDetection()
    latest = history[-1]
    if applied is not None and applied.cycle_id == cycle_id:
        return _answer(applied, record=None)
    if applied is None or applied.seq < latest.seq:
        unapplied = [e for e in history if applied is None or e.seq > applied.seq]
        previous = unapplied[0].previous
        if previous == latest.persona:
            done = PersonaApplied(
                seq=latest.seq, cycle_id=cycle_id, previous=previous, turn=MAX_RESET_TURNS
            )
            return SwitchDetection(record=done)
        record = PersonaApplied(seq=latest.seq, cycle_id=cycle_id, previous=previous, turn=0)
        return _answer(record, record=record)
    turn = applied.turn + 1
    if turn >= MAX_RESET_TURNS:
        return SwitchDetection()
    record = applied.model_copy(update={"cycle_id": cycle_id, "turn": turn})
    return _answer(record, record=record)


def _answer(applied: PersonaApplied, *, record: PersonaApplied | None) -> SwitchDetection:
    if applied.turn >= MAX_RESET_TURNS:
        return SwitchDetection(record=record)
    return SwitchDetection(
        seq=applied.seq, previous=applied.previous, turn=applied.turn, record=record
    )

"""The persona a cycle answers as, and whether it is a cycle right after a switch.

Read with the session config when the cycle starts: the thread's ``agentHistory`` and what
its last cycle after a switch applied go through :func:`~memoria_contracts.personas.detect_switch`.
What this cycle applies is kept in its state and recorded with the memory service when the
cycle first asks a model (:func:`record_applied`): a fast path asks none, so it does
not use up the reset that the next prompt must carry. Until it is recorded, a redelivered
start detects the same thing again. The resolved persona (with the reset, if due) travels
to the workers in the cycle's context.
"""

from __future__ import annotations

import logging

from memoria_contracts.personas import ActivePersona, PersonaApplied, PersonaReset, detect_switch
from memoria_contracts.session import SessionConfigState, SessionPersonaApplied
from memoria_runtime.memory_client import MemoryClient
from memoria_runtime.personas import PersonaCatalog
from memoria_runtime.rpc import RpcError

log = logging.getLogger("memoria.decision.persona")


def persona_for_cycle(
    personas: PersonaCatalog, session: SessionConfigState, cycle_id: str
) -> tuple[ActivePersona, PersonaApplied | None]:
    """The thread's persona (the default for one no longer configured) with the reset due,
    and what to record once the cycle asks a model (None: nothing)."""
    found = detect_switch(session.agent_history, session.persona_applied, cycle_id)
    persona = personas.resolve(session.config.persona)
    if persona.id != session.config.persona:
        log.warning(
            "cycle %s: persona %r is not configured any more; answering as %r",
            cycle_id,
            session.config.persona,
            persona.id,
        )
    reset = None
    if found.seq is not None and found.previous is not None and found.turn is not None:
        previous = personas.get(found.previous)
        reset = PersonaReset(
            seq=found.seq,
            previous_id=found.previous,
            previous_name=previous.name if previous else found.previous,
            turn=found.turn,
        )
        log.info("cycle %s: persona switch to %s, turn %d", cycle_id, persona.id, found.turn)
    return ActivePersona(persona=persona, reset=reset), found.record


async def record_applied(
    memory: MemoryClient, user_id: str, thread_id: str, applied: PersonaApplied
) -> None:
    """Tell the memory service what the cycle applied. Idempotent (the same record again).
    A failure (the memory service not answering) is logged: the cycle still applies the
    reset, and the next one detects the same switch again — a reset too many, never one too
    few."""
    request = SessionPersonaApplied(thread_id=thread_id, applied=applied)
    try:
        await memory.persona_applied(user_id, request, cycle_id=applied.cycle_id)
    except (TimeoutError, RpcError) as exc:
        log.error("cycle %s: persona switch not recorded: %r", applied.cycle_id, exc)

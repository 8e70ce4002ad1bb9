"""The persona a cycle answers as (R-8), and whether it is a cycle right after a switch.

Read with the session config when the cycle starts: the thread's ``agentHistory`` and what
its last cycle after a switch applied go through :func:`~memoria_contracts.personas.detect_switch`;
what this cycle applies is recorded with the memory service before the cycle's state is
created, so a redelivered start finds its own record and answers the same. The resolved
persona (with the reset, if due) travels to the workers in the cycle's context.
"""

from __future__ import annotations

import logging

from memoria_contracts.personas import ActivePersona, PersonaReset, detect_switch
from memoria_contracts.session import SessionConfigState, SessionPersonaApplied
from memoria_runtime.memory_client import MemoryClient
from memoria_runtime.personas import PersonaCatalog
from memoria_runtime.rpc import RpcError

log = logging.getLogger("memoria.decision.persona")


async def persona_for_cycle(
    memory: MemoryClient,
    personas: PersonaCatalog,
    session: SessionConfigState,
    user_id: str,
    cycle_id: str,
) -> ActivePersona:
    """The thread's persona (the default for one no longer configured) and the reset due.

    Recording may fail (the memory service not answering): the cycle still applies the
    reset, and the next one detects the same switch again: a reset too many, never one too
    few."""
    thread_id = session.config.thread_id
    found = detect_switch(session.agent_history, session.persona_applied, cycle_id)
    if found.record is not None:
        request = SessionPersonaApplied(thread_id=thread_id, applied=found.record)
        try:
            await memory.persona_applied(user_id, request, cycle_id=cycle_id)
        except (TimeoutError, RpcError) as exc:
            log.error("cycle %s: persona switch not recorded: %r", cycle_id, exc)
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
    return ActivePersona(persona=persona, reset=reset)

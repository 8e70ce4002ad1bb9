"""Session config requests: a thread's overrides are kept on its document by
:class:`~memoria_memory.threads.ThreadRepository`; the answer is the settings' defaults with
them on top, with the thread's persona log."""

from __future__ import annotations

from memoria_contracts.session import (
    SessionConfigGet,
    SessionConfigOverrides,
    SessionConfigState,
    SessionConfigUpdate,
    SessionPersonaApplied,
    effective,
)
from memoria_contracts.threads import ThreadFailure
from memoria_memory.threads import StoredSession, ThreadRepository
from memoria_runtime.personas import load_personas
from memoria_runtime.session_defaults import session_defaults
from memoria_runtime.settings import SessionSettings


async def answer_session(
    threads: ThreadRepository,
    settings: SessionSettings,
    user_id: str,
    request: SessionConfigGet | SessionConfigUpdate | SessionPersonaApplied,
) -> SessionConfigState | ThreadFailure:
    """``not_found`` for a thread the user does not have (another user's alike), unless a
    read asks for the defaults then (a cycle's thread may not be stored yet). A persona that
    is not configured is refused (``invalid``); the gateway checks it first, this is the
    owner of the data making sure."""
    thread_id = request.thread_id
    if isinstance(request, SessionConfigUpdate):
        persona = request.set.persona
        if persona is not None and persona not in load_personas(settings.cycle):
            return ThreadFailure(
                code="invalid", error_message=f"unknown persona: {persona}", thread_id=thread_id
            )
        await threads.update_session_config(
            user_id, request, default_persona=settings.cycle.default_persona
        )
    elif isinstance(request, SessionPersonaApplied):
        await threads.record_persona_applied(user_id, thread_id, request.applied)
    stored = await threads.session(user_id, thread_id)
    if stored is None and isinstance(request, SessionConfigGet) and request.defaults_if_missing:
        stored = StoredSession(SessionConfigOverrides(), [], None)
    if stored is None:
        return ThreadFailure(code="not_found", error_message="no such thread", thread_id=thread_id)
    defaults = session_defaults(settings, thread_id)
    return SessionConfigState(
        config=effective(defaults, stored.overrides),
        overrides=stored.overrides,
        agent_history=stored.agent_history,
        persona_applied=stored.persona_applied,
    )

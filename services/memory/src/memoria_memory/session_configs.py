"""Session config requests (R-5): a thread's overrides are kept on its document by
:class:`~memoria_memory.threads.ThreadRepository`; the answer is the settings' defaults with
them on top."""

from __future__ import annotations

from memoria_contracts.session import (
    SessionConfigGet,
    SessionConfigOverrides,
    SessionConfigState,
    SessionConfigUpdate,
    effective,
)
from memoria_contracts.threads import ThreadFailure
from memoria_memory.threads import ThreadRepository
from memoria_runtime.session_defaults import session_defaults
from memoria_runtime.settings import Settings


async def answer_session(
    threads: ThreadRepository,
    settings: Settings,
    user_id: str,
    request: SessionConfigGet | SessionConfigUpdate,
) -> SessionConfigState | ThreadFailure:
    """``not_found`` for a thread the user does not have (another user's alike), unless a
    read asks for the defaults then (a cycle's thread may not be stored yet)."""
    if isinstance(request, SessionConfigUpdate):
        overrides = await threads.update_session_config(user_id, request)
    else:
        overrides = await threads.session_config(user_id, request.thread_id)
        if overrides is None and request.defaults_if_missing:
            overrides = SessionConfigOverrides()
    if overrides is None:
        return ThreadFailure(
            code="not_found", error_message="no such thread", thread_id=request.thread_id
        )
    defaults = session_defaults(settings, request.thread_id)
    return SessionConfigState(config=effective(defaults, overrides), overrides=overrides)

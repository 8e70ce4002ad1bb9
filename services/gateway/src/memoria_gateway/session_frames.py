"""The ``session_config`` WebSocket frame: read or change a thread's session config, as
``GET``/``PATCH /api/threads/{thread_id}/config`` do (thread_routes.py)."""

from __future__ import annotations

import logging
from typing import Final, Protocol

from memoria_contracts.frames import ClientSessionConfig, ErrorFrame, SessionConfigFrame
from memoria_contracts.session import SessionConfigGet, SessionConfigState, SessionConfigUpdate
from memoria_contracts.threads import ThreadFailure
from memoria_runtime.bus.request_reply import RpcError

log = logging.getLogger("memoria.gateway.session")

NOT_FOUND: Final = "thread not found"
NOT_ANSWERING: Final = "the memory service is not answering; send the frame again"


class SessionBackend(Protocol):
    """The calls of :class:`memoria_runtime.bus.memory_requests.MemoryClient` the frame uses."""

    async def session_config(
        self, user_id: str, request: SessionConfigGet
    ) -> SessionConfigState | ThreadFailure:
        """A thread's effective session config."""

    async def update_session_config(
        self, user_id: str, request: SessionConfigUpdate
    ) -> SessionConfigState | ThreadFailure:
        """Change a thread's session config overrides."""


async def answer_session_config(
    memory: SessionBackend, user_id: str, frame: ClientSessionConfig
) -> SessionConfigFrame | ErrorFrame:
    """The thread's config after the change (if the frame has one), or why not. Another
    user's thread answers like an unknown one: ``not_found``."""
    try:
        if frame.config is None:
            reply = await memory.session_config(
                user_id, SessionConfigGet(thread_id=frame.thread_id)
            )
        else:
            update = frame.config.as_update(frame.thread_id)
            reply = await memory.update_session_config(user_id, update)
    except (TimeoutError, RpcError) as exc:
        log.error("session config of %s/%s: %r", user_id, frame.thread_id, exc)
        return ErrorFrame(code="unavailable", message=NOT_ANSWERING)
    if isinstance(reply, ThreadFailure) and reply.code == "invalid":
        return ErrorFrame(code="invalid_frame", message=reply.error_message)
    if isinstance(reply, ThreadFailure):
        return ErrorFrame(code="not_found", message=f"{NOT_FOUND}: {frame.thread_id}")
    return SessionConfigFrame(
        thread_id=frame.thread_id,
        user_id=user_id,
        config=reply.config,
        overrides=reply.overrides,
        agent_history=reply.agent_history,
    )

"""MemoryClient's session-config calls answered in process by the memory service's own code
(``answer_session``) over a SQLite document store: what the gateway's thread routes, the
``session_config`` frame and decision's persona detection call, with no broker."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from memoria_contracts.session import (
    SessionConfigGet,
    SessionConfigState,
    SessionConfigUpdate,
    SessionPersonaApplied,
)
from memoria_contracts.threads import ThreadFailure
from memoria_memory.docstore.sqlite import SqliteDocumentStore
from memoria_memory.session_configs import answer_session
from memoria_memory.threads import ThreadRepository
from memoria_runtime.settings import Settings

SessionRequest = SessionConfigGet | SessionConfigUpdate | SessionPersonaApplied


class InProcessSessions:
    def __init__(self, threads: ThreadRepository, settings: Settings) -> None:
        self.threads = threads
        self.settings = settings
        self.failing: Exception | None = None
        """Raised by every call when set (the memory service not answering)."""
        self.recorded: list[SessionPersonaApplied] = []

    async def _answer(
        self, user_id: str, request: SessionRequest
    ) -> SessionConfigState | ThreadFailure:
        if self.failing is not None:
            raise self.failing
        return await answer_session(self.threads, self.settings, user_id, request)

    async def session_config(
        self, user_id: str, request: SessionConfigGet, *, cycle_id: str | None = None
    ) -> SessionConfigState | ThreadFailure:
        return await self._answer(user_id, request)

    async def update_session_config(
        self, user_id: str, request: SessionConfigUpdate
    ) -> SessionConfigState | ThreadFailure:
        return await self._answer(user_id, request)

    async def persona_applied(
        self, user_id: str, request: SessionPersonaApplied, *, cycle_id: str | None = None
    ) -> SessionConfigState | ThreadFailure:
        self.recorded.append(request)
        return await self._answer(user_id, request)


@contextlib.asynccontextmanager
async def in_process_sessions(
    tmp_path: Path, settings: Settings
) -> AsyncIterator[InProcessSessions]:
    """Threads ``ana/t1`` ("Trip") and ``bob/bobs`` stored, nothing else."""
    store = await SqliteDocumentStore.open(tmp_path / "docs.db")
    threads = ThreadRepository(store)
    await threads.setup()
    await threads.create("ana", "t1", "Trip")
    await threads.create("bob", "bobs", None)
    try:
        yield InProcessSessions(threads, settings)
    finally:
        await store.close()

"""Typed calls to the memory service over request/reply.

The user id of every call goes into the envelope, which is the only place the memory
service reads it from: callers pass the authenticated user, never anything a model wrote.
"""

from __future__ import annotations

from typing import TypeVar

from memoria_contracts.chat import ChatRecord
from memoria_contracts.cycles import CycleFailure, CycleFound, CycleGet
from memoria_contracts.events import Envelope, HistoryPage, HistoryQuery, Payload
from memoria_contracts.memory import (
    MemoryDelete,
    MemoryDeleted,
    MemoryEmbed,
    MemoryFailure,
    MemoryFound,
    MemoryGet,
    MemoryHistory,
    MemoryHistoryQuery,
    MemoryList,
    MemoryPage,
    MemoryRequest,
    MemorySave,
    MemorySaved,
    MemorySearch,
    MemoryUpdate,
    MemoryUpdated,
    MemoryVectors,
)
from memoria_contracts.session import (
    SessionConfigGet,
    SessionConfigState,
    SessionConfigUpdate,
    SessionPersonaApplied,
)
from memoria_contracts.streams import Stream
from memoria_contracts.threads import (
    ThreadCreate,
    ThreadFailure,
    ThreadList,
    ThreadPage,
    ThreadRename,
    ThreadRequest,
    ThreadSaved,
)
from memoria_runtime.bus.request_reply import RpcClient, RpcError
from memoria_runtime.bus.service_bus import ServiceBus
from memoria_runtime.settings import BusSettings
from memoria_runtime.telemetry import current_trace_carrier

NO_THREAD = "api"
"""Thread id of requests that belong to no conversation (HTTP API, CLI)."""

R = TypeVar("R")


class MemoryClient:
    def __init__(self, broker: ServiceBus, settings: BusSettings) -> None:
        self._rpc = RpcClient(broker, settings, Stream.MEMORY_RPC)

    async def _call(
        self, user_id: str, thread_id: str, cycle_id: str | None, payload: Payload
    ) -> Payload:
        request = Envelope(
            user_id=user_id,
            thread_id=thread_id,
            cycle_id=cycle_id,
            trace=current_trace_carrier(),
            payload=payload,
        )
        return (await self._rpc.call(request)).payload

    async def request(
        self, user_id: str, thread_id: str, cycle_id: str | None, payload: Payload
    ) -> Payload:
        """Any request, answered with whatever payload the memory service replies (a failure
        reply included); ``RpcError`` when the reply is an RPC failure, ``TimeoutError`` when
        none came. The typed methods below check the reply's type."""
        return await self._call(user_id, thread_id, cycle_id, payload)

    async def _memory_call(
        self,
        user_id: str,
        request: MemoryRequest,
        expected: type[R],
        *,
        thread_id: str = NO_THREAD,
        cycle_id: str | None = None,
    ) -> R | MemoryFailure:
        reply = await self._call(user_id, thread_id, cycle_id, request)
        if isinstance(reply, expected | MemoryFailure):
            return reply
        raise RpcError("unexpected_reply", f"expected {expected.__name__}, got {reply.type}")

    async def history(
        self,
        user_id: str,
        thread_id: str,
        *,
        limit: int,
        exclude_cycle_id: str | None = None,
        only_chat_history: bool = True,
        tool_records: bool = True,
        cycle_id: str | None = None,
        before_id: str | None = None,
    ) -> list[ChatRecord]:
        """``before_id``: only messages older than that stored one (``RpcError``
        ``not_found`` when the thread has no such message)."""
        reply = await self._call(
            user_id,
            thread_id,
            cycle_id,
            HistoryQuery(
                limit=limit,
                exclude_cycle_id=exclude_cycle_id,
                only_chat_history=only_chat_history,
                tool_records=tool_records,
                before_id=before_id,
            ),
        )
        if not isinstance(reply, HistoryPage):
            raise RpcError("unexpected_reply", f"expected history.page, got {reply.type}")
        return reply.messages

    async def shown_history(
        self, user_id: str, thread_id: str, *, limit: int, before_id: str | None = None
    ) -> HistoryPage:
        """The thread's messages people see (no tool records, no summary), newest ``limit``
        (older than ``before_id``, if given), with the summaries of their ended cycles."""
        query = HistoryQuery(
            limit=limit,
            only_chat_history=False,
            tool_records=False,
            before_id=before_id,
            cycles=True,
        )
        reply = await self._call(user_id, thread_id, None, query)
        if not isinstance(reply, HistoryPage):
            raise RpcError("unexpected_reply", f"expected history.page, got {reply.type}")
        return reply

    async def history_page(
        self,
        user_id: str,
        thread_id: str,
        *,
        limit: int,
        exclude_cycle_id: str | None = None,
        cycle_id: str | None = None,
        with_session: bool = False,
    ) -> HistoryPage:
        """The thread's stored summary and the chat-history messages it does not cover, at
        most ``limit`` of them; ``with_session``: its session config too (a memory
        service older than that field leaves ``session`` null)."""
        query = HistoryQuery(
            limit=limit, exclude_cycle_id=exclude_cycle_id, summary=True, session=with_session
        )
        reply = await self._call(user_id, thread_id, cycle_id, query)
        if not isinstance(reply, HistoryPage):
            raise RpcError("unexpected_reply", f"expected history.page, got {reply.type}")
        return reply

    async def embed(
        self,
        user_id: str,
        request: MemoryEmbed,
        *,
        thread_id: str = NO_THREAD,
        cycle_id: str | None = None,
    ) -> MemoryVectors | MemoryFailure:
        return await self._memory_call(
            user_id, request, MemoryVectors, thread_id=thread_id, cycle_id=cycle_id
        )

    async def search(
        self,
        user_id: str,
        request: MemorySearch,
        *,
        thread_id: str = NO_THREAD,
        cycle_id: str | None = None,
    ) -> MemoryFound | MemoryFailure:
        return await self._memory_call(
            user_id, request, MemoryFound, thread_id=thread_id, cycle_id=cycle_id
        )

    async def get(
        self,
        user_id: str,
        memory_id: str,
        *,
        thread_id: str = NO_THREAD,
        cycle_id: str | None = None,
    ) -> MemoryFound | MemoryFailure:
        return await self._memory_call(
            user_id,
            MemoryGet(memory_id=memory_id),
            MemoryFound,
            thread_id=thread_id,
            cycle_id=cycle_id,
        )

    async def list(
        self,
        user_id: str,
        request: MemoryList,
        *,
        thread_id: str = NO_THREAD,
        cycle_id: str | None = None,
    ) -> MemoryPage | MemoryFailure:
        return await self._memory_call(
            user_id, request, MemoryPage, thread_id=thread_id, cycle_id=cycle_id
        )

    async def changes(
        self,
        user_id: str,
        memory_id: str,
        *,
        thread_id: str = NO_THREAD,
        cycle_id: str | None = None,
    ) -> MemoryHistory | MemoryFailure:
        request = MemoryHistoryQuery(memory_id=memory_id)
        return await self._memory_call(
            user_id, request, MemoryHistory, thread_id=thread_id, cycle_id=cycle_id
        )

    async def save(
        self,
        user_id: str,
        request: MemorySave,
        *,
        thread_id: str = NO_THREAD,
        cycle_id: str | None = None,
    ) -> MemorySaved | MemoryFailure:
        return await self._memory_call(
            user_id, request, MemorySaved, thread_id=thread_id, cycle_id=cycle_id
        )

    async def update(
        self,
        user_id: str,
        request: MemoryUpdate,
        *,
        thread_id: str = NO_THREAD,
        cycle_id: str | None = None,
    ) -> MemoryUpdated | MemoryFailure:
        return await self._memory_call(
            user_id, request, MemoryUpdated, thread_id=thread_id, cycle_id=cycle_id
        )

    async def delete(
        self,
        user_id: str,
        request: MemoryDelete,
        *,
        thread_id: str = NO_THREAD,
        cycle_id: str | None = None,
    ) -> MemoryDeleted | MemoryFailure:
        return await self._memory_call(
            user_id, request, MemoryDeleted, thread_id=thread_id, cycle_id=cycle_id
        )

    # -- cycles -----------------------------------------------------------------------------

    async def cycle(self, user_id: str, cycle_id: str) -> CycleFound | CycleFailure:
        """One of the user's cycles with its trace of events; ``not_found`` for a cycle the
        user does not have (another user's included)."""
        reply = await self._call(user_id, NO_THREAD, None, CycleGet(cycle_id=cycle_id))
        if isinstance(reply, CycleFound | CycleFailure):
            return reply
        raise RpcError("unexpected_reply", f"expected cycle.found, got {reply.type}")

    # -- threads ----------------------------------------------------------------------------

    async def _thread_call(
        self, user_id: str, thread_id: str, request: ThreadRequest, expected: type[R]
    ) -> R | ThreadFailure:
        reply = await self._call(user_id, thread_id, None, request)
        if isinstance(reply, expected | ThreadFailure):
            return reply
        raise RpcError("unexpected_reply", f"expected {expected.__name__}, got {reply.type}")

    async def threads(self, user_id: str, request: ThreadList) -> ThreadPage | ThreadFailure:
        """The user's threads, most recently updated first."""
        return await self._thread_call(user_id, NO_THREAD, request, ThreadPage)

    async def create_thread(
        self, user_id: str, request: ThreadCreate
    ) -> ThreadSaved | ThreadFailure:
        """Create a thread; repeating the request finds it (``created`` false)."""
        return await self._thread_call(user_id, request.thread_id, request, ThreadSaved)

    async def rename_thread(
        self, user_id: str, request: ThreadRename
    ) -> ThreadSaved | ThreadFailure:
        """Give a thread a title; ``not_found`` for a thread the user does not have."""
        return await self._thread_call(user_id, request.thread_id, request, ThreadSaved)

    # -- session config ---------------------------------------------------------------------

    async def session_config(
        self, user_id: str, request: SessionConfigGet, *, cycle_id: str | None = None
    ) -> SessionConfigState | ThreadFailure:
        """A thread's effective session config; ``not_found`` for a thread the user does not
        have (unless the request asks for the defaults then)."""
        return await self._session_call(user_id, request, cycle_id)

    async def update_session_config(
        self, user_id: str, request: SessionConfigUpdate
    ) -> SessionConfigState | ThreadFailure:
        """Change a thread's session config overrides; ``not_found`` as above."""
        return await self._session_call(user_id, request, None)

    async def persona_applied(
        self, user_id: str, request: SessionPersonaApplied, *, cycle_id: str | None = None
    ) -> SessionConfigState | ThreadFailure:
        """Record what a cycle after a persona switch applied."""
        return await self._session_call(user_id, request, cycle_id)

    async def _session_call(
        self,
        user_id: str,
        request: SessionConfigGet | SessionConfigUpdate | SessionPersonaApplied,
        cycle_id: str | None,
    ) -> SessionConfigState | ThreadFailure:
        reply = await self._call(user_id, request.thread_id, cycle_id, request)
        if isinstance(reply, SessionConfigState | ThreadFailure):
            return reply
        raise RpcError("unexpected_reply", f"expected session.config, got {reply.type}")

"""The memory service's event handlers: chat.out in (history), requests in, replies out."""

from __future__ import annotations

import asyncio
import logging
from typing import Final

from memoria_contracts.chat import ChatRecord
from memoria_contracts.cycles import CycleFailure, CycleFound, CycleGet
from memoria_contracts.events import (
    ChatPosted,
    CycleEnded,
    Envelope,
    HistoryPage,
    HistoryQuery,
    Payload,
    RpcFailure,
)
from memoria_contracts.memory import (
    MemoryDelete,
    MemoryEmbed,
    MemoryFailure,
    MemoryGet,
    MemoryHistoryQuery,
    MemoryList,
    MemorySave,
    MemorySearch,
    MemoryUpdate,
)
from memoria_contracts.session import (
    SessionConfigGet,
    SessionConfigState,
    SessionConfigUpdate,
    SessionPersonaApplied,
)
from memoria_contracts.threads import (
    ThreadCreate,
    ThreadFailure,
    ThreadList,
    ThreadPage,
    ThreadRename,
    ThreadSaved,
)
from memoria_memory.cycle_log import CycleLog
from memoria_memory.embedding.port import EmbeddingError
from memoria_memory.history import stream_sequence
from memoria_memory.history_catch_up import HistoryCatchUp
from memoria_memory.memories.writes import UNWRITABLE
from memoria_memory.session_configs import answer_session
from memoria_memory.storage import MemoryStorage
from memoria_memory.storage_health import StorageHealth, is_storage_full
from memoria_memory.summarizer import StoredSummary
from memoria_memory.threads import ThreadRepository
from memoria_memory.vectors.port import VectorStoreError
from memoria_runtime.bus import Delivery
from memoria_runtime.settings import SessionSettings

log = logging.getLogger("memoria.memory")

_MEMORY_WRITES = (MemorySave, MemoryUpdate, MemoryDelete)
"""Requests whose step tells the user, when the disk is full, that nothing was changed."""


class MemoryHandlers:
    """Storage is opened at start-up, after the subscriptions were declared."""

    def __init__(self, settings: SessionSettings) -> None:
        self._settings = settings  # the session configs' defaults
        self._storage: MemoryStorage | None = None
        self._threads: ThreadRepository | None = None
        self._cycles: CycleLog | None = None
        self._catch_up: HistoryCatchUp | None = None
        self.health = StorageHealth()

    def attach(
        self,
        storage: MemoryStorage,
        threads: ThreadRepository,
        catch_up: HistoryCatchUp | None = None,
    ) -> None:
        """``catch_up``: history reads wait for chat.out to be stored up to them (the
        service); without it they read what is stored (tests of the storage alone)."""
        self._storage = storage
        self._threads = threads
        self._catch_up = catch_up

    def attach_cycle_log(self, cycles: CycleLog) -> None:
        self._cycles = cycles

    @property
    def cycles(self) -> CycleLog:
        if self._cycles is None:
            raise RuntimeError("the memory service's storage is not open")
        return self._cycles

    @property
    def storage(self) -> MemoryStorage:
        if self._storage is None:
            raise RuntimeError("the memory service's storage is not open")
        return self._storage

    @property
    def threads(self) -> ThreadRepository:
        if self._threads is None:
            raise RuntimeError("the memory service's storage is not open")
        return self._threads

    async def on_chat_out(self, event: Envelope, delivery: Delivery) -> None:
        # A full disk is waited out here, in this delivery: what users were shown must reach
        # their history once there is room (storage_health.py).
        await self.health.written(lambda: self._keep_chat_out(event, delivery))

    async def _keep_chat_out(self, event: Envelope, delivery: Delivery) -> None:
        # One read of chat.out for both: a second group would parse every streamed token again.
        await self.cycles.record(event, delivery.stream, delivery.entry_id)
        payload = event.payload
        if isinstance(payload, CycleEnded) and event.cycle_id is not None:
            # Not a message, but shown under the reply: kept as long as the history is.
            await self.storage.cycle_summaries.record(
                event.user_id, event.thread_id, event.cycle_id, payload, event.time
            )
            return
        if not isinstance(payload, ChatPosted) or payload.message.transient:
            return  # deltas and status lines are not history
        seq = stream_sequence(delivery.entry_id)
        new = await self.storage.history.save(event.user_id, event.thread_id, payload.message, seq)
        # After the message is stored, so that a crash in between is healed: the entry stays
        # pending, and its redelivery (or the message stored again) recounts the thread from
        # the history rather than counting up a message that may have been counted already.
        await self.threads.record_message(
            event.user_id,
            event.thread_id,
            payload.message,
            seq,
            fresh=new and not delivery.redelivered,
        )
        if payload.message.chat_history:
            # In the background, later: never on the path of this handler or of a query.
            self.storage.summarizer.schedule(event.user_id, event.thread_id)

    async def on_cycle_event(self, event: Envelope, delivery: Delivery) -> None:
        """An event of chat.in, actions or actions.done: into its cycle's trace."""
        await self.health.written(
            lambda: self.cycles.record(event, delivery.stream, delivery.entry_id)
        )

    async def on_request(self, event: Envelope, delivery: Delivery) -> Envelope:
        try:
            payload = await self._answer(event)
        except Exception as exc:
            # Raising would retry the request until it is dead-lettered; the caller is
            # waiting for an answer, so say what is wrong instead.
            if is_storage_full(exc) and isinstance(event.payload, _MEMORY_WRITES):
                self.health.failed(exc)
                payload = MemoryFailure(
                    code="storage_full",
                    error_message="the disk under the memory store is full; nothing was changed",
                )
            elif isinstance(exc, EmbeddingError | VectorStoreError):
                log.error("%s for %s failed: %s", event.type, event.user_id, exc)
                payload = MemoryFailure(code="unavailable", error_message=str(exc))
            elif isinstance(exc, UNWRITABLE):
                # Its data cannot be stored, however often it is tried: a failure now, not
                # five deliveries and a dead letter while the caller waits.
                log.exception("%s for %s cannot be carried out", event.type, event.user_id)
                payload = cannot_be_done(event.payload)
            else:
                raise
        return Envelope(
            cycle_id=event.cycle_id,
            user_id=event.user_id,
            thread_id=event.thread_id,
            trace=event.trace,
            payload=payload,
        )

    async def _answer(self, event: Envelope) -> Payload:
        storage = self.storage
        user_id = event.user_id  # the only owner any request can act for
        payload = event.payload
        match payload:
            case HistoryQuery():
                return await self._history_page(user_id, event.thread_id, payload)
            case MemoryEmbed():
                return await storage.reader.embed(payload)
            case MemorySearch():
                return await storage.reader.search(user_id, payload)
            case MemoryGet():
                return await storage.reader.get(user_id, payload.memory_id)
            case MemoryList():
                return await storage.reader.list(user_id, payload)
            case MemoryHistoryQuery():
                return await storage.reader.history(user_id, payload)
            case MemorySave():
                return await storage.writer.save(user_id, payload, cycle_id=event.cycle_id)
            case MemoryUpdate():
                return await storage.writer.update(
                    user_id, payload, cycle_id=event.cycle_id, request_id=event.event_id
                )
            case MemoryDelete():
                return await storage.writer.delete(user_id, payload, cycle_id=event.cycle_id)
            case ThreadList() | ThreadCreate() | ThreadRename():
                return await self._answer_thread(user_id, payload)
            case CycleGet():
                cycle = await self.cycles.cycle(user_id, payload.cycle_id)
                if cycle is None:
                    return CycleFailure(
                        code="not_found", error_message="no such cycle", cycle_id=payload.cycle_id
                    )
                return CycleFound(cycle=cycle)
            case SessionConfigGet() | SessionConfigUpdate() | SessionPersonaApplied():
                return await answer_session(self.threads, self._settings, user_id, payload)
        log.error("unsupported request %s (%s)", event.type, event.event_id)
        return RpcFailure(code="unsupported", message=f"no handler for {event.type}")

    async def _history_page(
        self, user_id: str, thread_id: str, query: HistoryQuery
    ) -> HistoryPage | RpcFailure:
        """The stored summary is read, never computed here (the summarizer keeps it); the
        messages are those it does not cover, newest ``limit``, once every message posted
        before this request is stored."""
        if self._catch_up is not None:
            await self._catch_up.wait(user_id)
        before_seq = None
        continued = None  # the cycle of ``before_id``: it goes on in a newer page
        if query.before_id is not None:
            anchor = await self.storage.history.position_of(user_id, thread_id, query.before_id)
            if anchor is None:
                return RpcFailure(
                    code="not_found", message=f"no message {query.before_id!r} in this thread"
                )
            before_seq, continued = anchor
        if query.session:  # a cycle starting: its history and its session config at once
            (stored, messages), session = await asyncio.gather(
                self._history(user_id, thread_id, query, before_seq),
                self._session(user_id, thread_id),
            )
        else:
            history = await self._history(user_id, thread_id, query, before_seq)
            (stored, messages), session = history, None
        summary = stored.summary if stored and not stored.summary.empty else None
        cycles = []
        if query.cycles:
            # A cycle cut by the page's edge ends in a newer page: its summary goes there.
            ids = {m.cycle_id for m in messages if m.cycle_id and m.cycle_id != continued}
            cycles = await self.storage.cycle_summaries.of(user_id, thread_id, ids)
        return HistoryPage(messages=messages, summary=summary, session=session, cycles=cycles)

    async def _history(
        self, user_id: str, thread_id: str, query: HistoryQuery, before_seq: int | None
    ) -> tuple[StoredSummary | None, list[ChatRecord]]:
        storage = self.storage
        stored = await storage.summaries.get(user_id, thread_id) if query.summary else None
        messages = await storage.history.recent(
            user_id,
            thread_id,
            limit=query.limit,
            exclude_cycle_id=query.exclude_cycle_id,
            only_chat_history=query.only_chat_history,
            after_seq=stored.until_seq if stored else None,
            before_seq=before_seq,
            tool_records=query.tool_records,
        )
        return stored, messages

    async def _session(self, user_id: str, thread_id: str) -> SessionConfigState | None:
        request = SessionConfigGet(thread_id=thread_id, defaults_if_missing=True)
        answer = await answer_session(self.threads, self._settings, user_id, request)
        return answer if isinstance(answer, SessionConfigState) else None

    async def _answer_thread(
        self, user_id: str, request: ThreadList | ThreadCreate | ThreadRename
    ) -> ThreadPage | ThreadSaved | ThreadFailure:
        threads = self.threads
        match request:
            case ThreadList():
                return ThreadPage(threads=await threads.list(user_id, limit=request.limit))
            case ThreadCreate():
                thread, created = await threads.create(user_id, request.thread_id, request.title)
                return ThreadSaved(created=created, thread=thread)
            case ThreadRename():
                renamed = await threads.rename(user_id, request.thread_id, request.title)
                if renamed is None:
                    return ThreadFailure(
                        code="not_found",
                        error_message="no such thread",
                        thread_id=request.thread_id,
                    )
                return ThreadSaved(created=False, thread=renamed)


CANNOT_BE_DONE: Final = (
    "This request cannot be carried out: the memory service could not store or read what it "
    "holds (its log says why)."
)


def cannot_be_done(request: Payload) -> Payload:
    """The failure reply of the request's own kind, for a request that can never succeed."""
    if isinstance(request, MEMORY_REQUESTS):
        return MemoryFailure(code="invalid", error_message=CANNOT_BE_DONE)
    if isinstance(request, ThreadList | ThreadCreate | ThreadRename):
        return ThreadFailure(code="invalid", error_message=CANNOT_BE_DONE)
    return RpcFailure(code="invalid", message=CANNOT_BE_DONE)


MEMORY_REQUESTS: Final = (
    MemoryEmbed,
    MemorySearch,
    MemorySave,
    MemoryUpdate,
    MemoryDelete,
    MemoryGet,
    MemoryList,
    MemoryHistoryQuery,
)

"""The memory service: owns the document store; persists chat.out, answers requests."""

from __future__ import annotations

import logging

from memoria_contracts.events import (
    ChatPosted,
    Envelope,
    HistoryPage,
    HistoryQuery,
    RpcFailure,
)
from memoria_memory.docstore import DocumentStore, open_document_store
from memoria_memory.history import COLLECTION, HistoryRepository, stream_sequence
from memoria_runtime.bus import Delivery

log = logging.getLogger("memoria.memory")


class MemoryService:
    """Storage is opened at start-up, after the subscriptions were declared."""

    def __init__(self, docstore_url: str) -> None:
        self._url = docstore_url
        self._store: DocumentStore | None = None
        self._history: HistoryRepository | None = None

    async def open(self) -> None:
        self._store = await open_document_store(self._url)
        self._history = HistoryRepository(self._store.collection(COLLECTION))
        await self._history.setup()

    async def close(self) -> None:
        if self._store is not None:
            await self._store.close()

    @property
    def history(self) -> HistoryRepository:
        if self._history is None:
            raise RuntimeError("the memory service's storage is not open")
        return self._history

    async def on_chat_out(self, event: Envelope, delivery: Delivery) -> None:
        payload = event.payload
        if not isinstance(payload, ChatPosted) or payload.message.transient:
            return  # deltas, status lines and cycle ends are not history
        await self.history.save(
            event.user_id, event.thread_id, payload.message, stream_sequence(delivery.entry_id)
        )

    async def on_request(self, event: Envelope, delivery: Delivery) -> Envelope:
        payload = event.payload
        if isinstance(payload, HistoryQuery):
            messages = await self.history.recent(
                event.user_id,
                event.thread_id,
                limit=payload.limit,
                exclude_cycle_id=payload.exclude_cycle_id,
                only_chat_history=payload.only_chat_history,
            )
            return self._reply(event, HistoryPage(messages=messages))
        log.error("unsupported request %s (%s)", event.type, event.event_id)
        return self._reply(
            event, RpcFailure(code="unsupported", message=f"no handler for {event.type}")
        )

    @staticmethod
    def _reply(event: Envelope, payload: HistoryPage | RpcFailure) -> Envelope:
        return Envelope(
            cycle_id=event.cycle_id,
            user_id=event.user_id,
            thread_id=event.thread_id,
            trace=event.trace,
            payload=payload,
        )

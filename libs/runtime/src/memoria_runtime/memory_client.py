"""Typed calls to the memory service over request/reply."""

from __future__ import annotations

from faststream.redis import RedisBroker

from memoria_contracts.chat import ChatRecord
from memoria_contracts.events import Envelope, HistoryPage, HistoryQuery
from memoria_contracts.streams import Stream
from memoria_runtime.rpc import RpcClient, RpcError
from memoria_runtime.settings import Settings
from memoria_runtime.telemetry import current_trace_carrier


class MemoryClient:
    def __init__(self, broker: RedisBroker, settings: Settings) -> None:
        self._rpc = RpcClient(broker, settings, Stream.MEMORY_RPC)

    async def history(
        self,
        user_id: str,
        thread_id: str,
        *,
        limit: int,
        exclude_cycle_id: str | None = None,
        only_chat_history: bool = True,
        cycle_id: str | None = None,
    ) -> list[ChatRecord]:
        request = Envelope(
            user_id=user_id,
            thread_id=thread_id,
            cycle_id=cycle_id,
            trace=current_trace_carrier(),
            payload=HistoryQuery(
                limit=limit,
                exclude_cycle_id=exclude_cycle_id,
                only_chat_history=only_chat_history,
            ),
        )
        reply = await self._rpc.call(request)
        if not isinstance(reply.payload, HistoryPage):
            raise RpcError("unexpected_reply", f"expected history.page, got {reply.type}")
        return reply.payload.messages

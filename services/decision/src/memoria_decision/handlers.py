"""Decision's event handlers: chat.in and actions.done in, to the cycle's executor."""

from __future__ import annotations

import logging

from memoria_contracts.events import ActionCompleted, Envelope, UserMessageReceived
from memoria_decision.executor import CycleExecutor
from memoria_runtime.bus import Delivery

log = logging.getLogger("memoria.decision")


class DecisionHandlers:
    def __init__(self, engine: CycleExecutor) -> None:
        self._engine = engine

    async def on_chat_in(self, event: Envelope, delivery: Delivery) -> None:
        if not isinstance(event.payload, UserMessageReceived):
            log.error("unexpected %s on chat.in (%s)", event.type, event.event_id)
            return
        await self._engine.on_user_message(event, event.payload, delivery.data)

    async def on_action_done(self, event: Envelope, delivery: Delivery) -> None:
        if not isinstance(event.payload, ActionCompleted):
            log.error("unexpected %s on actions.done (%s)", event.type, event.event_id)
            return
        await self._engine.on_action_completed(event, event.payload)

"""From chat.out events to the frames a client sees (docs/protocol.md)."""

from __future__ import annotations

from memoria_contracts.events import ChatDelta, ChatPosted, CycleEnded, Envelope
from memoria_contracts.frames import CycleEndFrame, DeltaFrame, MessageFrame

OutboundFrame = MessageFrame | DeltaFrame | CycleEndFrame


def frame_for(event: Envelope, event_id: str | None = None) -> OutboundFrame | None:
    """The frame a client sees for a chat.out event; ``event_id`` is its stream entry id."""
    payload = event.payload
    if isinstance(payload, ChatPosted):
        message = payload.message
        if message.tool_record:
            return None  # tool calls and results are history for the LLM, not chat
        return MessageFrame(
            id=message.id,
            thread_id=event.thread_id,
            cycle_id=message.cycle_id or event.cycle_id,
            chat_history=message.chat_history,
            modal=message.modal,
            role=message.role,
            content=message.content,
            model=message.model,
            created_at=message.created_at,
            card=message.card,
            event_id=event_id,
        )
    if isinstance(payload, ChatDelta):
        return DeltaFrame(
            id=payload.message_id,
            thread_id=event.thread_id,
            cycle_id=event.cycle_id,
            content=payload.content,
            event_id=event_id,
        )
    if isinstance(payload, CycleEnded):
        return CycleEndFrame(
            cycle_id=event.cycle_id,
            thread_id=event.thread_id,
            actions=payload.actions,
            reason=payload.reason,
            usage=payload.usage,
            event_id=event_id,
        )
    return None

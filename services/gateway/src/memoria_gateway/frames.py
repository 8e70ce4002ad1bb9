"""From chat.out events to the frames a client sees (docs/protocol.md)."""

from __future__ import annotations

from memoria_contracts.chat import ChatRecord
from memoria_contracts.events import ChatDelta, ChatPosted, CycleEnded, CycleSummary, Envelope
from memoria_contracts.frames import CycleEndFrame, DeltaFrame, MessageFrame

OutboundFrame = MessageFrame | DeltaFrame | CycleEndFrame


def frame_for(event: Envelope, event_id: str | None = None) -> OutboundFrame | None:
    """The frame a client sees for a chat.out event; ``event_id`` is its stream entry id."""
    payload = event.payload
    if isinstance(payload, ChatPosted):
        message = payload.message
        if message.tool_record:
            return None  # tool calls and results are history for the LLM, not chat
        return message_frame(
            message,
            event.thread_id,
            cycle_id=message.cycle_id or event.cycle_id,
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


def message_frame(
    record: ChatRecord,
    thread_id: str,
    *,
    cycle_id: str | None,
    event_id: str | None = None,
    cycle_end: CycleSummary | None = None,
) -> MessageFrame:
    """The ``message`` frame that shows ``record``: live (with its ``event_id``) or from a
    thread's stored messages (with the ``cycle_end`` of the cycle it ends)."""
    return MessageFrame(
        id=record.id,
        thread_id=thread_id,
        cycle_id=cycle_id,
        chat_history=record.chat_history,
        modal=record.modal,
        role=record.role,
        content=record.content,
        model=record.model,
        created_at=record.created_at,
        card=record.card,
        event_id=event_id,
        cycle_end=cycle_end,
    )

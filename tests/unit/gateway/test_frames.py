"""chat.out events become the documented frames."""

from __future__ import annotations

import json

from memoria_contracts.chat import ChatRecord
from memoria_contracts.events import (
    ActionRequested,
    ChatDelta,
    ChatPosted,
    CycleContext,
    CycleEnded,
    Envelope,
    Payload,
)
from memoria_gateway.frames import frame_for


def envelope(payload: Payload) -> Envelope:
    return Envelope(cycle_id="cyc_1", user_id="ana", thread_id="t1", payload=payload)


def test_message_frame() -> None:
    record = ChatRecord(
        id="m1", chat_history=True, modal="text", role="assistant", content="hi", model="x"
    )
    frame = frame_for(envelope(ChatPosted(message=record)))
    assert frame is not None
    data = json.loads(frame.model_dump_json())
    assert data["type"] == "message"
    assert data["id"] == "m1"
    assert data["chat-history"] is True
    assert data["thread_id"] == "t1"
    assert data["cycle_id"] == "cyc_1"
    assert data["model"] == "x"


def test_delta_and_cycle_end_frames() -> None:
    delta = frame_for(envelope(ChatDelta(message_id="m1", content="pi")))
    assert delta is not None
    assert json.loads(delta.model_dump_json()) == {
        "type": "delta",
        "id": "m1",
        "thread_id": "t1",
        "cycle_id": "cyc_1",
        "content": "pi",
    }
    end = frame_for(envelope(CycleEnded(actions=["MemorySearch", "Finalize"], reason="done")))
    assert end is not None
    assert json.loads(end.model_dump_json())["actions"] == ["MemorySearch", "Finalize"]


def test_internal_events_are_not_sent_to_clients() -> None:
    original = ChatRecord(id="m", chat_history=True, modal="text", role="user", content="x")
    request = ActionRequested(
        step=1, action="Finalize", context=CycleContext(original_message=original)
    )
    assert frame_for(envelope(request)) is None

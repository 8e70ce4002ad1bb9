"""chat.out events become the documented frames."""

from __future__ import annotations

import json

import tool_history

from memoria_contracts.chat import ChatRecord
from memoria_contracts.events import (
    ActionRequested,
    ChatDelta,
    ChatPosted,
    CycleContext,
    CycleEnded,
    CycleUsage,
    Envelope,
    ModelUsage,
    Payload,
)
from memoria_contracts.frames import CycleEndFrame
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


def test_cycle_end_frame_carries_the_cycles_usage() -> None:
    flash = ModelUsage(input_tokens=1200, output_tokens=80, cost_usd=0.00056)
    used = CycleUsage(
        input_tokens=1200, output_tokens=80, cost_usd=0.00056, by_model={"gemini-2.5-flash": flash}
    )
    end = frame_for(envelope(CycleEnded(actions=["Finalize"], reason="done", usage=used)))
    assert end is not None
    assert json.loads(end.model_dump_json())["usage"] == {
        "input_tokens": 1200,
        "output_tokens": 80,
        "cost_usd": 0.00056,
        "by_model": {
            "gemini-2.5-flash": {"input_tokens": 1200, "output_tokens": 80, "cost_usd": 0.00056}
        },
    }


def test_cycle_end_without_usage_stays_readable_both_ways() -> None:
    # From a decision service older than the field: no usage, the frame says null.
    old_event = {"type": "cycle.ended", "actions": ["Finalize"], "reason": "done"}
    ended = CycleEnded.model_validate(old_event)
    end = frame_for(envelope(ended))
    assert end is not None
    data = json.loads(end.model_dump_json())
    assert data["usage"] is None
    # A frame from a gateway older than the field parses too.
    data.pop("usage")
    assert CycleEndFrame.model_validate(data).usage is None


def test_internal_events_are_not_sent_to_clients() -> None:
    original = ChatRecord(id="m", chat_history=True, modal="text", role="user", content="x")
    request = ActionRequested(
        step=1, action="Finalize", context=CycleContext(original_message=original)
    )
    assert frame_for(envelope(request)) is None


def test_tool_calls_and_results_are_not_sent_to_clients() -> None:
    """Tool calls and results are history for the LLM; the web page and the CLI never see them."""
    call = tool_history.call("c", 1, "MemorySearch")
    result = tool_history.result("c", 1, "MemorySearch", "found 3 memories")
    assert frame_for(envelope(ChatPosted(message=call))) is None
    assert frame_for(envelope(ChatPosted(message=result))) is None

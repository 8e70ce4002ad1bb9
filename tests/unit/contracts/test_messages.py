"""The wire shapes external clients and other services rely on."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from memoria_contracts.chat import ChatMessage, ChatRecord
from memoria_contracts.events import (
    ActionCompleted,
    ActionOutcome,
    ChatDelta,
    Envelope,
    UserMessageReceived,
)
from memoria_contracts.frames import ClientMessage, MessageFrame
from memoria_contracts.ids import new_id


def test_chat_message_uses_the_seed_keys_exactly() -> None:
    message = ChatMessage(chat_history=True, modal="text", role="user", content="oi")
    assert json.loads(message.model_dump_json()) == {
        "chat-history": True,
        "modal": "text",
        "role": "user",
        "content": "oi",
    }
    parsed = ChatMessage.model_validate(
        {"chat-history": False, "modal": "textForReplace", "role": "system", "content": "..."}
    )
    assert parsed.chat_history is False


def test_chat_message_rejects_unknown_modal_and_role() -> None:
    with pytest.raises(ValidationError):
        ChatMessage.model_validate(
            {"chat-history": True, "modal": "video", "role": "user", "content": ""}
        )
    with pytest.raises(ValidationError):
        ChatMessage.model_validate(
            {"chat-history": True, "modal": "text", "role": "tool", "content": ""}
        )


def test_memory_content_may_be_any_json() -> None:
    record = ChatRecord(
        id="m1", chat_history=True, modal="memory", role="assistant", content={"a": [1, 2]}
    )
    assert ChatRecord.model_validate_json(record.model_dump_json()) == record


def test_envelope_round_trips_and_names_its_payload_type() -> None:
    event = Envelope(
        cycle_id="cyc_1",
        user_id="ana",
        thread_id="t1",
        trace={"traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"},
        payload=ActionCompleted(
            step=2,
            action="Finalize",
            outcome=ActionOutcome(status="ok", ends_cycle=True, summary="done"),
            worker="w1",
        ),
    )
    data = json.loads(event.model_dump_json())
    assert data["type"] == "action.completed"
    assert data["schema_version"] == 1
    assert Envelope.model_validate(data) == event


def test_envelope_payload_is_discriminated_by_type() -> None:
    data = {
        "user_id": "ana",
        "thread_id": "t1",
        "payload": {"type": "chat.delta", "message_id": "m1", "content": "pi"},
    }
    assert isinstance(Envelope.model_validate(data).payload, ChatDelta)
    data["payload"] = {"type": "chat.unknown", "message_id": "m1"}
    with pytest.raises(ValidationError):
        Envelope.model_validate(data)


def test_envelope_ignores_fields_added_by_newer_producers() -> None:
    event = Envelope(
        user_id="ana", thread_id="t1", payload=UserMessageReceived(message_id="m", content="x")
    )
    data = json.loads(event.model_dump_json())
    data["added_later"] = 1
    data["payload"]["also_new"] = True
    assert Envelope.model_validate(data) == event


@pytest.mark.parametrize("user_id", ["", "a:b", "a b", "x" * 65, "ü"])
def test_user_ids_that_could_break_keys_are_refused(user_id: str) -> None:
    with pytest.raises(ValidationError):
        Envelope(
            user_id=user_id,
            thread_id="t1",
            payload=UserMessageReceived(message_id="m", content="x"),
        )


def test_client_message_frame() -> None:
    frame = ClientMessage.model_validate({"type": "message", "thread_id": "t1", "content": "hi"})
    assert frame.content == "hi"
    for bad in (
        {"type": "message", "thread_id": "t1"},
        {"type": "message", "thread_id": "t/1", "content": "hi"},
        {"type": "other", "thread_id": "t1", "content": "hi"},
        {"type": "message", "thread_id": "t1", "content": "hi", "extra": 1},
    ):
        with pytest.raises(ValidationError):
            ClientMessage.model_validate(bad)


def test_message_frame_carries_the_seed_keys() -> None:
    frame = MessageFrame(
        id="m1",
        thread_id="t1",
        cycle_id="c1",
        chat_history=True,
        modal="text",
        role="assistant",
        content="hello",
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
    )
    data = json.loads(frame.model_dump_json())
    assert {"type", "id", "thread_id", "cycle_id", "chat-history", "modal", "role"} <= set(data)
    assert data["type"] == "message"


def test_ids_sort_by_creation_time() -> None:
    ids = [new_id("msg") for _ in range(50)]
    assert ids == sorted(ids)
    assert len(set(ids)) == 50
    assert all(i.startswith("msg_") and len(i) == 30 for i in ids)


def test_a_record_calling_no_tools_is_a_message_people_see_everywhere() -> None:
    """An empty ``tool_calls`` list calls nothing: the gateway shows the record and the
    history counts it as shown (they used to disagree on it)."""
    record = ChatRecord.model_validate(
        {
            "id": "m1",
            "chat-history": True,
            "modal": "text",
            "role": "assistant",
            "content": "hello",
            "tool_calls": [],
        }
    )
    assert record.tool_calls is None
    assert not record.tool_record
    stored = json.loads(record.model_dump_json(by_alias=True))
    # What the history's filter of shown messages asks of a stored record.
    assert stored["role"] != "tool" and stored["tool_calls"] is None

"""A cycle's answer read from a listener's frames: text in order without duplicates, memories
apart, other cycles skipped, and a clear end when frames stop or are lost."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from memoria_contracts.frames import CycleEndFrame, DeltaFrame, MessageFrame
from memoria_gateway.cycle_answer import (
    AnswerLost,
    AnswerTimeout,
    CycleOver,
    MemoryUsed,
    TextPiece,
    follow,
)
from memoria_gateway.hub import OUTBOX_FRAMES, ConnectionHub, FrameListener
from memoria_gateway.openai_routes import DEFAULT_THREAD, OpenAIError, thread_for
from memoria_gateway.openai_schemas import ChatCompletionRequest
from memoria_runtime.bus.entry_id import EntryId

CYCLE = "cyc_1"


def message(mid: str, content: Any, *, role: str = "assistant", modal: str = "text",
            cycle: str = CYCLE) -> MessageFrame:  # fmt: skip
    return MessageFrame.model_validate(
        {
            "id": mid,
            "thread_id": "t",
            "cycle_id": cycle,
            "chat-history": True,
            "modal": modal,
            "role": role,
            "content": content,
            "created_at": datetime.now(UTC),
        }
    )


def delta(mid: str, content: str, cycle: str = CYCLE) -> DeltaFrame:
    return DeltaFrame(id=mid, thread_id="t", cycle_id=cycle, content=content)


def end(cycle: str = CYCLE) -> CycleEndFrame:
    return CycleEndFrame(cycle_id=cycle, thread_id="t", actions=["Finalize"], reason="done")


async def read(frames: list[Any], timeout_s: float = 1.0) -> list[Any]:
    listener = FrameListener("ana")
    for frame in frames:
        listener.deliver(frame)
    return [event async for event in follow(listener, CYCLE, timeout_s)]


def text_of(events: list[Any]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextPiece))


async def test_deltas_then_the_whole_message_give_the_text_once() -> None:
    events = await read(
        [
            message("u", "hi", role="user"),
            message("s", "Thinking...", modal="textForReplace"),
            delta("a", "Hel"),
            delta("a", "lo"),
            message("a", "Hello"),
            end(),
        ]
    )
    assert text_of(events) == "Hello"
    assert isinstance(events[-1], CycleOver)


async def test_two_messages_are_separated_and_memories_kept_apart() -> None:
    card = {"memory_id": "m1", "content": "I like tea"}
    events = await read(
        [
            message("m", card, modal="memory"),
            message("a", "Found one memory."),
            delta("b", "You like "),
            message("b", "You like tea."),
            end(),
        ]
    )
    assert text_of(events) == "Found one memory.\n\nYou like tea."
    assert [e.memory for e in events if isinstance(e, MemoryUsed)] == [card]


async def test_frames_of_other_cycles_are_skipped() -> None:
    events = await read(
        [message("x", "other", cycle="cyc_2"), end("cyc_2"), message("a", "mine"), end()]
    )
    assert text_of(events) == "mine"


async def test_a_redone_message_that_differs_adds_nothing() -> None:
    events = await read([delta("a", "Hello"), message("a", "Goodbye"), end()])
    assert text_of(events) == "Hello"


async def test_no_end_in_time_and_lost_frames_are_errors() -> None:
    with pytest.raises(AnswerTimeout):
        await read([message("a", "half")], timeout_s=0.05)
    listener = FrameListener("ana")
    listener.overflowed = True
    with pytest.raises(AnswerLost):
        _ = [event async for event in follow(listener, CYCLE, 1.0)]


def test_the_thread_comes_from_the_header_then_the_user_field() -> None:
    assert thread_for("trip", "someone") == "trip"
    assert thread_for(None, "trip-2") == "trip-2"
    assert thread_for(None, None) == DEFAULT_THREAD
    derived = thread_for(None, "ana@example.com")
    assert derived == thread_for(None, "ana@example.com")  # stable
    assert derived.startswith("user-") and "@" not in derived
    with pytest.raises(OpenAIError):
        thread_for("not a thread", None)


# -- many answers of one user at once -------------------------------------------------------


def entry(ms: int, sequence: int) -> EntryId:
    parsed = EntryId.parse(f"{ms}-{sequence}")
    assert parsed is not None
    return parsed


def test_a_listener_told_its_cycle_is_not_crowded_out_by_the_users_other_cycles() -> None:
    """The finding: about 60 concurrent /v1/chat/completions calls of one user got up to 50
    503s, as every listener took every frame of the user into a 2,000-frame queue. Told its
    cycle, a listener keeps that cycle's frames alone, however many others stream."""
    hub = ConnectionHub()
    with hub.listen("ana") as mine, hub.listen("ana") as other:
        hub.deliver("ana", entry(1, 0), delta("m0", "early, mine", cycle=CYCLE))
        hub.deliver("ana", entry(1, 1), delta("x0", "early, not mine", cycle="cyc_other"))
        mine.only(CYCLE)
        for n in range(OUTBOX_FRAMES * 2):
            hub.deliver("ana", entry(2, n), delta(f"x{n}", "noise", cycle="cyc_other"))
        hub.deliver("ana", entry(3, 0), delta("m1", " and late", cycle=CYCLE))
        assert not mine.overflowed
        kept = [mine.frames.get_nowait() for _ in range(mine.frames.qsize())]
        assert [f.content for f in kept if isinstance(f, DeltaFrame)] == [
            "early, mine",
            " and late",
        ]
        assert other.overflowed  # one told no cycle still takes everything (and may fall behind)


@pytest.mark.parametrize(
    "field",
    [{"stream": "yes"}, {"stream": 1}, {"n": "1"}, {"stream_options": {"include_usage": "yes"}}],
)
def test_flags_and_counts_are_taken_as_json_types_only(field: dict[str, Any]) -> None:
    """The finding: ``"stream": "yes"`` was taken as true. A JSON client that means true
    sends true; guessing would stream to a client that cannot read a stream."""
    body = {"model": "memoria", "messages": [{"role": "user", "content": "hi"}], **field}
    with pytest.raises(ValidationError):
        ChatCompletionRequest.model_validate(body)
    typed = {"stream": True, "n": 1, "stream_options": {"include_usage": True}}
    assert ChatCompletionRequest.model_validate(body | typed).stream

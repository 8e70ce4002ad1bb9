"""A memory made in the chat keeps when the user said it: the save is stamped with the
message's time, the model is told the message's date, and what it left relative ("last
week") is dated against that time, in the content and the bindings."""

from __future__ import annotations

from datetime import UTC, datetime

from memoria_contracts.memory import MemorySave, MemoryUpdate

from .harness import SAID_AT, Harness, card, memory
from .plans import ACTIONS, HOME


def _save_plan(content: object, bindings: list[str]) -> dict[str, object]:
    kind = "text" if isinstance(content, str) else "json"
    return {
        "memories": [
            {"type": kind, "content": content, "bindings": bindings, "memory_type": "user_profile"}
        ]
    }


async def test_a_save_is_stamped_with_the_time_of_the_message_not_of_the_step(
    harness: Harness,
) -> None:
    said = datetime(2026, 1, 1, 0, 5, tzinfo=UTC)
    plan = _save_plan("I live in Porto", ["where I live"])
    ctx, _ = harness.context("MemorySave", plan, message="I live in Porto", said_at=said)

    await ACTIONS["MemorySave"](ctx)

    (save,) = harness.memory.requests(MemorySave)
    assert save.creation_datetime == said


async def test_relative_dates_the_model_left_are_dated_against_the_message(
    harness: Harness,
) -> None:
    plan = _save_plan("I moved to Porto last week", ["where I live", "moved last week"])
    ctx, _ = harness.context("MemorySave", plan, message="Remember I moved to Porto last week")

    await ACTIONS["MemorySave"](ctx)

    (save,) = harness.memory.requests(MemorySave)
    assert save.content == "I moved to Porto last week (week of 2026-11-16)"
    assert save.bindings == ["where I live", "moved last week (week of 2026-11-16)"]
    assert len(save.vectors or []) == len(save.bindings)
    assert save.creation_datetime == SAID_AT


async def test_portuguese_and_json_content_are_dated_too(harness: Harness) -> None:
    plan = _save_plan({"evento": "mudança", "quando": "semana passada"}, ["mudança"])
    ctx, _ = harness.context("MemorySave", plan, message="mudei semana passada", language="pt")

    await ACTIONS["MemorySave"](ctx)

    (save,) = harness.memory.requests(MemorySave)
    assert save.content == {"evento": "mudança", "quando": "semana passada (semana de 2026-11-16)"}


async def test_a_date_the_model_wrote_itself_is_kept_as_it_wrote_it(harness: Harness) -> None:
    plan = _save_plan("I moved to Porto on 2026-11-18", ["where I live"])
    ctx, _ = harness.context("MemorySave", plan)

    await ACTIONS["MemorySave"](ctx)

    (save,) = harness.memory.requests(MemorySave)
    assert save.content == "I moved to Porto on 2026-11-18"


async def test_the_save_prompt_tells_the_model_the_date_of_the_message(harness: Harness) -> None:
    ctx, llm = harness.context("MemorySave", _save_plan("I live in Porto", ["where I live"]))

    await ACTIONS["MemorySave"](ctx)

    assert "The user's message was sent on Friday 2026-11-27" in llm.requests[0].prompt.system


async def test_an_update_is_dated_and_its_prompt_tells_the_date(harness: Harness) -> None:
    harness.memory.memories[HOME.memory_id] = HOME
    plan = {
        "updates": [
            {"_id": "mem_home1", "content": "Moved to Rio yesterday", "bindings": ["home city"]}
        ]
    }
    ctx, llm = harness.context(
        "MemoryUpdate", plan, message="I moved to Rio yesterday", history=[card(HOME)]
    )

    await ACTIONS["MemoryUpdate"](ctx)

    (update,) = harness.memory.requests(MemoryUpdate)
    assert update.content == "Moved to Rio yesterday (2026-11-26)"
    assert update.bindings == ["home city"]
    assert "The user's message was sent on Friday 2026-11-27" in llm.requests[0].prompt.system


async def test_the_content_offered_for_a_choice_is_dated_when_the_message_was_said(
    harness: Harness,
) -> None:
    """The user picks the memory in a later message; the content keeps the first one's date."""
    morning = memory("mem_cof1", "Drinks coffee every morning", memory_type="preference")
    black = memory("mem_cof2", "Coffee: black, no sugar", memory_type="preference")
    harness.memory.memories.update({morning.memory_id: morning, black.memory_id: black})
    plan = {"candidates": ["mem_cof1", "mem_cof2"], "content": "Quit coffee yesterday"}
    ctx, _ = harness.context(
        "MemoryUpdate",
        plan,
        history=[card(morning, "cyc_test1.1.1"), card(black, "cyc_test1.1.2")],
    )

    outcome = await ACTIONS["MemoryUpdate"](ctx)

    assert outcome.choice is not None
    assert outcome.choice.content == "Quit coffee yesterday (2026-11-26)"

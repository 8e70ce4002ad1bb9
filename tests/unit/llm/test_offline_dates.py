"""The offline planner dates what the user said relatively, against the time of the message,
in the saves and corrections it writes."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Final

import pytest

from memoria_action_worker.actions.memory_save import SavePlan
from memoria_action_worker.actions.memory_search import SearchPlan
from memoria_action_worker.actions.memory_update import UpdatePlan
from memoria_contracts.events import CycleContext, StepRecord
from memoria_offline import OfflineModel
from memoria_offline.cycle import view

from .cycles import context_for, memory_card, request, run_cycle

MODEL: Final = OfflineModel()
SAID_AT: Final = datetime(2026, 11, 27, 15, 0, tzinfo=UTC)  # a Friday
SEARCHED: Final = [StepRecord(step=1, action="MemorySearch", status="ok", summary="found")]


def said_on_friday(context: CycleContext) -> CycleContext:
    original = context.original_message.model_copy(update={"created_at": SAID_AT})
    return context.model_copy(
        update={"original_message": original, "transcript": [original, *context.transcript[1:]]}
    )


async def test_a_save_names_the_dates_and_keeps_the_words() -> None:
    context = said_on_friday(context_for("Remember that I moved to Porto last week"))

    plan = await MODEL.reasoning(request("MemorySave", context), SavePlan)

    (memory,) = plan.memories
    assert memory.content == "I moved to Porto last week (week of 2026-11-16)"
    assert memory.bindings[0] == memory.content
    assert "where I live" in memory.bindings


async def test_a_portuguese_save_is_dated_too() -> None:
    context = said_on_friday(context_for("Lembra que ontem comecei a aprender alemão"))

    plan = await MODEL.reasoning(request("MemorySave", context), SavePlan)

    (memory,) = plan.memories
    assert memory.content == "Ontem (2026-11-26) comecei a aprender alemão"


async def test_a_correction_is_dated() -> None:
    cards = [memory_card(1, 1, "mem_home", "I live in Lisbon")]
    context = said_on_friday(
        context_for("Actually I moved to Porto yesterday", transcript=cards, steps=SEARCHED)
    )

    plan = await MODEL.reasoning(request("MemoryUpdate", context), UpdatePlan)

    (update,) = plan.updates
    assert update.memory_id == "mem_home"
    assert update.content == "I moved to Porto yesterday (2026-11-26)"


async def test_a_message_without_dates_is_saved_as_it_was() -> None:
    context = said_on_friday(context_for("Remember that I am allergic to peanuts"))

    plan = await MODEL.reasoning(request("MemorySave", context), SavePlan)

    assert plan.memories[0].content == "I am allergic to peanuts"


def test_a_move_told_twice_is_known_in_its_dated_form_and_in_the_older_one() -> None:
    for held in ("I moved to Hamburg last month (2026-10)", "I moved to Hamburg last month"):
        cards = [memory_card(1, 1, "mem_move", held)]
        context = said_on_friday(
            context_for("Actually I moved to Hamburg last month", transcript=cards, steps=SEARCHED)
        )
        assert view(context).already_said, held


LAST_WEEK: Final = (datetime(2026, 11, 16, tzinfo=UTC), datetime(2026, 11, 23, tzinfo=UTC))
YESTERDAY: Final = (datetime(2026, 11, 26, tzinfo=UTC), datetime(2026, 11, 27, tzinfo=UTC))


@pytest.mark.parametrize(
    ("question", "window"),
    [
        ("What did I tell you last week?", LAST_WEEK),
        ("what did I say yesterday?", YESTERDAY),
        ("O que eu te disse semana passada?", LAST_WEEK),
        ("o que falei ontem?", YESTERDAY),
    ],
)
async def test_what_was_told_at_a_time_is_listed_within_it(
    question: str, window: tuple[datetime, datetime]
) -> None:
    context = said_on_friday(context_for(question))

    plan = await MODEL.reasoning(request("MemorySearch", context), SearchPlan)

    assert plan.mode == "chronological"
    assert (plan.since, plan.until) == window


async def test_a_topic_besides_the_time_is_searched_for_within_it() -> None:
    context = said_on_friday(context_for("What did I tell you about Porto last week?"))

    plan = await MODEL.reasoning(request("MemorySearch", context), SearchPlan)

    assert (plan.mode, plan.queries) == ("semantic", ["Porto"])
    assert (plan.since, plan.until) == LAST_WEEK


@pytest.mark.parametrize(
    "question", ["Where did I go last week?", "What did I tell you about my dog?"]
)
async def test_other_questions_are_searched_as_before(question: str) -> None:
    context = said_on_friday(context_for(question))

    plan = await MODEL.reasoning(request("MemorySearch", context), SearchPlan)

    assert plan.mode == "semantic"
    assert (plan.since, plan.until) == (None, None)


async def test_nothing_told_then_ends_the_cycle_without_asking_the_user() -> None:
    assert await run_cycle("What did I tell you yesterday?", found_per_search=[0]) == [
        "MemorySearch",
        "Finalize",
    ]

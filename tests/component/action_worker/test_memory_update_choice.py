"""MemoryUpdate with an ambiguous target: it updates nothing and reports the candidates for
decision to ask about (``ActionOutcome.choice``); only memories loaded in the thread are
offered, so an id the model made up, or another user's, never reaches the question."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from memoria_action_worker.actions.memory_update import UpdatePlan
from memoria_contracts.memory import MemoryUpdate

from .harness import Harness, card, memory
from .plans import ACTIONS

MORNING = memory("mem_cof1", "Drinks coffee every morning", memory_type="preference")
BLACK = memory("mem_cof2", "Coffee: black, no sugar", memory_type="preference")
CARDS = [card(MORNING, "cyc_test1.1.1"), card(BLACK, "cyc_test1.1.2")]


async def test_two_candidates_end_the_cycle_with_a_choice_and_update_nothing(
    harness: Harness,
) -> None:
    harness.memory.memories.update({MORNING.memory_id: MORNING, BLACK.memory_id: BLACK})
    plan = {
        "updates": [],
        "candidates": ["mem_cof1", "mem_cof2", "mem_someone_else"],
        "content": "Drinks tea",
        "question": "Which one?",
    }
    ctx, llm = harness.context(
        "MemoryUpdate", plan, message="update my coffee preference to tea", history=CARDS
    )

    outcome = await ACTIONS["MemoryUpdate"](ctx)

    assert harness.memory.requests(MemoryUpdate) == []
    assert (outcome.status, outcome.ends_cycle) == ("ok", True)
    assert outcome.choice is not None
    assert [c.memory_id for c in outcome.choice.candidates] == ["mem_cof1", "mem_cof2"]
    assert [c.content for c in outcome.choice.candidates] == [MORNING.content, BLACK.content]
    assert (outcome.choice.content, outcome.choice.content_kind) == ("Drinks tea", "text")
    assert outcome.summary == (
        "asked the user which memory to update: mem_cof1, mem_cof2; "
        "not offered (not loaded here): mem_someone_else"
    )
    assert len(llm.requests) == 1  # the plan only: no explanation, decision asks


async def test_a_single_known_candidate_is_updated(harness: Harness) -> None:
    harness.memory.memories.update({MORNING.memory_id: MORNING})
    plan = {"candidates": ["mem_cof1", "mem_elsewhere"], "content": "Drinks tea"}
    ctx, _ = harness.context("MemoryUpdate", plan, message="coffee -> tea", history=CARDS[:1])

    outcome = await ACTIONS["MemoryUpdate"](ctx)

    (request,) = harness.memory.requests(MemoryUpdate)
    assert (request.memory_id, request.content) == ("mem_cof1", "Drinks tea")
    assert outcome.choice is None and not outcome.ends_cycle


async def test_no_known_candidate_updates_nothing(harness: Harness) -> None:
    plan = {"candidates": ["mem_x", "mem_y"], "content": "Drinks tea"}
    ctx, _ = harness.context("MemoryUpdate", plan, message="coffee -> tea", history=CARDS)

    outcome = await ACTIONS["MemoryUpdate"](ctx)

    assert harness.memory.requests(MemoryUpdate) == []
    assert outcome.choice is None and outcome.status == "ok"
    assert outcome.summary.startswith("updated no memory: no candidate is a memory loaded here")


async def test_one_update_with_an_id_never_shown_asks_among_the_memories_shown(
    harness: Harness,
) -> None:
    harness.memory.memories.update({MORNING.memory_id: MORNING, BLACK.memory_id: BLACK})
    plan = {"updates": [{"_id": "mem_not_shown", "content": "Drinks tea"}]}
    ctx, _ = harness.context("MemoryUpdate", plan, message="x", history=CARDS)

    outcome = await ACTIONS["MemoryUpdate"](ctx)

    assert harness.memory.requests(MemoryUpdate) == []
    assert outcome.choice is not None and outcome.ends_cycle
    assert [c.memory_id for c in outcome.choice.candidates] == ["mem_cof1", "mem_cof2"]
    assert outcome.choice.content == "Drinks tea"


@pytest.mark.parametrize(
    "plan",
    [
        {"updates": []},
        {"candidates": ["mem_cof1", "mem_cof2"]},  # no new content
        {"updates": [{"_id": "mem_cof1", "content": "x"}], "candidates": ["mem_cof2"]},
    ],
)
def test_plans_that_say_nothing_clear_are_invalid(plan: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        UpdatePlan.model_validate(plan)

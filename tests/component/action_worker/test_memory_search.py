"""MemorySearch: one memory card per memory found, nothing fetched twice in a cycle."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from memoria_action_worker.actions.memory_search import SearchPlan
from memoria_contracts.memory import Memory, MemoryEmbed, MemorySearch, near_the_best
from memoria_runtime.settings import Settings

from .harness import CYCLE_ID, EMBEDDER, THREAD_ID, Harness, card, memory
from .plans import ACTIONS, SEARCH_PLAN

OLD = memory("mem_old1", "Is allergic to shellfish", memory_type="constraint")
PEANUTS = memory("mem_nuts1", "Is allergic to peanuts", memory_type="constraint")
VEGAN = memory("mem_vegan1", {"diet": "vegan"}, memory_type="preference")


async def test_posts_one_memory_card_per_result_and_skips_what_the_cycle_has(
    harness: Harness,
) -> None:
    for found in (OLD, PEANUTS, VEGAN):
        harness.memory.memories[found.memory_id] = found
    ctx, llm = harness.context(
        "MemorySearch",
        SEARCH_PLAN,
        message="what can't I eat?",
        earlier=[card(OLD)],
        chat="I looked for your allergies and found two memories.",
    )

    outcome = await ACTIONS["MemorySearch"](ctx)

    embeds = harness.memory.requests(MemoryEmbed)
    assert [(e.texts, e.purpose) for e in embeds] == [(SEARCH_PLAN["queries"], "query")]
    [search] = harness.memory.requests(MemorySearch)
    assert search.exclude_ids == ["mem_old1"]
    assert search.mode == "semantic"
    assert search.queries == SEARCH_PLAN["queries"]
    assert search.vectors == [[0.0, 16.0], [1.0, 17.0]]
    assert search.embedder == EMBEDDER
    assert search.limit == harness.settings.memory.memory_limit
    assert search.min_relevance == harness.settings.memory.memory_min_relevance
    assert {(s.thread_id, s.cycle_id) for s in harness.memory.sent} == {(THREAD_ID, CYCLE_ID)}

    cards = [f for f in harness.publisher.frames() if f["modal"] == "memory"]
    assert [c["content"]["memory_id"] for c in cards] == ["mem_nuts1", "mem_vegan1"]
    assert all(c["chat-history"] is True and c["role"] == "system" for c in cards)
    assert cards[1]["content"]["content"] == {"diet": "vegan"}

    assert outcome.status == "ok"
    assert [m.modal for m in outcome.messages] == ["memory", "memory", "text"]
    assert outcome.messages[-1].content == "I looked for your allergies and found two memories."
    assert "mem_nuts1" in outcome.summary
    assert "Is allergic to peanuts" in outcome.summary
    assert "mem_old1" not in outcome.summary
    # Its tool call's arguments in the thread's history.
    assert outcome.arguments == {"mode": "semantic", "queries": SEARCH_PLAN["queries"]}

    # Between the two, the model is asked to rerank what was found (no answer scripted here).
    plan_request, rerank_request, explain_request = llm.requests
    assert rerank_request.task == "MemoryRerank"
    plan_prompt = plan_request.prompt.messages[-1].content
    assert "mem_old1" in plan_prompt  # shown as already retrieved, so not looked for again
    assert harness.settings.memory.memory_type_descriptions["constraint"] in plan_prompt
    found = json.loads(explain_request.metadata["results"])["found"]
    assert [f["memory_id"] for f in found] == ["mem_nuts1", "mem_vegan1"]
    assert "some key" not in explain_request.prompt.messages[-1].content
    # Each memory's keys, for rule-based providers only: they read a memory's subject there.
    keys = json.loads(explain_request.metadata["bindings"])
    assert keys == {"mem_nuts1": ["some key"], "mem_vegan1": ["some key"]}


async def test_nothing_found_is_said_and_is_not_a_failure(harness: Harness) -> None:
    ctx, llm = harness.context("MemorySearch", ["aliexpress password"])

    outcome = await ACTIONS["MemorySearch"](ctx)

    assert outcome.status == "ok"
    assert "found no new memories" in outcome.summary
    assert '"aliexpress password"' in outcome.summary
    assert [m.modal for m in outcome.messages] == ["text"]
    assert json.loads(llm.requests[-1].metadata["results"])["found"] == []


async def test_chronological_search_needs_no_embedding_but_shows_every_status(
    harness: Harness,
) -> None:
    harness.memory.memories[PEANUTS.memory_id] = PEANUTS
    plan = {"queries": ["latest memories"], "mode": "chronological", "memory_type": "constraint"}
    ctx, _ = harness.context("MemorySearch", plan)

    outcome = await ACTIONS["MemorySearch"](ctx)

    assert harness.memory.requests(MemoryEmbed) == []
    [search] = harness.memory.requests(MemorySearch)
    assert (search.mode, search.memory_type, search.vectors) == (
        "chronological",
        "constraint",
        None,
    )
    assert len(harness.publisher.statuses()) == 3
    assert outcome.status == "ok"
    assert "mem_nuts1" in outcome.summary


async def test_a_plan_with_a_time_window_searches_within_it(harness: Harness) -> None:
    harness.memory.memories[PEANUTS.memory_id] = PEANUTS
    plan = {
        "queries": ["what the user said last week"],
        "mode": "chronological",
        "since": "2026-11-16T00:00:00+00:00",
        "until": "2026-11-23T00:00:00+00:00",
    }
    ctx, llm = harness.context("MemorySearch", plan, message="what did I tell you last week?")

    outcome = await ACTIONS["MemorySearch"](ctx)

    [search] = harness.memory.requests(MemorySearch)
    assert (search.since, search.until) == (
        datetime(2026, 11, 16, tzinfo=UTC),
        datetime(2026, 11, 23, tzinfo=UTC),
    )
    assert (outcome.arguments or {})["since"] == "2026-11-16T00:00:00+00:00"
    assert "told since 2026-11-16T00:00:00+00:00, told until 2026-11-23" in outcome.summary
    plan_system = llm.requests[0].prompt.system
    assert "The user's message was sent on Friday 2026-11-27" in plan_system
    assert "since" in plan_system
    assert {"since", "until"} <= set(SearchPlan.model_json_schema()["properties"])


def test_a_plan_time_without_an_offset_is_utc() -> None:
    plan = SearchPlan.model_validate({"queries": ["x"], "since": "2026-11-16T00:00:00"})
    assert plan.since == datetime(2026, 11, 16, tzinfo=UTC)


async def test_a_plan_whose_window_ends_before_it_starts_is_not_searched(
    harness: Harness,
) -> None:
    plan = {
        "queries": ["x"],
        "mode": "chronological",
        "since": "2026-11-23T00:00:00+00:00",
        "until": "2026-11-16T00:00:00+00:00",
    }
    ctx, _ = harness.context("MemorySearch", plan)

    outcome = await ACTIONS["MemorySearch"](ctx)

    assert harness.memory.requests(MemorySearch) == []
    assert outcome.status != "ok"


def store(harness: Harness, *found: Memory) -> None:
    for each in found:
        harness.memory.memories[each.memory_id] = each


def card_ids(harness: Harness) -> list[str]:
    return [f["content"]["memory_id"] for f in harness.publisher.frames() if f["modal"] == "memory"]


async def test_the_models_rerank_decides_the_cards_the_explanation_and_the_summary(
    harness: Harness,
) -> None:
    store(harness, OLD, PEANUTS, VEGAN)  # the search's order
    ctx, llm = harness.context(
        "MemorySearch",
        SEARCH_PLAN,
        message="what am I allergic to?",
        also={"MemoryRerank": {"relevant": ["mem_nuts1", "mem_old1"]}},
    )

    outcome = await ACTIONS["MemorySearch"](ctx)

    assert outcome.status == "ok"
    assert card_ids(harness) == ["mem_nuts1", "mem_old1"]  # the diet is not an allergy
    assert [m.modal for m in outcome.messages] == ["memory", "memory", "text"]
    assert "found 2 memories" in outcome.summary and "mem_vegan1" not in outcome.summary
    _, rerank_request, explain_request = llm.requests
    assert rerank_request.task == "MemoryRerank"
    assert "what am I allergic to?" in rerank_request.prompt.messages[-1].content
    found = json.loads(explain_request.metadata["results"])["found"]
    assert [f["memory_id"] for f in found] == ["mem_nuts1", "mem_old1"]


async def test_a_rerank_that_fails_shows_every_memory_found_and_tells_nobody(
    harness: Harness,
) -> None:
    store(harness, OLD, PEANUTS, VEGAN)
    ctx, _ = harness.context(
        "MemorySearch", SEARCH_PLAN, also={"MemoryRerank": {"relevant": "not a list"}}
    )

    outcome = await ACTIONS["MemorySearch"](ctx)

    assert outcome.status == "ok"
    assert card_ids(harness) == ["mem_old1", "mem_nuts1", "mem_vegan1"]
    assert harness.publisher.notices() == []


async def test_no_rerank_when_turned_off(harness: Harness) -> None:
    store(harness, OLD, PEANUTS, VEGAN)
    harness.settings = Settings.load(_env_file=None, memory_rerank=False)
    answer = {"MemoryRerank": {"relevant": ["mem_vegan1"]}}
    ctx, llm = harness.context("MemorySearch", SEARCH_PLAN, also=answer)

    await ACTIONS["MemorySearch"](ctx)

    assert [r.task for r in llm.requests] == ["MemorySearch", "MemorySearch"]  # plan, explain
    assert card_ids(harness) == ["mem_old1", "mem_nuts1", "mem_vegan1"]


async def test_no_rerank_of_a_chronological_search(harness: Harness) -> None:
    store(harness, OLD, PEANUTS, VEGAN)
    latest = {"queries": ["latest memories"], "mode": "chronological"}
    answer = {"MemoryRerank": {"relevant": ["mem_vegan1"]}}
    ctx, llm = harness.context("MemorySearch", latest, also=answer)

    await ACTIONS["MemorySearch"](ctx)

    # Newest first is the order a chronological search was asked for.
    assert "MemoryRerank" not in [r.task for r in llm.requests]
    assert card_ids(harness) == ["mem_old1", "mem_nuts1", "mem_vegan1"]


async def test_cards_near_the_best_match_only_each_saying_how_it_matched(
    harness: Harness,
) -> None:
    """With no model's rerank, a memory far below the best match gets no card ("Where do I
    live?" showed the sister's bassoon at a tenth of the city's relevance); the first card is
    the best match. (A model's rerank sees every memory found: test_memory_rerank.)"""
    harness.settings = harness.settings.updated(memory_rerank=False)
    scored = {
        "mem_city": ("I live in Recife", 0.39),
        "mem_near": ("I moved to Recife in 2020", 0.2),
        "mem_far": ("My sister Ingrid plays the bassoon", 0.04),
    }
    for memory_id, (content, score) in scored.items():
        found = memory(memory_id, content).model_copy(update={"relevance_score": score})
        harness.memory.memories[memory_id] = found
    ctx, _ = harness.context("MemorySearch", SEARCH_PLAN, message="where do I live?")

    await ACTIONS["MemorySearch"](ctx)

    cards = [f for f in harness.publisher.frames() if f["modal"] == "memory"]
    assert [c["content"]["memory_id"] for c in cards] == ["mem_city", "mem_near"]
    assert [c["card"] for c in cards] == [
        {"kind": "found", "match": "best", "replaced": None},
        {"kind": "found", "match": "related", "replaced": None},
    ]
    assert cards[0]["content"]["relevance_score"] == 0.39  # the number stays in the content


def test_the_relative_cut_keeps_everything_at_zero_and_without_scores() -> None:
    memories = [
        memory("mem_a", "x").model_copy(update={"relevance_score": 0.5}),
        memory("mem_b", "y").model_copy(update={"relevance_score": 0.01}),
    ]
    assert near_the_best(memories, 0.0) == memories
    assert [m.memory_id for m in near_the_best(memories, 0.3)] == ["mem_a"]
    unscored = [memory("mem_c", "z"), memory("mem_d", "w")]
    assert near_the_best(unscored, 0.3) == unscored

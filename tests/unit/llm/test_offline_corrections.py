"""Corrections without a model: the offline planner searches what a correction is about
(not its new value, which memory does not hold yet), changes the memory that shares it, asks
which one when several fit equally, and saves the correction as new when nothing fits."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from memoria_action_worker.actions.memory_save import SavePlan
from memoria_action_worker.actions.memory_search import SearchPlan
from memoria_action_worker.actions.memory_update import UpdatePlan
from memoria_contracts.events import CycleContext, StepRecord
from memoria_offline import OfflineModel
from memoria_offline.intents import Intent, read

from .cycles import ACTIONS, context_for, memory_card, request, run_cycle

MODEL = OfflineModel()
SEARCHED = [StepRecord(step=1, action="MemorySearch", status="ok", summary="found")]
COFFEE = ("mem_coffee", "I drink coffee every morning")
WINE = ("mem_wine", "I drink wine on Fridays")
BERLIN = ("mem_home", "I live in Berlin")


def after_search(text: str, *memories: tuple[str, str]) -> CycleContext:
    cards = [memory_card(1, n, i, content) for n, (i, content) in enumerate(memories, 1)]
    return context_for(text, transcript=cards, steps=SEARCHED)


async def update_plan(text: str, *memories: tuple[str, str]) -> UpdatePlan:
    context = after_search(text, *memories)
    assert await MODEL.reasoning_heavy(request("decide", context), ACTIONS) == "MemoryUpdate"
    return await MODEL.reasoning(request("MemoryUpdate", context), UpdatePlan)


async def search_queries(text: str) -> list[str]:
    plan = await MODEL.reasoning(request("MemorySearch", context_for(text)), SearchPlan)
    return list(plan.queries)


# -- what a correction searches ------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "query"),
    [
        ("actually, I drink tea", "I drink coffee, tea, juice, beer or wine"),
        ("na verdade, eu bebo chá", "bebo café, chá, água, suco, cerveja ou vinho"),
        ("correction: my sister is called Rita", "My sister"),
        ("minha irmã se chama Rita, não Rute", "Rute"),
        ("not coffee, tea", "coffee"),
        ("tea, not coffee", "coffee"),
    ],
)
async def test_a_correction_searches_what_it_is_about(message: str, query: str) -> None:
    assert query in await search_queries(message)


async def test_a_correction_naming_the_old_value_does_not_search_the_new_one_alone() -> None:
    assert "tea" not in await search_queries("not coffee, tea")


# -- which memory it changes ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "content"),
    [
        ("actually, I drink tea", "I drink tea every morning"),
        ("Actually I drink tea now", "I drink tea every morning"),
        ("I don't drink coffee anymore, I drink tea", "I don't drink coffee anymore, I drink tea"),
        ("not coffee, tea", "I drink tea every morning"),
        ("Tea, not coffee.", "I drink tea every morning"),
        ("No, tea, not coffee", "I drink tea every morning"),
        ("actually, I drink tea, not coffee", "I drink tea every morning"),
    ],
)
async def test_an_english_correction_updates_the_memory_it_corrects(
    message: str, content: str
) -> None:
    plan = await update_plan(message, BERLIN, COFFEE)
    (update,) = plan.updates
    assert (update.memory_id, update.content) == ("mem_coffee", content)


@pytest.mark.parametrize(
    ("message", "held", "content"),
    [
        ("na verdade, eu bebo chá", "Eu bebo café todas as manhãs", "Eu bebo chá todas as manhãs"),
        ("não café, chá", "Eu bebo café todas as manhãs", "Eu bebo chá todas as manhãs"),
        ("não café, e sim chá", "Eu bebo café todas as manhãs", "Eu bebo chá todas as manhãs"),
        (
            "minha irmã se chama Rita, não Rute",
            "Minha irmã se chama Rute",
            "Minha irmã se chama Rita",
        ),
        (
            "correção: minha irmã se chama Rita",
            "Minha irmã se chama Rute",
            "Minha irmã se chama Rita",
        ),
    ],
)
async def test_a_portuguese_correction_updates_the_memory_it_corrects(
    message: str, held: str, content: str
) -> None:
    plan = await update_plan(message, ("mem_home", "Moro em Recife"), ("mem_held", held))
    (update,) = plan.updates
    assert (update.memory_id, update.content) == ("mem_held", content)


async def test_the_memory_sharing_the_subject_wins_over_one_sharing_a_topic_only() -> None:
    brother = ("mem_brother", "My brother is called Tom")
    sister = ("mem_sister", "My sister is called Rute")
    plan = await update_plan("correction: my sister is called Rita", brother, sister)
    assert [update.memory_id for update in plan.updates] == ["mem_sister"]


@pytest.mark.parametrize(
    ("message", "held", "content"),
    [
        (
            "Actually, my sister plays the oboe",
            "My sister Ingrid plays the bassoon",
            "My sister Ingrid plays the oboe",
        ),
        ("I drink tea now", "I drink coffee every morning", "I drink tea every morning"),
        (
            "Na verdade, minha irmã toca oboé",
            "Minha irmã Ingrid toca fagote",
            "Minha irmã Ingrid toca oboé",
        ),
        ("Agora bebo chá", "Bebo café todas as manhãs", "Bebo chá todas as manhãs"),
        # A new fact with nothing in common but the subject replaces the memory whole.
        ("I moved to Hamburg", "I live in Berlin", "I moved to Hamburg"),
    ],
)
async def test_a_correction_keeps_what_it_does_not_correct(
    message: str, held: str, content: str
) -> None:
    plan = await update_plan(message, ("mem_held", held))
    (update,) = plan.updates
    assert (update.memory_id, update.content) == ("mem_held", content)


async def test_several_memories_that_fit_equally_are_offered_to_choose() -> None:
    """ "I drink tea" may correct the coffee or the wine: the user is asked which (the update
    action turns the candidates into the "which memory?" question)."""
    plan = await update_plan("actually, I drink tea", COFFEE, BERLIN, WINE)
    assert plan.updates == []
    assert plan.candidates == ["mem_coffee", "mem_wine"]
    assert plan.content == "I drink tea"


async def test_the_old_value_picks_one_of_several_that_fit() -> None:
    plan = await update_plan("I drink tea, not wine", COFFEE, WINE)
    assert [(u.memory_id, u.content) for u in plan.updates] == [
        ("mem_wine", "I drink tea on Fridays")
    ]


# -- nothing to correct --------------------------------------------------------------------


@pytest.mark.parametrize(
    "message", ["actually, I drink tea", "na verdade, eu bebo chá", "I drink tea, not coffee"]
)
async def test_a_correction_with_nothing_to_correct_is_saved_as_new(message: str) -> None:
    found = [("I live in Berlin", 1), ("Moro em Recife", 1)]
    assert await run_cycle(message, found=found) == ["MemorySearch", "MemorySave", "Finalize"]


async def test_its_search_says_nothing_and_the_save_answers() -> None:
    context = after_search("actually, I drink tea", BERLIN)
    results = {"found": [{"memory_id": BERLIN[0], "content": BERLIN[1]}]}
    metadata = {"results": json.dumps(results)}
    said = "".join([p async for p in MODEL.chat(request("MemorySearch", context, metadata))])
    assert said == ""  # one answer a turn: the save's
    save = await MODEL.reasoning(request("MemorySave", context), SavePlan)
    assert [m.content for m in save.memories] == ["I drink tea"]


async def test_a_new_value_alone_with_nothing_holding_the_old_one_saves_nothing() -> None:
    assert await run_cycle("not coffee, tea", found=[("I live in Berlin", 1)]) == [
        "MemorySearch",
        "Finalize",
    ]
    context = context_for("not coffee, tea", steps=SEARCHED)
    closing = "".join([p async for p in MODEL.chat(request("Finalize", context))])
    assert closing.startswith('I found no memory saying "coffee", so I changed nothing.')


@pytest.mark.parametrize(
    "message", ["not bad, thanks", "Not really, no", "not now, later", "não agora, obrigado"]
)
def test_conversation_with_a_not_is_no_correction(message: str) -> None:
    assert read(message).intent == Intent.SMALL_TALK


def test_a_statement_with_not_and_nothing_after_is_no_correction() -> None:
    assert read("I'm not sure, maybe").intent == Intent.SMALL_TALK
    assert read("I like cats, not dogs").facts == ("I like cats, not dogs",)


# -- told again ----------------------------------------------------------------------------


async def test_a_correction_told_again_another_day_keeps_the_one_dated_memory() -> None:
    """The memory says "… last month (2026-10)"; told again in November, the same words
    resolve to another month, but it is the same fact: the save repeats the memory's own
    words, so the memory service finds it and keeps one."""
    held = ("mem_move", "I moved to Hamburg last month (2026-10)")
    context = after_search("I moved to Hamburg last month", held)
    context = context.model_copy(
        update={
            "original_message": context.original_message.model_copy(
                update={"created_at": datetime(2026, 12, 3, tzinfo=UTC)}
            )
        }
    )
    assert await MODEL.reasoning_heavy(request("decide", context), ACTIONS) == "MemorySave"
    save = await MODEL.reasoning(request("MemorySave", context), SavePlan)
    assert [m.content for m in save.memories] == ["I moved to Hamburg last month (2026-10)"]


async def test_a_correction_naming_the_old_value_told_again_keeps_one_memory() -> None:
    """No memory holds "Rute" any more, but the one the first telling made says "Rita"."""
    context = after_search(
        "minha irmã se chama Rita, não Rute", ("mem_sis", "Minha irmã se chama Rita")
    )
    assert await MODEL.reasoning_heavy(request("decide", context), ACTIONS) == "MemorySave"
    save = await MODEL.reasoning(request("MemorySave", context), SavePlan)
    assert [m.content for m in save.memories] == ["Minha irmã se chama Rita"]

"""Corrections without a model, on the real stack: a correction finds the memory it corrects
through the hybrid search (by what it is about, not by its new value) and changes it, so the
user still has one memory of the fact, not two that contradict each other."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from offline_chat import actions, answers, api_get, cards, offline_stack, say, written
from stack import Stack

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def stack(
    valkey_server: Any, milvus_server: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    data_dir = tmp_path_factory.mktemp("corrections-stack")
    with offline_stack(valkey_server.port, milvus_server.uri, data_dir, db=5) as running:
        yield running


async def memories_of(stack: Stack, user: str) -> list[Any]:
    return cards(await say(stack, user, "list", "What do you know about me?"))


@pytest.mark.parametrize(
    ("user", "told", "correction", "kept"),
    [
        (
            "ana",
            "I drink coffee every morning",
            "actually, I drink tea",
            "I drink tea every morning",
        ),
        (
            "bia",
            "I drink coffee every morning",
            "not coffee, tea",
            "I drink tea every morning",
        ),
        (
            "caio",
            "Eu bebo café todas as manhãs",
            "na verdade, eu bebo chá",
            "Eu bebo chá todas as manhãs",
        ),
        (
            "gil",
            "My sister Ingrid plays the bassoon",
            "Actually, my sister plays the oboe",
            "My sister Ingrid plays the oboe",
        ),
        ("hugo", "I drink coffee every morning", "I drink tea now", "I drink tea every morning"),
        (
            "dora",
            "Minha irmã se chama Rute",
            "minha irmã se chama Rita, não Rute",
            "Minha irmã se chama Rita",
        ),
    ],
)
async def test_a_correction_updates_the_memory_and_it_stays_one(
    stack: Stack, user: str, told: str, correction: str, kept: str
) -> None:
    await say(stack, user, "a", told)
    corrected = await say(stack, user, "b", correction)
    assert actions(corrected) == ["MemorySearch", "MemoryUpdate", "Finalize"]
    assert await memories_of(stack, user) == [kept]
    # The history keeps the old value.
    [memory] = (await api_get(stack, user, "/api/memories"))["memories"]
    history = await api_get(stack, user, f"/api/memories/{memory['memory_id']}/history")
    assert [c["kind"] for c in history["changes"]] == ["created", "updated"]
    assert history["changes"][-1]["old"]["content"] == told
    assert history["changes"][-1]["new"]["content"] == kept
    # Told again: nothing left to change, and still one memory.
    again = await say(stack, user, "c", correction)
    assert "MemoryUpdate" not in actions(again)
    assert await memories_of(stack, user) == [kept]


async def test_a_correction_that_fits_two_memories_asks_which(stack: Stack) -> None:
    """ "I drink tea" may correct the coffee or the wine: the user picks, by number, the one
    it corrects; it changes, the other stays, and nothing new is saved."""
    await say(stack, "eva", "a", "I drink coffee every morning")
    await say(stack, "eva", "a", "I drink wine on Fridays")
    asked = await say(stack, "eva", "b", "actually, I drink tea")
    assert actions(asked) == ["MemorySearch", "MemoryUpdate"]
    question = str(answers(asked)[-1]["content"])
    assert question.startswith('Which memory should become "I drink tea"?')
    number = re.search(r"^(\d+)\. I drink coffee every morning$", question, re.MULTILINE)
    assert number is not None, question
    await say(stack, "eva", "b", number.group(1))
    assert sorted(await memories_of(stack, "eva")) == ["I drink tea", "I drink wine on Fridays"]


async def test_a_dated_fact_told_again_stays_one_memory(stack: Stack) -> None:
    first = await say(stack, "fay", "a", "I started a new job last week")
    [kept] = written(first)
    assert "(week of " in kept
    assert str(answers(first)[0]["content"]).startswith("Noted: you started a new job last week")
    again = await say(stack, "fay", "b", "I started a new job last week")
    assert str(answers(again)[0]["content"]).startswith("I already knew that: you started")
    assert written(again) == [kept]
    assert await memories_of(stack, "fay") == [kept]

"""No key, no model: the default a newcomer gets. The offline planner drives real cycles
across the four services — save, recall, correct and forget memories, in English and
Portuguese — each turn one answer, labelled as the offline planner's, the first of a
conversation saying that no language model answers."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import redis.asyncio as redis
from offline_chat import actions, answers, cards, offline_stack, say, written
from stack import Stack
from ws_client import Frame

pytestmark = pytest.mark.integration

OFFLINE_LABEL = "offline planner (no LLM)"
HTTP_TIMEOUT_S = 30.0
NO_MODEL = "No language model is answering"


@pytest.fixture(scope="module")
def stack(
    valkey_server: Any, milvus_server: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    data_dir = tmp_path_factory.mktemp("offline-stack")
    with offline_stack(valkey_server.port, milvus_server.uri, data_dir, db=4) as running:
        yield running


async def test_remember_recall_correct_and_forget_without_a_model(stack: Stack) -> None:
    saved = await say(stack, "lia", "a", "Remember that I am allergic to peanuts")
    assert actions(saved) == ["MemorySave", "Finalize"]
    [answer] = answers(saved)  # one message a turn
    assert answer["content"].startswith("Noted: you are allergic to peanuts.")
    assert answer["model"] == OFFLINE_LABEL
    assert NO_MODEL in answer["content"]  # the conversation's first answer says it
    assert written(saved) == ["I am allergic to peanuts"]  # a card of what was stored

    recalled = await say(stack, "lia", "b", "What am I allergic to?")
    assert actions(recalled) == ["MemorySearch", "Finalize"]
    assert cards(recalled) == ["I am allergic to peanuts"]

    corrected = await say(stack, "lia", "b", "Actually, I am allergic to shellfish")
    assert actions(corrected) == ["MemorySearch", "MemoryUpdate", "Finalize"]
    assert [a["content"] for a in answers(corrected)] == ["Updated: you are allergic to shellfish."]
    updated = next(f for f in corrected if (f.get("card") or {}).get("kind") == "updated")
    assert updated["card"]["replaced"] == "I am allergic to peanuts"
    again = await say(stack, "lia", "c", "What am I allergic to?")
    assert cards(again) == ["I am allergic to shellfish"]

    forgotten = await say(stack, "lia", "c", "Forget my allergy")
    assert actions(forgotten) == ["MemorySearch", "MemoryDelete", "Finalize"]
    nothing = await say(stack, "lia", "c", "What am I allergic to?")
    assert actions(nothing) == ["MemorySearch", "Question"]
    assert cards(nothing) == []


async def test_portuguese_and_a_confirmed_delete_everything(stack: Stack) -> None:
    saved = await say(stack, "rui", "a", "Lembre que meu cachorro se chama Rex")
    assert actions(saved) == ["MemorySave", "Finalize"]
    assert answers(saved)[0]["content"].startswith("Anotado: seu cachorro se chama Rex.")
    await say(stack, "rui", "a", "Eu moro em Recife")

    recalled = await say(stack, "rui", "b", "Como se chama o meu cachorro?")
    assert "Meu cachorro se chama Rex" in cards(recalled)

    asked = await say(stack, "rui", "b", "Esqueça tudo")
    assert actions(asked) == ["Question"]
    assert "TODAS" in answers(asked)[-1]["content"]
    confirmed = await say(stack, "rui", "b", "sim")
    assert actions(confirmed)[:2] == ["MemorySearch", "MemoryDelete"]
    empty = await say(stack, "rui", "c", "O que você sabe sobre mim?")
    assert cards(empty) == []


async def test_an_introduction_a_move_and_a_fact_told_twice(stack: Stack) -> None:
    """What a newcomer types first: an introduction with a fact in it (two memories), the
    same fact told again in another thread (still one), then a move (it replaces the old
    address, so "where do I live?" has one answer)."""
    hello = await say(stack, "max", "a", "Hi, I'm Max and I live in Berlin.")
    assert actions(hello) == ["MemorySave", "Finalize"]
    assert answers(hello)[0]["content"].startswith("Noted: you're Max, and you live in Berlin.")

    again = await say(stack, "max", "b", "I live in Berlin")
    assert answers(again)[0]["content"].startswith("I already knew that: you live in Berlin.")

    moved = await say(stack, "max", "b", "I moved to Hamburg last month")
    assert actions(moved) == ["MemorySearch", "MemoryUpdate", "Finalize"]
    # The thread was told there is no model: the update's own answer is the turn's one answer.
    [last] = [a["content"] for a in answers(moved)]
    # Kept with the month "last month" names (counted from when it was said).
    assert re.fullmatch(r"Updated: you moved to Hamburg last month \(\d{4}-\d{2}\)\.", last), last
    [hamburg] = written(moved)
    assert re.fullmatch(r"I moved to Hamburg last month \(\d{4}-\d{2}\)", hamburg), hamburg
    told_again = await say(stack, "max", "c", "I moved to Hamburg last month")
    assert actions(told_again) == ["MemorySearch", "MemorySave", "Finalize"]
    assert answers(told_again)[0]["content"].startswith("I already knew that: you moved to")
    assert written(told_again) == [hamburg]
    where = await say(stack, "max", "c", "Where do I live?")
    assert hamburg in cards(where)
    assert "I live in Berlin" not in cards(where)
    everything = await say(stack, "max", "c", "What do you know about me?")
    assert sorted(cards(everything)) == [hamburg, "I'm Max"]


async def test_someone_named_and_a_job_are_found_by_what_is_asked(stack: Stack) -> None:
    """With the real embedder: "Who is Clara?" scores below the cut-off against "My sister
    Clara lives in Madrid" (the name alone does not), and "where do I work?" shares no word
    with "I'm a software engineer in Lisbon". Courtesy before a fact keeps the fact."""
    told = await say(stack, "sol", "a", "Thanks! My sister Clara lives in Madrid.")
    assert answers(told)[0]["content"].startswith("Noted: your sister Clara lives in Madrid.")
    await say(stack, "sol", "a", "I'm a software engineer in Lisbon")
    who = await say(stack, "sol", "b", "Who is Clara?")
    assert actions(who) == ["MemorySearch", "Finalize"]
    assert answers(who)[0]["content"].startswith("Your sister Clara lives in Madrid.")
    work = await say(stack, "sol", "b", "Where do I work?")
    assert answers(work)[0]["content"] == "You're a software engineer in Lisbon."
    thanks = await say(stack, "sol", "b", "Thank you!")
    assert [a["content"] for a in answers(thanks)] == ["You're welcome!"]


async def test_a_reply_in_no_language_is_answered_in_the_threads(stack: Stack) -> None:
    """ "Lena" says nothing about its language: the answer keeps the thread's Portuguese."""
    asked = await say(stack, "bia", "a", "Qual é o nome da minha filha?")
    assert actions(asked) == ["MemorySearch", "Question"]
    assert answers(asked)[-1]["content"] == "Ainda não tenho isso na memória. Pode me contar?"
    told = await say(stack, "bia", "a", "Lena")
    assert answers(told)[0]["content"] == "Anotado: o nome da sua filha é Lena."
    assert written(told) == ["O nome da minha filha é Lena"]
    again = await say(stack, "bia", "b", "Qual é o nome da minha filha?")
    assert answers(again)[0]["content"].startswith("O nome da sua filha é Lena.")

    bye = await say(stack, "bia", "a", "valeu, tchau")
    assert [a["content"] for a in answers(bye)] == [
        "De nada! Tchau! Suas memórias ficam guardadas aqui."
    ]


def notices(frames: list[Frame]) -> list[str]:
    return [f["content"] for f in frames if f["type"] == "message" and f["role"] == "system"]


async def test_forget_that_after_a_question_forgets_the_last_thing_told(stack: Stack) -> None:
    """Not a search for the words "forget that": the memory the user's statement saved."""
    await say(stack, "ted", "a", "I live in Porto")
    asked = await say(stack, "ted", "a", "Where do I live?")
    assert cards(asked) == ["I live in Porto"]
    forgotten = await say(stack, "ted", "a", "forget that")
    assert actions(forgotten) == ["ForgetLastTold"]
    assert answers(forgotten)[-1]["content"] == 'Forgotten: "I live in Porto".'
    nothing = await say(stack, "ted", "b", "esqueça isso")
    assert actions(nothing) == ["AskWhatToForget"]
    assert answers(nothing)[-1]["content"].startswith("O que devo esquecer?")


async def test_the_portuguese_delete_all_question_dropped_in_portuguese(stack: Stack) -> None:
    await say(stack, "ines", "a", "Eu moro em Recife")
    asked = await say(stack, "ines", "a", "apaga todas as minhas memórias")
    assert actions(asked) == ["ConfirmDeleteAll"]
    other = await say(stack, "ines", "a", "ok")
    assert notices(other)[0].startswith("Não apaguei suas memórias")
    kept = await say(stack, "ines", "b", "O que você sabe sobre mim?")
    assert cards(kept) == ["Eu moro em Recife"]


async def stored_memories(stack: Stack, user: str) -> list[str]:
    headers = {"Authorization": f"Bearer {stack.token(user)}"}
    async with httpx.AsyncClient(base_url=stack.base_url, timeout=HTTP_TIMEOUT_S) as http:
        response = await http.get("/api/memories", headers=headers)
    response.raise_for_status()
    return sorted(m["content"] for m in response.json()["memories"])


async def ask_back(stack: Stack, user: str, question: str) -> None:
    asked = await say(stack, user, "q", question)
    assert actions(asked) == ["MemorySearch", "Question"], asked


@pytest.mark.parametrize(
    ("user", "question", "reply", "fact"),
    [
        (
            "ava",
            "What is my address?",
            "5 Elm Street, Springfield",
            "My address is 5 Elm Street, Springfield",
        ),
        (
            "rui",
            "Qual é o meu endereço?",
            "Rua das Flores 12, Lisboa",
            "Meu endereço é Rua das Flores 12, Lisboa",
        ),
    ],
)
async def test_an_answer_to_its_question_is_saved_as_the_asked_fact(
    stack: Stack, user: str, question: str, reply: str, fact: str
) -> None:
    await ask_back(stack, user, question)
    answered = await say(stack, user, "q", reply)
    assert actions(answered) == ["MemorySave", "Finalize"]
    assert await stored_memories(stack, user) == [fact]


@pytest.mark.parametrize(
    ("user", "question", "reply"),
    [
        ("bea", "What is my address?", "I have no idea, sorry"),
        ("cid", "What is my address?", "The weather is nice today"),
        ("dan", "What is my address?", "What time is it?"),
        ("edu", "Qual é o meu endereço?", "O meu gato chama-se Tareco"),
        ("fia", "Qual é o meu endereço?", "deixa pra lá"),
    ],
)
async def test_what_does_not_answer_its_question_is_not_saved_as_the_asked_fact(
    stack: Stack, user: str, question: str, reply: str
) -> None:
    """Handled as a new message: nothing becomes "My address is …", and the question is
    dropped (an answer to it later is an ordinary message)."""
    await ask_back(stack, user, question)
    await say(stack, user, "q", reply)
    kept = await stored_memories(stack, user)
    assert not any(m.lower().startswith(("my address", "meu endereço")) for m in kept), kept
    late = await say(stack, user, "q", "5 Elm Street")
    assert "MemorySave" not in actions(late)


async def test_what_a_cycle_leaves_in_redis_once_it_ended(stack: Stack) -> None:
    """Every key that names the cycle, by the server's count, once its end was announced."""
    frames = await say(stack, "gus", "a", "Remember that my garden has roses and tulips")
    cycle_id = next(f for f in frames if f["type"] == "cycle_end")["cycle_id"]
    client = redis.Redis.from_url(stack.redis_url)
    try:
        left = {
            key.decode(): (await client.memory_usage(key) or 0, await client.ttl(key))
            async for key in client.scan_iter(match=f"*{cycle_id}*")
        }
    finally:
        await client.aclose()
    print(f"left by {cycle_id}: {left}")
    ours = {key: size for key, (size, _) in left.items() if key.startswith("memoria:cycle:")}
    assert sum(ours.values()) <= 1024, left

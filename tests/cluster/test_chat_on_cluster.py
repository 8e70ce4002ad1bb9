"""The chat and memory scenarios on a real Valkey Cluster: with ``MEMORIA_REDIS_CLUSTER=true``
and ``REDIS_URL`` naming one node, the stack works unchanged, its work spread over every
primary, each user's frames in order and resumable."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis
from scraped_metrics import scrape, total
from stack import Stack
from valkey_cluster import ValkeyCluster, even_slot_ranges
from ws_client import Frame, chat, one_cycle

from memoria_contracts.streams import Stream
from memoria_runtime.partitions import Partitions
from tests.chaos.harness import FACT_PREFIX

from .conftest import PARTITIONS, PRIMARIES

CYCLE_TIMEOUT_S = 90.0


def partitions() -> Partitions:
    return Partitions(PARTITIONS, tagged=True)


def one_user_per_partition(prefix: str) -> list[str]:
    users: dict[int, str] = {}
    n = 0
    while len(users) < PARTITIONS:
        user = f"{prefix}-{n}"
        users.setdefault(partitions().of(user).index, user)
        n += 1
    return [users[index] for index in sorted(users)]


def primary_of(slot: int) -> int:
    ranges = even_slot_ranges(PRIMARIES)
    return next(n for n, (low, high) in enumerate(ranges) if low <= slot <= high)


def kinds(frames: list[Frame]) -> list[str]:
    return [f["type"] for f in frames]


async def test_every_partition_and_every_primary_serves_cycles(
    chat_stack: Stack, chat_cluster: ValkeyCluster, cluster_redis: Redis
) -> None:
    users = one_user_per_partition("spread")
    ends = await asyncio.gather(
        *(
            one_cycle(chat_stack.ws_url(user), "t1", "hello there", CYCLE_TIMEOUT_S)
            for user in users
        )
    )
    for user, frames in zip(users, ends, strict=True):
        assert frames[0]["role"] == "user" and frames[0]["content"] == "hello there", user
        assert "delta" in kinds(frames)
        assert frames[-1]["type"] == "cycle_end"
        assert (frames[-1]["actions"], frames[-1]["reason"]) == (["Finalize"], "done")
    # Each user's messages went to the user's partition of chat.in, each partition's slot on
    # the primary its share of the slots falls to: two partitions per primary.
    held: Counter[int] = Counter()
    for user in users:
        part = partitions().of(user)
        assert part.slot is not None
        assert await cluster_redis.xlen(part.scoped(Stream.CHAT_IN.value)) >= 1
        held[primary_of(part.slot)] += 1
    assert sorted(held.values()) == [PARTITIONS // PRIMARIES] * PRIMARIES


async def test_a_memory_saved_on_the_cluster_is_found_again(chat_stack: Stack) -> None:
    user = "cluster-memory"
    fact = f"{FACT_PREFIX} the cluster keeps my keys in three places"
    url = chat_stack.ws_url(user)
    saved = await one_cycle(url, "t1", f"remember: {fact}", CYCLE_TIMEOUT_S)
    assert saved[-1]["actions"] == ["MemorySave", "Finalize"]
    found = await one_cycle(url, "t1", "recall what you know", CYCLE_TIMEOUT_S)
    assert found[-1]["actions"] == ["MemorySearch", "Finalize"]
    headers = {"Authorization": f"Bearer {chat_stack.token(user)}"}
    async with httpx.AsyncClient(base_url=chat_stack.base_url, headers=headers) as http:
        listed = (await http.get("/api/memories")).json()["memories"]
        searched = (await http.get("/api/memories/search", params={"q": fact})).json()
    assert [m["content"] for m in listed] == [fact]
    assert [m["content"] for m in searched["memories"]][:1] == [fact]
    history = await asyncio.to_thread(chat_stack.history, user, "t1")
    assert [m["content"] for m in history if m["role"] == "user"] == [
        f"remember: {fact}",
        "recall what you know",
    ]


async def test_queued_messages_of_a_thread_run_one_cycle_at_a_time(chat_stack: Stack) -> None:
    async with chat(chat_stack.ws_url("cluster-queue")) as client:
        first = await client.send("t1", "hello one")
        second = await client.send("t1", "hello two")
        assert (first["queued"], second["queued"]) == (False, True)
        one = await client.cycle(first["id"], CYCLE_TIMEOUT_S)
        two = await client.cycle(second["id"], CYCLE_TIMEOUT_S)
    ended = client.frames.index(one[-1])
    started = client.frames.index(two[0])
    assert ended < started  # the second cycle's first frame after the first one's end


async def test_a_dropped_socket_resumes_where_it_left_off(chat_stack: Stack) -> None:
    user = "cluster-resume"
    async with chat(chat_stack.ws_url(user)) as client:
        accepted = await client.send("t1", "hello resume")
        frames = await client.cycle(accepted["id"], CYCLE_TIMEOUT_S)
    ids = [f["event_id"] for f in frames]
    assert ids == sorted(ids, key=lambda i: tuple(int(p) for p in i.split("-")))
    since = ids[1]  # as if the socket had dropped after the second frame
    async with chat(f"{chat_stack.ws_url(user)}&since={since}") as again:
        resumed: Any = await again.wait_for(lambda f: f["type"] == "resumed", CYCLE_TIMEOUT_S)
        replayed = [f for f in again.frames if f.get("event_id")]
    assert resumed["complete"] is True
    assert [f["event_id"] for f in replayed] == ids[2:]
    assert replayed == frames[2:]


@pytest.fixture(scope="module")
def second_gateway(chat_stack: Stack) -> int:
    """Another gateway replica on the same cluster; its port."""
    return chat_stack.add_gateway("gateway-2")


async def fan_out_handled(port: int) -> float:
    samples = await scrape(f"http://127.0.0.1:{port}/metrics")
    return total(samples, "memoria_bus_entries_total", group="fan-out", outcome="handled")


async def test_a_gateway_receives_only_the_frames_of_its_users(
    chat_stack: Stack, second_gateway: int
) -> None:
    first_before = await fan_out_handled(chat_stack.port)
    second_before = await fan_out_handled(second_gateway)
    frames = await one_cycle(chat_stack.ws_url("only-here"), "t1", "hello there", CYCLE_TIMEOUT_S)
    assert frames[-1]["type"] == "cycle_end"
    await asyncio.sleep(0.5)  # the last frames' counts
    assert await fan_out_handled(chat_stack.port) - first_before >= len(frames)
    assert await fan_out_handled(second_gateway) == second_before  # not one frame


async def test_a_socket_moving_to_another_gateway_gets_every_frame_in_order(
    chat_stack: Stack, second_gateway: int
) -> None:
    user = "mover"
    async with chat(chat_stack.ws_url(user)) as first:
        accepted = await first.send("t1", "slow and steady")
        cycle_id = f"cyc_{accepted['id'].removeprefix('msg_')}"
        # Leave once the step runs (its status line is out, its answer not yet).
        await first.wait_for(lambda f: f.get("content") == "Thinking...", CYCLE_TIMEOUT_S)
        seen = [f for f in first.frames if f.get("event_id")]
    since = seen[-1]["event_id"]
    async with chat(f"{chat_stack.ws_url(user, second_gateway)}&since={since}") as second:
        await second.wait_for(
            lambda f: f["type"] == "cycle_end" and f.get("cycle_id") == cycle_id, CYCLE_TIMEOUT_S
        )
        rest = [f for f in second.frames if f.get("event_id")]
        resumed = [f for f in second.frames if f["type"] == "resumed"]
    assert resumed and resumed[0]["complete"] is True
    frames = seen + rest
    ids = [f["event_id"] for f in frames]
    assert len(ids) == len(set(ids))  # none twice
    assert ids == sorted(ids, key=lambda i: tuple(int(p) for p in i.split("-")))
    assert frames[-1]["actions"] == ["Slow", "Finalize"]
    # Every frame of the cycle, as its stored history and its live frames tell it.
    history = await asyncio.to_thread(chat_stack.history, user, "t1")
    answers = [m["content"] for m in history if m["role"] == "assistant"]
    sent = [f["content"] for f in frames if f["type"] == "message" and f["role"] == "assistant"]
    assert sent[-len(answers) :] == answers

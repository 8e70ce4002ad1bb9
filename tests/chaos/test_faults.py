"""A hung model (in a step and in decision) and poison entries on the streams: the user sees
an explicit end, the thread stays usable, and the consumers keep going (docs/chaos.md)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from faststream.redis import RedisBroker
from redis.asyncio import Redis
from stack import TEST_BUS_SECRET, Stack

from memoria_contracts.events import Envelope, UserMessageReceived
from memoria_runtime.bus.signing import Signer

from .harness import (
    SCRIPT,
    SETTLE_TIMEOUT_S,
    CycleRecord,
    Lane,
    Planned,
    Services,
    Timeline,
    chaos_seed,
    check_cycle,
    dead_letters,
    fixed,
    leftover_thread_state,
    listed_memories,
    open_lanes,
    report,
    settle,
)

pytestmark = [pytest.mark.chaos, pytest.mark.integration]

STEP_TIMEOUT_S = 5.0  # decision's, while the model hangs (the stack's is 90 s)
HUNG_S = 3600.0  # "never": far past any timeout
END_BOUND_S = 60.0  # a timed-out cycle ends within this (timeout, sweep, a loaded machine)
# The model hangs whenever a step asks it for a plan (MemorySave, MemorySearch): the rest of
# the script (deciding, answering) still works, so the same thread can go on.
HUNG_STEP_SCRIPT: dict[str, Any] = {**SCRIPT, "delay_seconds": {"reasoning": HUNG_S}}
HUNG_DECISION_SCRIPT: dict[str, Any] = {**SCRIPT, "delay_seconds": {"reasoningHeavy": HUNG_S}}


@pytest.fixture
def stack(chaos_stack: Stack) -> Stack:
    return chaos_stack


@pytest.fixture
def redis(chaos_redis: Redis) -> Redis:
    return chaos_redis


@contextlib.asynccontextmanager
async def model_hanging(
    services: Services, stack: Stack, script: dict[str, Any], *, in_services: list[str]
) -> AsyncIterator[None]:
    """Run ``in_services`` with ``script`` and decision with a short step timeout; the
    whole stack as it was afterwards, whatever happened."""
    path = stack.data_dir / f"hung-{'-'.join(in_services)}.json"
    path.write_text(json.dumps(script))
    changed = sorted({"decision", *in_services})
    try:
        for name in changed:
            env = (
                {"MEMORIA_STEP_TIMEOUT_SECONDS": str(STEP_TIMEOUT_S)} if name == "decision" else {}
            )
            if name in in_services:
                env["MEMORIA_SCRIPTED_LLM_FILE"] = str(path)
            await services.restart(name, env)
        yield
    finally:
        for name in changed:
            await services.restart(name)


def notices(record: CycleRecord) -> list[str]:
    return [
        str(f["content"])
        for f in record.frames
        if f["type"] == "message" and f["role"] == "system" and f["modal"] == "text"
    ]


async def say(lane: Lane, kind: str, content: str, *, burst: bool = False) -> CycleRecord:
    index = len(lane.records)
    await lane.run(fixed([Planned(lane.name, index, kind, content, burst=burst)]))
    return lane.records[-1]


@pytest.mark.timeout(300)
async def test_a_hung_model_in_a_step_times_out_visibly_and_the_thread_goes_on(
    stack: Stack, redis: Redis
) -> None:
    """The model never answers a step's plan: the cycle ends with step_timeout and a notice
    saying so, the worker stops the step, the message queued behind it runs next, and the
    thread takes new messages."""
    seed = chaos_seed()
    timeline = Timeline()
    services = Services(stack, timeline)
    problems: list[str] = []
    records: list[CycleRecord] = []
    async with open_lanes(stack, redis, timeline, f"h{seed % 10**8}", ["hung"]) as lanes:
        lane = lanes["hung"]
        async with model_hanging(services, stack, HUNG_STEP_SCRIPT, in_services=["action-worker"]):
            fact = f"remember: chaos fact hung {seed}"
            hung = await lane.send(Planned(lane.name, 0, "remember", fact))
            queued = await lane.send(Planned(lane.name, 1, "hello", "hello behind it"))
            await lane.wait(hung, END_BOUND_S)  # a cycle_end later than this is a problem
            await lane.wait(queued, END_BOUND_S)
            after = await say(lane, "hello", "hello after the timeout")
            stopped = f"{hung.cycle_id} step 1 stopped: its cycle ended"
            async with asyncio.timeout(30):  # the worker polls its cycle once a second
                while stopped not in stack.logs("action-worker"):
                    await asyncio.sleep(0.2)
        records = list(lane.records)

        end = hung.end() or {}
        if (end.get("reason"), end.get("actions")) != ("step_timeout", ["MemorySave"]):
            problems.append(f"the hung step ended {end.get('reason')} {end.get('actions')}")
        if not any("MemorySave" in n and "took longer" in n for n in notices(hung)):
            problems.append(f"no timeout notice for the user: {notices(hung)}")
        if not (queued.reply or {}).get("queued"):
            problems.append(f"the second message did not wait for the thread: {queued.reply}")
        for record in (queued, after):
            problems += check_cycle(record)
        token = await asyncio.to_thread(stack.token, lane.user_id)
        if await listed_memories(stack, token):
            problems.append("a memory was saved from a plan the model never gave")
        problems += await leftover_thread_state(redis, [lane.user_id])
        problems += lane.chat.problems
    summary = report("hung model in a step", seed, problems, records, timeline)
    print(summary)
    assert not problems, summary


@pytest.mark.timeout(300)
async def test_a_hung_model_in_decision_ends_the_cycle_and_the_thread_recovers(
    stack: Stack, redis: Redis
) -> None:
    """Decision's model never picks an action: the cycle ends with llm_error and a notice
    within the step timeout; once the model answers again the same thread works."""
    seed = chaos_seed()
    timeline = Timeline()
    services = Services(stack, timeline)
    problems: list[str] = []
    records: list[CycleRecord] = []
    async with open_lanes(stack, redis, timeline, f"d{seed % 10**8}", ["stuck"]) as lanes:
        lane = lanes["stuck"]
        async with model_hanging(services, stack, HUNG_DECISION_SCRIPT, in_services=["decision"]):
            hung = await lane.send(Planned(lane.name, 0, "hello", "hello to a hung model"))
            await lane.wait(hung, END_BOUND_S)
        after = await say(lane, "hello", "hello to a model that answers")
        records = list(lane.records)

        end = hung.end() or {}
        if (end.get("reason"), end.get("actions")) != ("llm_error", []):
            problems.append(f"the hung decision ended {end.get('reason')} {end.get('actions')}")
        if not any("language model is not answering" in n for n in notices(hung)):
            problems.append(f"no notice for the user: {notices(hung)}")
        problems += check_cycle(after)
        problems += await leftover_thread_state(redis, [lane.user_id])
        problems += lane.chat.problems
    summary = report("hung model in decision", seed, problems, records, timeline)
    print(summary)
    assert not problems, summary


# -- poison ------------------------------------------------------------------------------------

POISONED = ["memoria:chat.in", "memoria:actions", "memoria:actions.done", "memoria:memory.rpc"]
# Who reads each stream in a group (and so must dead-letter what it cannot handle).
READERS = {  # every consumer group of the stream dead-letters the entry once
    "memoria:chat.in": {"decision", "memory-trace"},
    "memoria:actions": {"action-worker", "memory-trace"},
    "memoria:actions.done": {"decision", "memory-trace"},
    "memoria:memory.rpc": {"memory"},
    "memoria:chat.out": {"memory-history"},
}

REASONS = {  # what the dead-letter entry must say, per kind of poison
    "signed, unparseable": "unparseable envelope",
    "no __data__": "missing signature",
    "unsigned": "missing signature",
}


async def framed(stream: str, body: bytes, headers: dict[str, str]) -> bytes:
    """An entry's ``__data__`` as FastStream frames it."""
    data: bytes = await RedisBroker().message_format.encode(
        message=body, reply_to=None, headers=headers, correlation_id="poison"
    )
    return data


async def poison(redis: Redis, stream: str) -> dict[str, str]:
    """Three bad entries on ``stream``; their ids → what is wrong with them."""
    garbage = b"\xff\x00 not an envelope {"
    signed_garbage = await framed(stream, garbage, Signer(TEST_BUS_SECRET).headers(stream, garbage))
    forged_body = (
        Envelope(
            user_id="mallory",
            thread_id="t1",
            payload=UserMessageReceived(message_id="msg_poison", content="forget everything"),
        )
        .model_dump_json()
        .encode()
    )
    unsigned = await framed(stream, forged_body, {})
    written = {
        await redis.xadd(stream, {"__data__": signed_garbage}): "signed, unparseable",
        # Not a FastStream entry at all. (Binary field values are the bug reproduced in
        # test_bus_poison.py: those are never dead-lettered.)
        await redis.xadd(stream, {"junk": "not framed", "more": "{"}): "no __data__",
        await redis.xadd(stream, {"__data__": unsigned}): "unsigned",
    }
    return {
        entry if isinstance(entry, str) else entry.decode(): why for entry, why in written.items()
    }


@pytest.mark.timeout(300)
async def test_poison_entries_are_dead_lettered_and_the_consumers_keep_going(
    stack: Stack, redis: Redis
) -> None:
    seed = chaos_seed()
    timeline = Timeline()
    problems: list[str] = []
    records: list[CycleRecord] = []
    dead_before = len(await dead_letters(redis))
    expected: dict[tuple[str, str], str] = {}  # (stream, entry id) → what is wrong with it
    for stream in [*POISONED, "memoria:chat.out"]:
        for entry, why in (await poison(redis, stream)).items():
            expected[(stream, entry)] = why
            timeline.note(f"poisoned {stream} {entry}: {why}")

    async with open_lanes(stack, redis, timeline, f"p{seed % 10**8}", ["after"]) as lanes:
        lane = lanes["after"]
        # A normal cycle right after: through chat.in, actions, actions.done, memory.rpc (its
        # history) and chat.out (to the socket, and stored by the memory service).
        after = await say(lane, "hello", "hello after the poison")
        slow = await say(lane, "slow", "slow and steady after the poison")
        records = list(lane.records)
        for record in (after, slow):
            problems += check_cycle(record)
        problems += lane.chat.problems

    letters: list[dict[str, str]] = []
    wanted = sum(len(READERS[stream]) for stream, _ in expected)
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while time.monotonic() < deadline:
        letters = (await dead_letters(redis))[dead_before:]
        if len(letters) >= wanted:
            break
        await asyncio.sleep(0.5)
    by_entry: dict[tuple[str, str], list[dict[str, str]]] = {}
    for letter in letters:
        by_entry.setdefault((letter["stream"], letter["entry_id"]), []).append(letter)
    for (stream, entry), why in expected.items():
        found = by_entry.get((stream, entry), [])
        if not found:
            problems.append(f"{stream} {entry} ({why}) never reached the dead-letter stream")
            continue
        timeline.note(f"dead letter {stream} {entry} ({why}): {found[0]['reason'][:120]}")
        groups = sorted(letter["group"] for letter in found)
        if groups != sorted(READERS[stream]):
            problems.append(f"{stream} {entry} ({why}): dead-lettered by {groups}")
        for letter in found:
            if REASONS[why] not in letter["reason"]:
                problems.append(f"{stream} {entry} ({why}): dead-lettered as {letter}")
    unexpected = [k for k in by_entry if k not in expected]
    if unexpected:
        problems.append(f"dead-lettered entries nobody poisoned: {unexpected}")
    problems += await settle(redis)
    summary = report("poison entries", seed, problems, records, timeline)
    print(summary)
    assert not problems, summary

"""kill -9 of every service at random points of running cycles, and the memory service killed
between the document and the vector writes while other cycles run: no message is lost, every
cycle ends, nothing is stored twice, no vector is left without its memory (docs/chaos.md)."""

from __future__ import annotations

import asyncio
import random
import subprocess
from typing import Any

import pytest
from redis.asyncio import Redis
from stack import Stack

from .harness import (
    SERVICE_NAMES,
    CycleRecord,
    Disruption,
    Disruptor,
    Planned,
    Services,
    Timeline,
    chaos_cycles,
    chaos_seed,
    dead_letters,
    failure_of_the_run,
    final_checks,
    fixed,
    gather_all,
    lane_plan,
    long_run,
    one_more_cycle_each,
    open_lanes,
    plan_disruptions,
    report,
)

pytestmark = [pytest.mark.chaos, pytest.mark.integration]

REDIS_DB = 9
LANES = ["a", "b", "c"]
KILLED = 137  # what the fault injection exits with, like a SIGKILL
FAULT_TIMEOUT_S = 120.0  # the first save of a phase reaches the armed fault within this


def plan_kills(rng: random.Random, cycles: int) -> list[Disruption]:
    """About one kill per three cycles, at least one of each service; services are shuffled
    per round of four, so each is killed as often as the others."""
    count = max(len(SERVICE_NAMES), cycles // 3)
    order: list[str] = []
    while len(order) < count:
        round_ = list(SERVICE_NAMES)
        rng.shuffle(round_)
        order += round_
    return plan_disruptions(rng, cycles, order[:count])


@pytest.mark.timeout(420 + 25 * chaos_cycles())
async def test_services_killed_at_random_points_lose_nothing(
    chaos_stack: Stack, chaos_redis: Redis, milvus_server: Any
) -> None:
    stack, redis = chaos_stack, chaos_redis
    seed = chaos_seed()
    cycles = chaos_cycles()
    rng = random.Random(seed)
    timeline = Timeline()
    services = Services(stack, timeline)
    tag = f"k{seed % 10**8}"
    kills = plan_kills(rng, cycles)

    async def kill(disruption: Disruption) -> None:
        await services.kill(disruption.target)
        await asyncio.sleep(disruption.down_s)
        await services.start(disruption.target)

    killer = Disruptor(kills, kill, timeline)
    timeline.note(f"seed {seed}, at least {cycles} cycles, {len(kills)} kills: {kills}")
    dead_before = len(await dead_letters(redis))
    quota = -(-cycles // len(LANES))  # each lane's share of the cycles, rounded up

    records: list[CycleRecord] = []
    problems: list[str] = []
    async with open_lanes(stack, redis, timeline, tag, LANES) as lanes:
        try:
            await gather_all(
                *(
                    lane.run(lane_plan(seed, tag, name, quota, killer), killer.on_accepted)
                    for name, lane in lanes.items()
                )
            )
            await killer.finish()
            await one_more_cycle_each(lanes)
            problems += await final_checks(
                stack, redis, milvus_server.uri, lanes, services, dead_before
            )
        except Exception:
            problems.append(failure_of_the_run())
        finally:
            records = [r for lane in lanes.values() for r in lane.records]
    if set(services.kills) != set(SERVICE_NAMES):
        problems.append(f"not every service was killed: {dict(services.kills)}")
    summary = report(
        "services killed at random points", seed, problems, records, timeline, services
    )
    print(summary)  # shown with -rP (or -s): what happened when, also when all went well
    assert not problems, summary


@pytest.mark.timeout(600)
async def test_memory_killed_between_document_and_vectors_under_load(
    chaos_stack: Stack, chaos_redis: Redis, milvus_server: Any
) -> None:
    """The fault points of tests/integration/test_memory_crashes.py, hit while three users'
    cycles save, search and answer at once: the memory service dies after a document was
    written (phase 0) and, in the long run, after its vectors were (phase 1), is started
    again, and every cycle still ends with exactly the memories asked for."""
    stack, redis = chaos_stack, chaos_redis
    seed = chaos_seed()
    rng = random.Random(seed)
    timeline = Timeline()
    services = Services(stack, timeline)
    tag = f"f{seed % 10**8}"
    dead_before = len(await dead_letters(redis))
    # Between the document and its vectors; the long run also between vectors and settling.
    faults = ["save.after_document", *(["save.after_vectors"] if long_run() else [])]
    problems: list[str] = []

    def phase(index: int) -> list[Planned]:
        """Per lane: a fact to remember, then another kind of cycle (in phase 1 sent at
        once, so it waits in the thread's queue)."""
        plans: list[Planned] = []
        others = [("hello", "hello number"), ("slow", "slow and steady"), ("recall", "recall")]
        for name, (kind, text) in zip(LANES, others, strict=True):
            fact = f"remember: chaos fact {tag} {name} {index} {rng.randrange(10**6)}"
            plans.append(Planned(name, 2 * index, "remember", fact))
            plans.append(Planned(name, 2 * index + 1, kind, f"{text} {index}", burst=index == 1))
        return plans

    records: list[CycleRecord] = []
    async with open_lanes(stack, redis, timeline, tag, LANES) as lanes:
        try:
            for index, fault in enumerate(faults):
                # Armed before the phase's saves are sent: the first save hits it.
                await services.restart("memory", {"MEMORIA_FAULT_INJECTION": fault})
                process = stack.processes["memory"]
                plans = phase(index)
                running = asyncio.gather(
                    *(
                        lane.run(fixed([p for p in plans if p.lane == name]))
                        for name, lane in lanes.items()
                    )
                )
                try:
                    code = await asyncio.to_thread(process.wait, FAULT_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    problems.append(f"the memory service never reached {fault}")
                    await services.kill("memory")
                else:
                    timeline.note(f"memory died at {fault} (exit {code})")
                    if code != KILLED:
                        problems.append(f"memory exited with {code} at {fault}, not {KILLED}")
                    await services.forget_exited("memory")
                await services.start("memory")
                await running
            await one_more_cycle_each(lanes)
            problems += await final_checks(
                stack, redis, milvus_server.uri, lanes, services, dead_before
            )
        except Exception:
            problems.append(failure_of_the_run())
        finally:
            records = [r for lane in lanes.values() for r in lane.records]
    summary = report(
        "memory killed between document and vectors", seed, problems, records, timeline
    )
    print(summary)
    assert not problems, summary

"""A primary of the cluster killed (SIGKILL, as a lost machine) under running cycles: its
replica takes over its slots, the services carry on through the topology change, every
accepted message still gets its cycle, nothing acknowledged is lost or stored twice, and new
cycles work (the chaos run's invariants, on a cluster)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack
from typing import Any

import pytest
from redis.asyncio import Redis
from stack import Stack
from valkey_cluster import ValkeyCluster

from tests.chaos.harness import (
    CycleRecord,
    Disruption,
    Disruptor,
    Services,
    Timeline,
    chaos_seed,
    dead_letters,
    failure_of_the_run,
    final_checks,
    gather_all,
    lane_plan,
    one_more_cycle_each,
    open_lanes,
    plan_disruptions,
    report,
    resilient_redis,
)

from .conftest import CYCLES_ENV, PRIMARIES, cluster_cycles, form, services_on

LANES = ["a", "b", "c", "d"]


@pytest.fixture(scope="module")
def failover_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ValkeyCluster]:
    """A cluster of its own: this test kills its primaries."""
    with ExitStack() as stack:
        yield form(stack, tmp_path_factory.mktemp("failover-cluster"))


@pytest.fixture(scope="module")
def failover_stack(
    failover_cluster: ValkeyCluster, milvus_server: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    with ExitStack() as stack:
        # Every node named: a service restarted after a primary died finds the cluster.
        url = failover_cluster.every_node_url
        yield services_on(stack, url, milvus_server.uri, tmp_path_factory.mktemp("failover"))


@pytest.fixture
async def failover_redis(failover_stack: Stack) -> AsyncIterator[Redis]:
    client = resilient_redis(failover_stack.redis_url, cluster=True)
    try:
        yield client
    finally:
        await client.aclose()


def plan_failovers(rng: random.Random, cycles: int) -> list[Disruption]:
    """One primary killed per twelve cycles, each primary at most once (each has one
    replica to take over), the first one picked by the seed."""
    count = max(1, min(PRIMARIES, cycles // 12))
    first = rng.randrange(PRIMARIES)
    targets = [str((first + n) % PRIMARIES) for n in range(count)]
    return plan_disruptions(rng, cycles, targets)


@pytest.mark.timeout(600 + 25 * cluster_cycles())
async def test_a_primary_killed_mid_run_loses_nothing_acknowledged(
    failover_cluster: ValkeyCluster,
    failover_stack: Stack,
    failover_redis: Redis,
    milvus_server: Any,
) -> None:
    cluster, stack, redis = failover_cluster, failover_stack, failover_redis
    seed = chaos_seed()
    cycles = cluster_cycles()
    rng = random.Random(seed)
    timeline = Timeline()
    services = Services(stack, timeline)
    tag = f"f{seed % 10**8}"
    failovers = plan_failovers(rng, cycles)
    timeline.note(f"seed {seed}, at least {cycles} cycles, primaries killed: {failovers}")
    dead_before = len(await dead_letters(redis))
    took: list[float] = []

    async def kill_primary(disruption: Disruption) -> None:
        index = int(disruption.target)
        port = cluster.primaries[index].port
        timeline.note(f"PRIMARY {index} (port {port}) killed")
        started = timeline.now()
        promoted = await asyncio.to_thread(cluster.kill_primary, index)
        took.append(timeline.now() - started)
        timeline.note(f"PRIMARY {index}: replica on port {promoted.port} took over")

    disruptor = Disruptor(failovers, kill_primary, timeline)
    quota = -(-cycles // len(LANES))
    records: list[CycleRecord] = []
    problems: list[str] = []
    async with open_lanes(stack, redis, timeline, tag, LANES) as lanes:
        try:
            await gather_all(
                *(
                    lane.run(lane_plan(seed, tag, name, quota, disruptor), disruptor.on_accepted)
                    for name, lane in lanes.items()
                )
            )
            await disruptor.finish()
            await one_more_cycle_each(lanes)
            problems += await final_checks(
                stack, redis, milvus_server.uri, lanes, services, dead_before, strict_reason=False
            )
        except Exception:
            problems.append(failure_of_the_run())
        finally:
            records = [r for lane in lanes.values() for r in lane.records]
    if len(took) != len(failovers):
        problems.append(f"{len(failovers)} primaries to kill, {len(took)} killed")
    summary = report("a primary killed", seed, problems, records, timeline, services)
    summary += f"\nfailovers took {[round(t, 1) for t in took]} s"
    summary += f"\nrerun: MEMORIA_CHAOS_SEED={seed} {CYCLES_ENV}={cycles} make test-cluster"
    print(summary)
    assert not problems, summary

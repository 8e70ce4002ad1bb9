"""A handler gets its stream entry through ``StreamMessage`` on the event loop, where
FastStream's own annotation sends the lookup to a worker thread for every entry."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import anyio.to_thread
import pytest
from faststream.redis import RedisBroker, StreamSub
from faststream.redis.annotations import RedisStreamMessage
from redis.asyncio import Redis

from memoria_runtime.stream_message import StreamMessage

WAIT_S = 10.0


@pytest.fixture
def thread_hops(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Names of the functions FastDepends sent to a worker thread."""
    hops: list[str] = []
    run_sync = anyio.to_thread.run_sync

    async def counted(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        hops.append(getattr(func, "__qualname__", repr(func)))
        return await run_sync(func, *args, **kwargs)

    monkeypatch.setattr(anyio.to_thread, "run_sync", counted)
    return hops


async def entry_ids_seen(redis_url: str, annotation: Any) -> list[str]:
    broker = RedisBroker(redis_url)
    seen: list[str] = []
    arrived = asyncio.Event()

    async def handle(body: dict[str, Any], message: Any) -> None:
        seen.append(message.raw_message["message_ids"][0].decode())
        arrived.set()

    handle.__annotations__["message"] = annotation
    broker.subscriber(stream=StreamSub("test:stream-message"))(handle)
    await broker.start()
    try:
        await broker.publish({"n": 1}, stream="test:stream-message")
        await asyncio.wait_for(arrived.wait(), WAIT_S)
    finally:
        await broker.stop()
    return seen


async def test_the_handler_gets_its_entry_without_a_worker_thread(
    redis: Redis, redis_url: str, thread_hops: list[str]
) -> None:
    seen = await entry_ids_seen(redis_url, StreamMessage)

    entries: Any = await redis.xrange("test:stream-message")
    assert seen == [entries[0][0].decode()]
    assert thread_hops == []


async def test_fastreams_own_annotation_takes_a_worker_thread_per_entry(
    redis: Redis, redis_url: str, thread_hops: list[str]
) -> None:
    """What ``StreamMessage`` is for: if FastStream stops doing this, it can go."""
    await entry_ids_seen(redis_url, RedisStreamMessage)

    assert [hop for hop in thread_hops if "use" in hop] != []

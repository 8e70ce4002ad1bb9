"""Fixtures of the cluster tier: Valkey Clusters of three primaries and three replicas on
loopback, from the embedded binary, and the four services on them with the bus split into
partitions (two per primary). Skipped, saying why, where a cluster cannot be formed."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis

# The stack helpers and the test-only actions live beside the tests, not in a package.
sys.path.insert(0, str(Path(__file__).parent.parent / "support"))

from stack import Stack, running_stack
from valkey_cluster import ValkeyCluster, valkey_cluster

from tests.chaos.harness import CHAOS_SETTINGS, SCRIPT, ops_settings, resilient_redis

PRIMARIES = 3
REPLICAS = 1
PARTITIONS = 6  # two per primary
CYCLES_ENV = "MEMORIA_CLUSTER_CYCLES"
DEFAULT_CYCLES = 8
"""Cycles of the failover run that `make test` makes (one primary killed); `make
test-cluster` runs 36 (each primary killed once)."""


def cluster_cycles() -> int:
    return int(os.environ.get(CYCLES_ENV) or DEFAULT_CYCLES)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.cluster)


def form(stack: ExitStack, data_dir: Path) -> ValkeyCluster:
    """A cluster of its own, or a skip that says why none could be formed here."""
    try:
        return stack.enter_context(valkey_cluster(data_dir, PRIMARIES, REPLICAS))
    except (OSError, TimeoutError) as exc:
        pytest.skip(f"no Valkey Cluster could be formed here: {exc!r}")


def services_on(stack: ExitStack, redis_url: str, milvus_uri: str, data_dir: Path) -> Stack:
    running = stack.enter_context(
        running_stack(
            redis_url,
            milvus_uri,
            data_dir,
            SCRIPT,
            service_settings=ops_settings(),
            redis_cluster="true",
            bus_partitions=str(PARTITIONS),
            **CHAOS_SETTINGS,
        )
    )
    running.wait_ready(actions=6)
    return running


@pytest.fixture(scope="package")
def chat_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ValkeyCluster]:
    """The cluster the chat and memory scenarios share (nothing kills its nodes)."""
    with ExitStack() as stack:
        yield form(stack, tmp_path_factory.mktemp("chat-cluster"))


@pytest.fixture(scope="package")
def chat_stack(
    chat_cluster: ValkeyCluster, milvus_server: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    with ExitStack() as stack:
        # One node named: the services find the others from it.
        yield services_on(
            stack, chat_cluster.url, milvus_server.uri, tmp_path_factory.mktemp("chat-stack")
        )


@pytest.fixture
async def cluster_redis(chat_stack: Stack) -> AsyncIterator[Redis]:
    client = resilient_redis(chat_stack.redis_url, cluster=True)
    try:
        yield client
    finally:
        await client.aclose()

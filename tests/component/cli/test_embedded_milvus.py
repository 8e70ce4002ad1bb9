"""The embedded milvus-lite server, started by the supervisor exactly as `memoria run` does:
it answers, stops cleanly on SIGTERM, keeps vectors across a restart and a crash, and refuses
a busy port or a data directory still served by an earlier server."""

from __future__ import annotations

import asyncio
import io
import math
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from memoria_cli import embedded_milvus
from memoria_cli.supervisor import EXIT_OK, StartupError, Supervisor
from memoria_memory.vectors.milvus import MilvusVectorStore
from memoria_memory.vectors.port import VectorRow
from memoria_runtime.settings import EMBEDDED_PASSWORD_FILE

# Starts its own milvus-lite, not the shared fixture's.
pytestmark = pytest.mark.milvus

START_TIMEOUT_S = 60.0
RESTART_TIMEOUT_S = 60.0
POLL_S = 0.1
DIM = 4
COLLECTION = "memoria_bindings_embedded_test_4"
USER = "alice"


def command_line(pid: int) -> bytes:
    """What every account on the machine can read of a process."""
    return Path(f"/proc/{pid}/cmdline").read_bytes()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def unit(*weights: float) -> list[float]:
    padded = [*weights, *([0.0] * (DIM - len(weights)))]
    norm = math.sqrt(sum(value * value for value in padded))
    return [value / norm for value in padded]


ROWS = [
    VectorRow("r1", "mem_1", unit(1.0)),
    VectorRow("r2", "mem_2", unit(0.0, 1.0)),
    VectorRow("r3", "mem_3", unit(0.6, 0.8)),
]


@asynccontextmanager
async def embedded_milvus_server(
    port: int, data_dir: Path, password: str | None = None
) -> AsyncIterator[Supervisor]:
    """milvus-lite under the supervisor until the block ends; then a clean stop."""
    output = io.StringIO()
    started = asyncio.Event()
    supervisor = Supervisor(
        [embedded_milvus.spec(port, data_dir, password)],
        output=output,
        color=False,
        handle_signals=False,
        on_started=started.set,
    )
    run = asyncio.create_task(supervisor.run())
    try:
        ready = asyncio.create_task(started.wait())
        await asyncio.wait(
            {ready, run}, timeout=START_TIMEOUT_S, return_when=asyncio.FIRST_COMPLETED
        )
        assert started.is_set(), f"milvus did not start:\n{output.getvalue()}"
        yield supervisor
    finally:
        supervisor.request_stop()
        assert await asyncio.wait_for(run, START_TIMEOUT_S) == EXIT_OK, output.getvalue()
    # SIGTERM reached milvus-lite's own clean shutdown (flush, unlock), not a kill.
    assert "milvus stopped\n" in output.getvalue(), output.getvalue()


@asynccontextmanager
async def opened_store(port: int, token: str | None = None) -> AsyncIterator[MilvusVectorStore]:
    store = MilvusVectorStore(embedded_milvus.uri(port), COLLECTION, DIM, token=token)
    await store.open()
    try:
        yield store
    finally:
        await store.close()


async def assert_rows_are_there(store: MilvusVectorStore) -> None:
    assert sorted(await store.rows_of(USER)) == [("r1", "mem_1"), ("r2", "mem_2"), ("r3", "mem_3")]
    [hits] = await store.search(USER, [unit(0.0, 1.0)], limit=2)
    assert [hit.id for hit in hits] == ["r2", "r3"]


def test_argv_runs_milvus_lite_from_this_environment_on_loopback(tmp_path: Path) -> None:
    spec = embedded_milvus.spec(19540, tmp_path)
    assert spec.executable is None
    assert list(spec.argv) == [
        sys.executable,
        "-m",
        "memoria_cli.embedded_milvus",
        "server",
        "--data-dir",
        str(tmp_path / "milvus"),
        "--host",
        "127.0.0.1",
        "--port",
        "19540",
    ]
    assert embedded_milvus.uri(19540) == "http://127.0.0.1:19540"


async def test_vectors_survive_a_restart_on_the_same_directory(tmp_path: Path) -> None:
    port = free_port()
    async with embedded_milvus_server(port, tmp_path), opened_store(port) as store:
        await store.upsert(USER, ROWS)  # not flushed: the clean stop must keep them

    async with embedded_milvus_server(port, tmp_path), opened_store(port) as store:
        await assert_rows_are_there(store)


async def test_a_crashed_server_is_restarted_and_an_open_store_carries_on(
    tmp_path: Path,
) -> None:
    """SIGKILL leaves no chance to flush: the write-ahead log must bring the rows back, and
    a store opened before the crash must reconnect and reload the collection by itself."""
    port = free_port()
    async with embedded_milvus_server(port, tmp_path) as supervisor, opened_store(port) as store:
        await store.upsert(USER, ROWS)
        crashed = supervisor.pids["milvus"]
        assert crashed is not None
        os.kill(crashed, signal.SIGKILL)

        loop = asyncio.get_running_loop()
        deadline = loop.time() + RESTART_TIMEOUT_S
        while supervisor.pids["milvus"] in (None, crashed) or not await _answers(port):
            assert loop.time() < deadline, "milvus was not restarted"
            await asyncio.sleep(POLL_S)

        await assert_rows_are_there(store)


async def _answers(port: int) -> bool:
    try:
        await embedded_milvus.server_version(port)
    except Exception:  # not up (again) yet
        return False
    return True


async def test_readiness_and_the_port_check_know_our_directory(tmp_path: Path) -> None:
    port = free_port()
    async with embedded_milvus_server(port, tmp_path) as supervisor:
        pid = supervisor.pids["milvus"]
        assert await embedded_milvus.readiness_check(port, tmp_path)()
        assert embedded_milvus.lock_holder(tmp_path) == pid
        # Another server on this port, serving another directory, is not ours.
        assert not await embedded_milvus.readiness_check(port, tmp_path / "elsewhere")()

        # A second run on this directory (whatever its port) meets the first server's pid.
        with pytest.raises(StartupError, match=rf"pid {pid} already serves this data directory"):
            await embedded_milvus.ensure_port_free(free_port(), tmp_path)
        # A run on another directory meets a busy port.
        with pytest.raises(StartupError) as caught:
            await embedded_milvus.ensure_port_free(port, tmp_path / "elsewhere")
        assert str(caught.value) == (
            f"port {port} is in use; set MEMORIA_EMBEDDED_MILVUS_PORT or MEMORIA_MILVUS_URI"
        )
    assert embedded_milvus.lock_holder(tmp_path) is None  # released by the clean stop


async def test_a_port_taken_by_a_stranger_is_refused_with_the_way_out(tmp_path: Path) -> None:
    with socket.socket() as stranger:
        stranger.bind(("127.0.0.1", 0))
        stranger.listen()
        port = stranger.getsockname()[1]
        with pytest.raises(StartupError) as caught:
            await embedded_milvus.ensure_port_free(port, tmp_path)
        # Not Milvus at all: never ready, whatever it is.
        with pytest.raises(Exception):  # noqa: B017, PT011 - any failure means "not ready"
            await embedded_milvus.readiness_check(port, tmp_path)()
    assert str(caught.value) == (
        f"port {port} is in use; set MEMORIA_EMBEDDED_MILVUS_PORT or MEMORIA_MILVUS_URI"
    )


async def test_a_free_port_and_an_unused_directory_pass(tmp_path: Path) -> None:
    await embedded_milvus.ensure_port_free(free_port(), tmp_path)


async def test_with_a_password_a_client_without_it_is_refused(tmp_path: Path) -> None:
    """The finding: milvus-lite takes no password, so any account on the machine read and
    changed every user's vectors. Its own server has no check (no interceptor, a servicer
    that never reads credentials); ours refuses every call without the token, and reads the
    password from a file, never the command line."""
    password = "a-password-for-this-test-only"
    (tmp_path / EMBEDDED_PASSWORD_FILE).write_text(password)
    port = free_port()
    token = f"memoria:{password}"
    async with embedded_milvus_server(port, tmp_path, password) as supervisor:
        async with opened_store(port, token) as store:
            await store.upsert(USER, ROWS)
            await assert_rows_are_there(store)
        for wrong in (None, "memoria:guessed", "root:Milvus"):
            with pytest.raises(Exception, match="a valid token is required"):
                await embedded_milvus.server_version(port, wrong)
        with pytest.raises(Exception):  # noqa: B017, PT011  pymilvus wraps it its own way
            async with opened_store(port, "memoria:guessed") as stranger:
                await stranger.rows_of(USER)
        assert (await embedded_milvus.server_version(port, token)).startswith("milvus_lite")
        pid = supervisor.pids["milvus"]
        assert pid is not None
        assert password.encode() not in command_line(pid)

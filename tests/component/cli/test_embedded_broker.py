"""The embedded Valkey, started by the supervisor exactly as `memoria run` does: it answers,
refuses a busy port clearly, and keeps streams across a restart (append-only file)."""

from __future__ import annotations

import asyncio
import io
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from redis.asyncio import Redis
from redis.exceptions import AuthenticationError

from memoria_cli import embedded_broker
from memoria_cli.supervisor import EXIT_OK, StartupError, Supervisor

# Starts its own Valkey, not the shared fixture's.
pytestmark = pytest.mark.valkey

START_TIMEOUT_S = 60.0
STREAM = "memoria:test:survivor"


def command_line(pid: int) -> bytes:
    """What every account on the machine can read of a process."""
    return Path(f"/proc/{pid}/cmdline").read_bytes()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@asynccontextmanager
async def embedded_valkey(
    port: int, data_dir: Path, password: str | None = None
) -> AsyncIterator[Redis]:
    """Valkey under the supervisor until the block ends; then a clean stop."""
    embedded_broker.broker_dir(data_dir).mkdir(parents=True, exist_ok=True)
    output = io.StringIO()
    started = asyncio.Event()
    supervisor = Supervisor(
        [embedded_broker.spec(port, data_dir, password)],
        output=output,
        color=False,
        handle_signals=False,
        on_started=started.set,
    )
    run = asyncio.create_task(supervisor.run())
    client = Redis(host="127.0.0.1", port=port, password=password, decode_responses=True)
    try:
        ready = asyncio.create_task(started.wait())
        await asyncio.wait(
            {ready, run}, timeout=START_TIMEOUT_S, return_when=asyncio.FIRST_COMPLETED
        )
        assert started.is_set(), f"valkey did not start:\n{output.getvalue()}"
        yield client
    finally:
        await client.aclose()
        supervisor.request_stop()
        assert await asyncio.wait_for(run, START_TIMEOUT_S) == EXIT_OK, output.getvalue()
    assert "valkey stopped\n" in output.getvalue()


def test_argv_runs_in_the_foreground_with_an_fsynced_append_only_file(tmp_path: Path) -> None:
    spec = embedded_broker.spec(6390, tmp_path)
    assert spec.executable is not None
    assert Path(spec.executable).name == "valkey-server"
    assert Path(spec.executable).is_file()
    argv = list(spec.argv)
    assert argv[0] == "valkey-server"
    options = dict(zip(argv[1::2], argv[2::2], strict=True))
    assert options == {
        "--port": "6390",
        "--bind": "127.0.0.1",
        "--dir": str(tmp_path / "valkey"),
        "--appendonly": "yes",
        "--appendfsync": "everysec",
        "--save": "",
        "--protected-mode": "yes",
        "--daemonize": "no",
    }


async def test_a_stream_survives_a_restart_on_the_same_directory(tmp_path: Path) -> None:
    port, data_dir = free_port(), tmp_path / "data"
    async with embedded_valkey(port, data_dir) as client:
        assert await client.ping()
        entry_id = await client.xadd(STREAM, {"text": "remember me"})

    async with embedded_valkey(port, data_dir) as client:
        assert await client.xrange(STREAM) == [(entry_id, {"text": "remember me"})]


async def test_a_port_taken_by_a_stranger_is_refused_with_the_way_out(tmp_path: Path) -> None:
    with socket.socket() as stranger:
        stranger.bind(("127.0.0.1", 0))
        stranger.listen()
        port = stranger.getsockname()[1]
        with pytest.raises(StartupError) as caught:
            await embedded_broker.ensure_port_free(port, tmp_path)
    assert str(caught.value) == (
        f"port {port} is in use; set MEMORIA_EMBEDDED_REDIS_PORT or REDIS_URL"
    )


async def test_a_port_taken_by_our_own_valkey_names_its_pid(tmp_path: Path) -> None:
    port = free_port()
    async with embedded_valkey(port, tmp_path) as client:
        pid = (await client.info("server"))["process_id"]
        with pytest.raises(StartupError, match=rf"in use by a Valkey \(pid {pid}\) serving"):
            await embedded_broker.ensure_port_free(port, tmp_path)
        with pytest.raises(StartupError, match=r"in use; set MEMORIA_EMBEDDED_REDIS_PORT"):
            await embedded_broker.ensure_port_free(port, tmp_path / "elsewhere")


async def test_a_free_port_passes(tmp_path: Path) -> None:
    await embedded_broker.ensure_port_free(free_port(), tmp_path)


async def test_readiness_needs_our_directory_not_just_any_valkey(tmp_path: Path) -> None:
    port = free_port()
    ours: Callable[[], Awaitable[bool]] = embedded_broker.readiness_check(port, tmp_path)
    theirs = embedded_broker.readiness_check(port, tmp_path / "elsewhere")
    async with embedded_valkey(port, tmp_path):
        assert await ours()
        assert not await theirs()


async def test_with_a_password_every_client_without_it_is_refused(tmp_path: Path) -> None:
    """The finding: as another account, raw TCP to the embedded Valkey read chat frames and
    ran SET and DEL. Now nothing is served without the password, which is in a 0600 config
    file and not on the command line (which every account can read in /proc)."""
    password = "a-password-for-this-test-only"
    port = free_port()
    async with embedded_valkey(port, tmp_path, password) as client:
        assert await client.ping()
        await client.set("pin", "1234")
        stranger = Redis(host="127.0.0.1", port=port, decode_responses=True)
        try:
            with pytest.raises(AuthenticationError):
                await stranger.get("pin")
            with pytest.raises(AuthenticationError):
                await stranger.delete("pin")
        finally:
            await stranger.aclose()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"KEYS *\r\n")
        await writer.drain()
        assert (await reader.readline()).startswith(b"-NOAUTH")
        writer.close()
        pid = int((await client.info("server"))["process_id"])
        assert password.encode() not in command_line(pid)
    config = embedded_broker.config_file(tmp_path)
    assert config.stat().st_mode & 0o777 == 0o600
    assert password in config.read_text()

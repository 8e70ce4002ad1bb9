"""What the cycle benchmarks share: an embedded Valkey and milvus-lite started exactly as
``memoria run`` starts them, the four services as processes (``tests/support/stack.py``), a
lean WebSocket client that times cycles, and the reporting helpers.

Not a benchmark itself; ``cycle_overhead.py`` and ``throughput.py`` import it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis as sync_redis
from websockets.asyncio.client import ClientConnection, connect

from memoria_cli import embedded_broker, embedded_milvus

REPO = Path(__file__).resolve().parents[1]
SUPPORT_DIR = REPO / "tests" / "support"
if str(SUPPORT_DIR) not in sys.path:  # tests/support/stack.py is not in a package
    sys.path.insert(0, str(SUPPORT_DIR))

from stack import TEST_BUS_SECRET, Stack, running_stack  # noqa: E402

__all__ = [
    "BUS_SECRET",
    "PRODUCT_DEFAULTS",
    "Servers",
    "Stack",
    "Stats",
    "TimedClient",
    "bench_stack",
    "cpu_model",
    "loadavg",
    "machine_line",
    "nearest_rank",
    "process_cpu_seconds",
    "running_stack",
    "servers",
    "summarize",
    "table",
    "timed_client",
]

BUS_SECRET = TEST_BUS_SECRET  # what running_stack gives every service
LOOPBACK = "127.0.0.1"
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 15.0
POLL_S = 0.05
NS_PER_MS = 1_000_000
PERCENTILES = (50, 95, 99)
CYCLE_TIMEOUT_S = 60.0


# -- servers ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Servers:
    redis_url: str
    milvus_uri: str
    data_dir: Path
    valkey_pid: int
    milvus_pid: int


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _wait_for_valkey(process: subprocess.Popen[bytes], port: int, data_dir: Path) -> None:
    expected = str(embedded_broker.broker_dir(data_dir).resolve())
    deadline = time.monotonic() + START_TIMEOUT_S
    client = sync_redis.Redis(host=LOOPBACK, port=port, socket_timeout=1, decode_responses=True)
    try:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"valkey-server exited with code {process.returncode}")
            with contextlib.suppress(sync_redis.RedisError):
                reply: Any = client.config_get("dir")
                if reply.get("dir") == expected:
                    return
            time.sleep(POLL_S)
    finally:
        client.close()
    raise RuntimeError(f"valkey-server not ready on port {port}")


def _listening(port: int) -> bool:
    try:
        socket.create_connection((LOOPBACK, port), timeout=POLL_S).close()
    except OSError:
        return False
    return True


def _wait_for_milvus(process: subprocess.Popen[bytes], port: int, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while not _listening(port):  # milvus-lite opens its directory before it binds
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"milvus-lite did not start:\n{log.read_text(errors='replace')}")
        time.sleep(POLL_S)


@contextlib.contextmanager
def servers() -> Iterator[Servers]:
    """A fresh Valkey (``memoria run``'s flags: AOF everysec) and a fresh milvus-lite
    (``memoria run``'s command line), in a temporary directory removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="memoria-bench-") as tmp:
        data_dir = Path(tmp)
        embedded_broker.broker_dir(data_dir).mkdir()
        valkey_port = free_port()
        program, *args = embedded_broker.argv(valkey_port, data_dir)
        valkey_log = data_dir / "valkey.log"
        with valkey_log.open("wb") as out:
            valkey = subprocess.Popen(
                [program, *args],
                executable=str(embedded_broker.binary_path()),
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        try:
            _wait_for_valkey(valkey, valkey_port, data_dir)
            with milvus_server(data_dir) as (milvus_uri, milvus_pid):
                yield Servers(
                    redis_url=f"redis://{LOOPBACK}:{valkey_port}/0",
                    milvus_uri=milvus_uri,
                    data_dir=data_dir,
                    valkey_pid=valkey.pid,
                    milvus_pid=milvus_pid,
                )
        finally:
            _stop(valkey)


@contextlib.contextmanager
def milvus_server(data_dir: Path) -> Iterator[tuple[str, int]]:
    """A fresh milvus-lite in ``data_dir`` (``memoria run``'s command line): its URI and pid."""
    port = free_port()
    log = data_dir / "milvus.log"
    with log.open("wb") as out:
        milvus = subprocess.Popen(
            embedded_milvus.argv(port, data_dir), stdout=out, stderr=subprocess.STDOUT
        )
    try:
        _wait_for_milvus(milvus, port, log)
        yield embedded_milvus.uri(port), milvus.pid
    finally:
        _stop(milvus)


PRODUCT_DEFAULTS: Mapping[str, str] = {
    # running_stack is made for tests: it shortens the reclaim window. Put the product's
    # default back (it sets how often a running handler re-claims its entry).
    "reclaim_idle_ms": "30000",
    # No test-only actions in the catalog: the decision prompt is the product's own.
    "action_modules": "",
    # Many cycles from one user on one socket: the rate limits would refuse most of them.
    # Still checked (a count in the broker per message), as in production, never reached.
    "ws_messages_per_minute": "1000000",
    "ws_burst": "1000000",
    "ws_user_messages_per_minute": "1000000",
    "http_requests_per_minute": "1000000",
}


def bench_stack(
    running: Servers,
    script: Mapping[str, Any],
    service_settings: Mapping[str, Mapping[str, str]] | None = None,
    **settings: str,
) -> contextlib.AbstractContextManager[Stack]:
    """The four services on ``running``'s servers, with the product's defaults (above)
    unless ``settings`` say otherwise."""
    return running_stack(
        running.redis_url,
        running.milvus_uri,
        running.data_dir / "stack",
        script,
        service_settings=service_settings,
        **{**PRODUCT_DEFAULTS, **settings},
    )


# -- the WebSocket client -----------------------------------------------------------------


class TimedClient:
    """One socket; one cycle at a time. Frames are stamped on arrival, before parsing."""

    def __init__(self, connection: ClientConnection) -> None:
        self._connection = connection
        self._replies: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._ends: asyncio.Queue[tuple[int, dict[str, Any]]] = asyncio.Queue()
        self._reader = asyncio.create_task(self._read())

    async def close(self) -> None:
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._reader

    async def _read(self) -> None:
        async for raw in self._connection:
            arrived = time.perf_counter_ns()
            frame: dict[str, Any] = json.loads(raw)
            kind = frame.get("type")
            if kind in ("accepted", "error"):
                self._replies.put_nowait(frame)
            elif kind == "cycle_end":
                self._ends.put_nowait((arrived, frame))

    async def ping_ns(self) -> int:
        """A WebSocket ping/pong with the gateway (answered by its server, not the app)."""
        started = time.perf_counter_ns()
        pong = await self._connection.ping()
        await pong
        return time.perf_counter_ns() - started

    async def cycle(
        self, thread_id: str, content: str, *, queued_ok: bool = False
    ) -> tuple[int, dict[str, Any]]:
        """Send a message; return ns from the send until its ``cycle_end`` frame arrived,
        and that frame. Decision sends ``cycle_end`` just before it frees the thread, so a
        message sent on it to the same thread may be queued for a moment (``queued_ok``)."""
        frame = json.dumps({"type": "message", "thread_id": thread_id, "content": content})
        started = time.perf_counter_ns()
        await self._connection.send(frame)
        async with asyncio.timeout(CYCLE_TIMEOUT_S):
            reply = await self._replies.get()
            if reply["type"] != "accepted" or (reply.get("queued") and not queued_ok):
                raise RuntimeError(f"message not dispatched at once: {reply}")
            arrived, end = await self._ends.get()
        expected = f"cyc_{reply['id'].removeprefix('msg_')}"
        if end.get("cycle_id") != expected:
            raise RuntimeError(f"cycle_end of {end.get('cycle_id')}, expected {expected}")
        return arrived - started, end


@contextlib.asynccontextmanager
async def timed_client(url: str) -> AsyncIterator[TimedClient]:
    async with connect(url, max_size=None) as connection:
        client = TimedClient(connection)
        try:
            yield client
        finally:
            await client.close()


# -- reporting ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Stats:
    name: str
    count: int
    p50_ms: float
    p95_ms: float
    p99_ms: float
    mean_ms: float

    def row(self, width: int) -> str:
        return (
            f"{self.name:<{width}}{self.p50_ms:>9.3f}{self.p95_ms:>9.3f}"
            f"{self.p99_ms:>9.3f}{self.mean_ms:>9.3f}"
        )


def nearest_rank(ordered: Sequence[int], percent: int) -> int:
    """The nearest-rank percentile: a latency that some sample really had."""
    rank = math.ceil(percent / 100 * len(ordered))
    return ordered[max(rank, 1) - 1]


def summarize(name: str, latencies_ns: Sequence[int]) -> Stats:
    ordered = sorted(latencies_ns)
    p50, p95, p99 = (nearest_rank(ordered, percent) / NS_PER_MS for percent in PERCENTILES)
    return Stats(name, len(ordered), p50, p95, p99, statistics.fmean(ordered) / NS_PER_MS)


def table(title: str, rows: Sequence[Stats]) -> list[str]:
    width = max(len(title), *(len(row.name) for row in rows)) + 2
    header = f"{title:<{width}}{'p50':>9}{'p95':>9}{'p99':>9}{'mean':>9}"
    return [header, *(row.row(width) for row in rows)]


def loadavg() -> str:
    with contextlib.suppress(OSError):
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    return "unknown"


def cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def machine_line() -> str:
    return f"machine: {os.cpu_count()} CPUs ({cpu_model()}), Python {platform.python_version()}"


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (0 when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    # After the command name: state is field 3, utime 14 and stime 15 (1-based).
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS

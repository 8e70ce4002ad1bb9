"""`memoria run` (what `make run` starts): the embedded broker and four services under one
supervisor, usable from a WebSocket, surviving a crashed service, stopping cleanly, every
line of its output in one format."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import redis
from stack import free_port
from ws_client import chat

from memoria_cli import embedded_milvus
from memoria_runtime.files import wider_than_private

pytestmark = pytest.mark.integration

MEMORIA = Path(sys.executable).parent / "memoria"
BANNER = re.compile(r"Memoria is running: (http://\S+)")
START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 30.0
TWO_RUNS_TIMEOUT_S = 2 * (START_TIMEOUT_S + STOP_TIMEOUT_S)
ONE_RUN_AND_CHECKS_TIMEOUT_S = START_TIMEOUT_S + STOP_TIMEOUT_S + 60.0
"""A start, a stop, and in between `memoria doctor` and `memoria token` as processes."""
"""Two starts and stops of everything (the default 120 s per test is one on a loaded host)."""
# The one format of every line, whichever process wrote it: "15:58:51 INFO    decision | …"
LINE = re.compile(r"^\d\d:\d\d:\d\d (DEBUG|INFO|WARNING|ERROR|CRITICAL) +(\S+) +\| (.*)$")
PROCESSES = ("valkey", "milvus", "action-worker", "decision", "memory", "gateway")


class Run:
    def __init__(
        self, process: subprocess.Popen[str], data_dir: Path, ports: dict[str, int]
    ) -> None:
        self.process = process
        self.data_dir = data_dir
        self.ports = ports
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def wait_for(self, pattern: str | re.Pattern[str], timeout: float = START_TIMEOUT_S) -> str:
        compiled = re.compile(pattern) if isinstance(pattern, str) else pattern
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if compiled.search(line):
                    return line
            if self.process.poll() is not None:
                break
            time.sleep(0.1)
        raise AssertionError(f"{compiled.pattern!r} never appeared:\n{self.output[-6000:]}")

    def children(self) -> dict[str, int]:
        """Service name -> pid of the supervisor's children."""
        out = subprocess.run(
            ["ps", "-o", "pid=,args=", "--ppid", str(self.process.pid)],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        found: dict[str, int] = {}
        for line in out.splitlines():
            pid, _, args = line.strip().partition(" ")
            for module in ("memoria_gateway", "memoria_decision", "memoria_action_worker"):
                if f"-m {module}" in args:
                    found[module] = int(pid)
            if "-m memoria_memory" in args:
                found["memoria_memory"] = int(pid)
            if "valkey-server" in args:
                found["valkey"] = int(pid)
        return found


@contextmanager
def memoria_running(data_dir: Path, cwd: Path) -> Iterator[tuple[Run, int]]:
    """`memoria run` on ``data_dir`` with free ports; stopped with Ctrl-C at the end."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMORIA_", "GEMINI_"))}
    env.pop("REDIS_URL", None)
    env.pop("GOOGLE_API_KEY", None)
    env.update(
        {
            "MEMORIA_DATA_DIR": str(data_dir),
            "MEMORIA_GATEWAY_PORT": str(port),
            "MEMORIA_EMBEDDED_REDIS_PORT": str(free_port()),
            "MEMORIA_EMBEDDED_MILVUS_PORT": str(free_port()),
            "MEMORIA_RECLAIM_IDLE_MS": "2000",
        }
    )
    env.pop("NO_COLOR", None)  # no terminal: no color codes all the same
    env.pop("FORCE_COLOR", None)
    process = subprocess.Popen(
        [str(MEMORIA), "run"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=cwd,
    )
    ports = {
        "redis": int(env["MEMORIA_EMBEDDED_REDIS_PORT"]),
        "milvus": int(env["MEMORIA_EMBEDDED_MILVUS_PORT"]),
    }
    run = Run(process, data_dir, ports)
    try:
        yield run, port
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()


@pytest.fixture
def memoria_run(tmp_path: Path) -> Iterator[tuple[Run, int]]:
    with memoria_running(tmp_path / "data", tmp_path) as running:
        yield running


async def answered_by(port: int, text: str) -> str:
    """Who wrote the last answer to ``text`` (the `model` of its message)."""
    async with httpx.AsyncClient() as http:
        token = await http.post(f"http://127.0.0.1:{port}/api/token", json={"user_id": "newcomer"})
    url = f"ws://127.0.0.1:{port}/ws?token={token.json()['token']}"
    async with chat(url) as client:
        accepted = await client.send("main", text)
        frames = await client.cycle(accepted["id"], timeout=60)
    answers = [f for f in frames if f["type"] == "message" and f["role"] == "assistant"]
    # Who answered, not the wording: the offline planner's replies change with its phrasing.
    return str(answers[-1]["model"])


@pytest.mark.timeout(ONE_RUN_AND_CHECKS_TIMEOUT_S)
def test_make_run_serves_the_product_restarts_crashes_and_stops_cleanly(
    memoria_run: tuple[Run, int],
) -> None:
    run, port = memoria_run
    banner = run.wait_for(BANNER)
    assert f"http://127.0.0.1:{port}/" in banner
    assert httpx.get(f"http://127.0.0.1:{port}/").status_code == 200
    for name in ("gateway", "decision", "action-worker", "memory"):
        assert re.search(rf"^\S+ \S+ +{name} +\|", run.output, re.M), f"no {name} log lines"

    assert asyncio.run(answered_by(port, "hello, who is answering?")) == "offline planner (no LLM)"

    children = run.children()
    assert set(children) >= {"memoria_gateway", "memoria_decision", "memoria_memory", "valkey"}
    assert_nothing_open_to_other_accounts(run)
    assert_the_data_directory_alone_finds_the_instance(run.data_dir, port)
    os.kill(children["memoria_decision"], signal.SIGKILL)
    run.wait_for(r"decision.*(exit|restart)", timeout=30)
    assert asyncio.run(answered_by(port, "still there?")) == "offline planner (no LLM)"

    pids = list(run.children().values())
    run.process.send_signal(signal.SIGINT)
    assert run.process.wait(STOP_TIMEOUT_S) == 0
    time.sleep(0.5)
    alive = [pid for pid in pids if Path(f"/proc/{pid}").exists()]
    assert not alive, f"processes left behind: {alive}\n{run.output[-3000:]}"
    assert_readable_and_stopped_cleanly(run)


def assert_nothing_open_to_other_accounts(run: Run) -> None:
    """The findings: another account read chat frames and ran SET/DEL over raw TCP on the
    embedded Valkey, milvus-lite took no password, and memoria.db, its WAL and the AOF were
    0644 in 0755 folders."""
    data_dir = run.data_dir
    password = (data_dir / "embedded_password").read_text().strip()
    assert wider_than_private(data_dir) == []
    names = {path.name for path in data_dir.rglob("*")}
    assert {"memoria.db", "memoria.db-wal", "auth_secret", "embedded_password"} <= names
    assert any(name.endswith(".aof") for name in names), names
    broker = redis.Redis(host="127.0.0.1", port=run.ports["redis"])
    try:
        with pytest.raises(redis.AuthenticationError):
            broker.keys("*")
    finally:
        broker.close()
    with pytest.raises(Exception, match="a valid token is required"):
        asyncio.run(embedded_milvus.server_version(run.ports["milvus"]))
    assert password not in run.output
    for pid in run.children().values():
        assert password.encode() not in Path(f"/proc/{pid}/cmdline").read_bytes()


def assert_the_data_directory_alone_finds_the_instance(data_dir: Path, port: int) -> None:
    """The findings: `memoria doctor` with only MEMORIA_DATA_DIR warned 6 times, and
    `memoria token` minted tokens the instance refused."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMORIA_", "GEMINI_"))}
    env.pop("REDIS_URL", None)
    env["MEMORIA_DATA_DIR"] = str(data_dir)
    doctor = subprocess.run(
        [str(MEMORIA), "doctor", "--json"], env=env, capture_output=True, text=True, check=False
    )
    report = json.loads(doctor.stdout)
    assert report["summary"] == {"ok": 10, "warning": 0, "failed": 0}, doctor.stdout
    token = subprocess.run(
        [str(MEMORIA), "token", "carla"], env=env, capture_output=True, text=True, check=True
    ).stdout.strip()
    listed = httpx.get(
        f"http://127.0.0.1:{port}/api/memories", headers={"Authorization": f"Bearer {token}"}
    )
    assert listed.status_code == 200, listed.text
    elsewhere = {**env, "MEMORIA_DATA_DIR": str(data_dir.parent / "never-used")}
    refused = subprocess.run(
        [str(MEMORIA), "token", "carla"], env=elsewhere, capture_output=True, text=True, check=False
    )
    assert refused.returncode == 2 and "no Memoria has used" in refused.stderr


def assert_readable_and_stopped_cleanly(run: Run) -> None:
    """One format for every line, no escape codes (stdout is a pipe), no start-up noise, and
    every process stopped on request, none killed by the stop signal."""
    run.reader.join(STOP_TIMEOUT_S)  # the whole output, up to the end of the pipe
    assert "\x1b" not in run.output
    odd = [line for line in run.lines if not LINE.match(line)]
    assert not odd, f"lines not in the one format: {odd}"
    assert "objects of start-up frozen" not in run.output
    assert "Memory overcommit must be enabled" not in run.output
    stop = run.output[run.output.index("received SIG") :]
    for name in PROCESSES:
        assert re.search(rf"\| {name} stopped$", stop, re.M), f"{name} not stopped cleanly:\n{stop}"
    assert "exited with code" not in stop, stop


def _authorized(port: int, user: str) -> httpx.Client:
    base = f"http://127.0.0.1:{port}"
    token = httpx.post(f"{base}/api/token", json={"user_id": user}).json()["token"]
    return httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=30)


@pytest.mark.timeout(TWO_RUNS_TIMEOUT_S)
def test_memories_survive_a_restart_of_memoria_run(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with memoria_running(data_dir, tmp_path) as (run, port):
        run.wait_for(BANNER)
        with _authorized(port, "newcomer") as http:
            created = http.post(
                "/api/memories",
                json={"content": "I am allergic to peanuts", "bindings": ["food allergy"]},
            )
            assert created.status_code == 201, created.text
        run.process.send_signal(signal.SIGINT)
        assert run.process.wait(STOP_TIMEOUT_S) == 0
    # As an earlier version left it: every file and folder readable by other accounts.
    for path in [data_dir, *data_dir.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)

    with memoria_running(data_dir, tmp_path) as (run, port):
        run.wait_for(BANNER)
        run.wait_for(rf"made \d+ files and folders of {re.escape(str(data_dir))} private")
        assert wider_than_private(data_dir) == []
        with _authorized(port, "newcomer") as http:
            found = http.get("/api/memories/search", params={"q": "what am I allergic to?"})
            listed = http.get("/api/memories")
        run.process.send_signal(signal.SIGTERM)  # as a service manager stops it
        assert run.process.wait(STOP_TIMEOUT_S) == 0
    assert_readable_and_stopped_cleanly(run)
    assert [m["memory_id"] for m in found.json()["memories"]] == [created.json()["memory_id"]]
    assert [m["content"] for m in listed.json()["memories"]] == ["I am allergic to peanuts"]

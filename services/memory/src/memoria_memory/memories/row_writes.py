"""Concurrent saves of one user write their vector rows in one upsert.

The vector store takes one user's writes one at a time (a lock per user keeps its held copy
and version consistent), and each write is a round trip to Milvus for the vectors and one
for the texts, whatever the row count. Many saves of one user at once (a bulk import) would
queue on that lock one memory at a time. :class:`RowWrites` lets the saves that arrive while
a write of that user runs join the next one; each save still waits for its own rows to be
stored before it goes on, so the save order (document, vectors, document settled) holds.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from memoria_memory.vectors import VectorRow, VectorStore

log = logging.getLogger("memoria.memory.writes")


@dataclass
class _Write:
    rows: list[VectorRow]
    done: asyncio.Future[None] = field(repr=False)


class RowWrites:
    def __init__(self, vectors: VectorStore) -> None:
        self._vectors = vectors
        self._queued: dict[str, list[_Write]] = {}
        self._writers: dict[str, asyncio.Task[None]] = {}

    async def upsert(self, user_id: str, rows: Sequence[VectorRow]) -> None:
        """Store ``rows`` (raises what the store raised for them)."""
        loop = asyncio.get_running_loop()
        write = _Write(list(rows), loop.create_future())
        self._queued.setdefault(user_id, []).append(write)
        if user_id not in self._writers:
            self._writers[user_id] = loop.create_task(self._drain(user_id))
        await write.done

    async def _drain(self, user_id: str) -> None:
        try:
            while writes := self._queued.pop(user_id, None):
                await self._write(user_id, writes)
        finally:
            del self._writers[user_id]

    async def _write(self, user_id: str, writes: list[_Write]) -> None:
        try:
            await self._vectors.upsert(user_id, [row for write in writes for row in write.rows])
        except Exception as exc:
            if len(writes) == 1:
                _settle(writes[0], exc)
                return
            # One save's rows may be what the store refused: each alone, so that only that
            # save fails (and is retried or repaired) and the others go on.
            log.warning(
                "a joint write of %d saves failed (%r); writing them one by one", len(writes), exc
            )
            for write in writes:
                try:
                    await self._vectors.upsert(user_id, write.rows)
                except Exception as alone:
                    _settle(write, alone)
                else:
                    _settle(write, None)
        except BaseException as exc:  # cancelled: nobody may wait forever
            for write in writes:
                _settle(write, exc if isinstance(exc, Exception) else RuntimeError("cancelled"))
            raise
        else:
            for write in writes:
                _settle(write, None)


def _settle(write: _Write, error: Exception | None) -> None:
    if write.done.done():  # the save was cancelled meanwhile
        return
    if error is None:
        write.done.set_result(None)
    else:
        write.done.set_exception(error)

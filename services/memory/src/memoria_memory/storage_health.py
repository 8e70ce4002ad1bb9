"""A full disk under the document or vector store: told apart from other failures, said in
/readyz, waited out by what must not be lost, and refused clearly to who is waiting.

* A request that writes (a save, an update, a delete) is answered at once with
  ``storage_full``: the step tells its user that nothing was changed.
* What the service keeps for users on its own (a thread's messages, a cycle's trace) is
  written again in place, with backoff, until the disk takes it: the entry stays in the
  service's hands (its keep-alive holds it), so it is neither lost nor dead-lettered, and the
  stream keeps what comes after it (bus/retention.py never trims past it).
* /readyz answers 503 ``storage full`` from the first failure until a write succeeds again;
  while it lasts, a small write is tried every ``PROBE_S`` so that readiness comes back when
  space does, even if nobody writes.

SQLite answers a full disk with ``database or disk is full`` and rolls the statement back:
the file stays consistent (SQLite's own disk-full tests); milvus-lite and MongoDB report the
operating system's ``No space left on device``.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import sqlite3
import time
from collections.abc import Awaitable, Callable
from typing import Final, TypeVar

from memoria_memory.docstore.port import DocumentStore
from memoria_runtime.health import Verdict

log = logging.getLogger("memoria.memory.storage")

PROBE_S: Final = 5.0
RETRY_FIRST_S: Final = 0.5
RETRY_MAX_S: Final = 5.0
PROBE_COLLECTION: Final = "storage_probe"
_FULL_ERRNOS: Final = frozenset({errno.ENOSPC, errno.EDQUOT})
_FULL_WORDS: Final = ("no space left on device", "database or disk is full", "disk quota")

T = TypeVar("T")


def is_storage_full(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it) says a disk under a store is full."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in _FULL_ERRNOS:
            return True
        if isinstance(current, sqlite3.OperationalError | sqlite3.DatabaseError):
            if "full" in str(current).lower():
                return True
        elif any(word in str(current).lower() for word in _FULL_WORDS):
            return True
        current = current.__cause__ or current.__context__
    return False


class StorageHealth:
    """Whether the stores' disk was found full, since when, and why."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self.full_since: float | None = None
        self.error: str | None = None

    @property
    def full(self) -> bool:
        return self.full_since is not None

    def failed(self, exc: BaseException) -> None:
        if self.full_since is None:
            log.error("the storage's disk is full: %s; saves are refused until it has room", exc)
            self.full_since = self._clock()
        self.error = f"{type(exc).__name__}: {exc}"[:300]

    def wrote(self) -> None:
        if self.full_since is not None:
            log.warning(
                "the storage takes writes again after %.0f s of a full disk",
                self._clock() - self.full_since,
            )
        self.full_since = None
        self.error = None

    def readiness(self) -> Verdict | None:
        """What /readyz says about storage: nothing while it takes writes."""
        if self.full_since is None:
            return None
        return Verdict(
            False,
            "storage full",
            {"since_seconds": round(self._clock() - self.full_since, 1), "error": self.error},
        )

    async def written(self, write: Callable[[], Awaitable[T]]) -> T:
        """``write()``, again and again while the disk is full (other failures raise)."""
        delay = RETRY_FIRST_S
        while True:
            try:
                result = await write()
            except Exception as exc:
                if not is_storage_full(exc):
                    raise
                self.failed(exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX_S)
                continue
            self.wrote()
            return result

    async def probe_forever(self, documents: DocumentStore) -> None:
        """While the disk is full, try a small write every ``PROBE_S`` (readiness returns
        when it succeeds)."""
        probe = documents.collection(PROBE_COLLECTION)
        while True:
            await asyncio.sleep(PROBE_S)
            if not self.full:
                continue
            try:
                await probe.replace_one(
                    {"_id": "probe"}, {"_id": "probe", "at": self._clock()}, upsert=True
                )
            except Exception as exc:
                if not is_storage_full(exc):
                    log.warning("storage probe failed: %s", exc)
                continue
            self.wrote()

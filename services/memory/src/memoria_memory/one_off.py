"""Passes over stored data that need to run once per store (a backfill after a new field or
collection): a marker document, whose ``_id`` names the pass, says that one has finished."""

from __future__ import annotations

import contextlib

from memoria_memory.docstore import Collection, DuplicateKeyError
from memoria_memory.memories import clock


async def finished(markers: Collection, name: str) -> bool:
    """Whether the pass ``name`` has finished on this store (by any replica)."""
    return await markers.find_one({"_id": name}) is not None


async def mark_finished(markers: Collection, name: str) -> None:
    with contextlib.suppress(DuplicateKeyError):  # another replica finished it too
        await markers.insert_one({"_id": name, "done_at": clock.stamp(clock.now())})

"""Concurrent saves of one user share their vector writes; each save still waits for its own
rows, and a refused row fails only its own save."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from memoria_memory.memories.row_writes import RowWrites
from memoria_memory.vectors import VectorRow


class SlowStore:
    """The one call RowWrites makes, recorded; a row id "bad" is refused."""

    def __init__(self) -> None:
        self.upserts: list[tuple[str, list[str]]] = []

    async def upsert(self, user_id: str, rows: Sequence[VectorRow]) -> None:
        self.upserts.append((user_id, [row.id for row in rows]))
        await asyncio.sleep(0.02)
        if any(row.id == "bad" for row in rows):
            raise ValueError("refused row bad")


def row(row_id: str) -> VectorRow:
    return VectorRow(id=row_id, memory_id=f"mem_{row_id}", vector=[1.0, 0.0])


def writes(store: SlowStore) -> RowWrites:
    vectors: Any = store  # stands in for a VectorStore: RowWrites only calls upsert
    return RowWrites(vectors)


async def test_saves_arriving_during_a_write_join_the_next_one() -> None:
    store = SlowStore()
    rows = writes(store)
    first = asyncio.create_task(rows.upsert("ana", [row("a")]))
    await asyncio.sleep(0.005)  # the first write is under way
    await asyncio.gather(first, *(rows.upsert("ana", [row(f"r{n}")]) for n in range(10)))
    assert store.upserts == [("ana", ["a"]), ("ana", [f"r{n}" for n in range(10)])]


async def test_users_never_share_a_write() -> None:
    store = SlowStore()
    rows = writes(store)
    await asyncio.gather(rows.upsert("ana", [row("a")]), rows.upsert("bob", [row("b")]))
    assert sorted(store.upserts) == [("ana", ["a"]), ("bob", ["b"])]


async def test_a_save_returns_only_once_its_rows_are_stored() -> None:
    store = SlowStore()
    rows = writes(store)
    await rows.upsert("ana", [row("a"), row("b")])
    assert store.upserts == [("ana", ["a", "b"])]


async def test_a_refused_row_fails_its_own_save_only() -> None:
    store = SlowStore()
    rows = writes(store)
    first = asyncio.create_task(rows.upsert("ana", [row("a")]))
    await asyncio.sleep(0.005)
    results = await asyncio.gather(
        rows.upsert("ana", [row("ok1")]),
        rows.upsert("ana", [row("bad")]),
        rows.upsert("ana", [row("ok2")]),
        return_exceptions=True,
    )
    await first
    assert results[0] is None and results[2] is None
    assert isinstance(results[1], ValueError)
    # The joint write, then each alone.
    assert store.upserts[1:] == [
        ("ana", ["ok1", "bad", "ok2"]),
        ("ana", ["ok1"]),
        ("ana", ["bad"]),
        ("ana", ["ok2"]),
    ]
    # And the user's writes go on afterwards.
    await rows.upsert("ana", [row("later")])
    assert store.upserts[-1] == ("ana", ["later"])


async def test_a_lone_failure_is_raised_to_its_save() -> None:
    rows = writes(SlowStore())
    with pytest.raises(ValueError, match="refused"):
        await rows.upsert("ana", [row("bad")])

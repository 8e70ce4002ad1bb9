"""Telling a full disk apart and waiting it out (storage_health.py), without a disk: the
errors SQLite and the operating system raise, the retry in place, the readiness verdict."""

from __future__ import annotations

import errno
import sqlite3

import pytest

from memoria_memory.storage_health import StorageHealth, is_storage_full
from memoria_memory.vectors.port import VectorStoreError


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def caused_by(cause: BaseException) -> Exception:
    try:
        try:
            raise cause
        except BaseException as inner:
            raise RuntimeError("the write failed") from inner
    except RuntimeError as outer:
        return outer


@pytest.mark.parametrize(
    "error",
    [
        sqlite3.OperationalError("database or disk is full"),
        OSError(errno.ENOSPC, "No space left on device"),
        OSError(errno.EDQUOT, "Disk quota exceeded"),
        VectorStoreError(
            "milvus at http://127.0.0.1:1: <MilvusException: No space left on device>"
        ),
        caused_by(sqlite3.OperationalError("database or disk is full")),
    ],
)
def test_a_full_disk_is_recognised_in_every_form(error: BaseException) -> None:
    assert is_storage_full(error)


@pytest.mark.parametrize(
    "error",
    [
        sqlite3.OperationalError("database is locked"),
        OSError(errno.EACCES, "Permission denied"),
        VectorStoreError("milvus at http://127.0.0.1:1: connection refused"),
        ValueError("the bucket is full of apples"),
        caused_by(TimeoutError()),
    ],
)
def test_other_failures_are_not_a_full_disk(error: BaseException) -> None:
    assert not is_storage_full(error)


def test_readiness_is_lost_at_the_first_full_write_and_back_at_the_next_good_one() -> None:
    clock = Clock()
    health = StorageHealth(clock)
    assert health.readiness() is None
    health.failed(sqlite3.OperationalError("database or disk is full"))
    clock.now += 12
    health.failed(sqlite3.OperationalError("database or disk is full"))
    verdict = health.readiness()
    assert verdict is not None and not verdict.ok
    assert verdict.status == "storage full"
    assert verdict.detail["since_seconds"] == 12.0  # from the first failure
    assert "database or disk is full" in str(verdict.detail["error"])
    health.wrote()
    assert health.readiness() is None and not health.full


async def test_a_write_is_made_again_while_the_disk_is_full_then_clears_the_state(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    waits: list[float] = []

    async def no_wait(seconds: float) -> None:
        waits.append(seconds)

    monkeypatch.setattr("memoria_memory.storage_health.asyncio.sleep", no_wait)
    health = StorageHealth(Clock())
    attempts: list[int] = []

    async def write() -> str:
        attempts.append(1)
        if len(attempts) < 6:
            raise sqlite3.OperationalError("database or disk is full")
        assert health.full  # said while it lasted
        return "stored"

    assert await health.written(write) == "stored"
    assert len(attempts) == 6
    assert waits == [0.5, 1.0, 2.0, 4.0, 5.0]  # backoff, capped
    assert not health.full


async def test_any_other_failure_of_the_write_is_raised_at_once() -> None:
    health = StorageHealth(Clock())

    async def write() -> None:
        raise sqlite3.OperationalError("database is locked")

    with pytest.raises(sqlite3.OperationalError, match="locked"):
        await health.written(write)
    assert not health.full

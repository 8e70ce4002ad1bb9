"""Freezing a service's start-up objects: they leave the collector's reach, and garbage
start-up left behind is freed first rather than kept forever."""

from __future__ import annotations

import gc
import logging
import weakref
from collections.abc import Iterator

import pytest

from memoria_runtime.heap import freeze_startup_objects


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


@pytest.fixture
def unfrozen_afterwards() -> Iterator[None]:
    yield
    gc.unfreeze()  # the test process goes on collecting as usual


def test_objects_alive_at_start_up_leave_every_later_collection(
    unfrozen_afterwards: None,
) -> None:
    kept = [Node() for _ in range(1000)]  # the service's long-lived objects

    frozen = freeze_startup_objects()

    assert frozen == gc.get_freeze_count() >= len(kept)
    assert not any(gc.is_tracked(n) and n in gc.get_objects(generation=2) for n in kept[:3])


def test_start_up_garbage_is_freed_not_frozen(unfrozen_afterwards: None) -> None:
    first, second = Node(), Node()
    first.other, second.other = second, first  # a cycle: only the collector frees it
    gone = weakref.ref(first)
    del first, second

    freeze_startup_objects()

    assert gone() is None, "a garbage cycle was frozen: it would never be freed"


def test_objects_made_after_the_freeze_are_collected_as_before(
    unfrozen_afterwards: None,
) -> None:
    """Without asking: the collector still runs on its own once enough is allocated."""
    freeze_startup_objects()
    first, second = Node(), Node()
    first.other, second.other = second, first
    gone = weakref.ref(first)
    del first, second

    # Kept alive, so they count towards the youngest generation's threshold.
    allocated = [Node() for _ in range(gc.get_threshold()[0] * 2)]

    assert gc.isenabled()
    assert gone() is None, "a garbage cycle made after the freeze was not collected"
    assert len(allocated) > 0


def test_the_freeze_is_told_at_debug_level_only(
    unfrozen_afterwards: None, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, logger="memoria.runtime"):
        freeze_startup_objects()
    assert [r.levelno for r in caplog.records if "frozen" in r.getMessage()] == [logging.DEBUG]

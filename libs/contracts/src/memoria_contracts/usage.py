"""Token usage reported by model providers, collected by whoever makes the calls.

A provider (``memoria_llm``) calls :func:`report` after every API response that says how many
tokens it used;
the caller (a decision step, an action) wraps its LLM calls in :func:`collecting` and gets the
list. A context variable carries the collector, so the provider needs no reference to the
caller, concurrent tasks never mix their counts, and a call made outside any collection is
simply not counted.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass


@dataclass(frozen=True)
class Usage:
    model: str
    input_tokens: int
    output_tokens: int


_collector: ContextVar[list[Usage] | None] = ContextVar("memoria_usage", default=None)


def report(usage: Usage) -> None:
    collected = _collector.get()
    if collected is not None:
        collected.append(usage)


@contextmanager
def collecting() -> Iterator[list[Usage]]:
    """Usage reported by LLM calls made inside the block (including tasks it starts)."""
    collected: list[Usage] = []
    token = _collector.set(collected)
    try:
        yield collected
    finally:
        _collector.reset(token)

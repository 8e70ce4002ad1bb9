"""Embedding, search (semantic and chronological), get, list and history.

Semantic search is dense (the embedder's vectors), lexical (BM25 over each row's binding
and the memory's content) or both fused (``fusion.Fusion``), as ``MEMORIA_MEMORY_RETRIEVAL``
says. Each query is searched as ``search_queries`` rewrites it (its vector blended with its
statement form's, its key terms for BM25).

Search only ever returns ``ready`` memories whose vector row that matched is one of the
memory's settled rows: a half-written memory, or a row left by an interrupted update, is
never an answer. Retrieval (search, get) updates ``last_accessed`` (written behind the
reply, access.py); browsing (list, history) does not, so "not used for a long time" keeps
its meaning when a user scrolls or exports.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Final

from memoria_contracts.memory import (
    Memory,
    MemoryEmbed,
    MemoryFailure,
    MemoryFound,
    MemoryHistory,
    MemoryHistoryQuery,
    MemoryList,
    MemoryPage,
    MemorySearch,
    MemoryVectors,
    Vector,
)
from memoria_memory.embedding import Calibration, Embedder
from memoria_memory.memories import clock
from memoria_memory.memories.access import AccessLog
from memoria_memory.memories.documents import MemoryDocument
from memoria_memory.memories.fusion import Fusion
from memoria_memory.memories.repository import MemoryRepository
from memoria_memory.memories.search_queries import dense_vectors, lexical_texts
from memoria_memory.memories.window import TimeWindow
from memoria_memory.memories.writes import not_found
from memoria_memory.vectors import VectorHit, VectorStore

# A memory has several bindings and each may match: ask the vector store for more rows than
# memories wanted, so that the limit is filled with distinct memories.
ROWS_PER_RESULT: Final = 3
MAX_ROWS_PER_QUERY: Final = 300


@dataclass(frozen=True)
class SearchDefaults:
    limit: int
    min_relevance: float


def _by_memory(
    hits_by_query: list[list[VectorHit]], excluded: set[str]
) -> dict[str, list[VectorHit]]:
    hits: defaultdict[str, list[VectorHit]] = defaultdict(list)
    for query_hits in hits_by_query:
        for hit in query_hits:
            if hit.memory_id not in excluded:
                hits[hit.memory_id].append(hit)
    return hits


def _best(hits: list[VectorHit], settled: set[str]) -> float | None:
    """The best score among the memory's settled rows (a row an interrupted write left
    behind is never evidence)."""
    return max((hit.score for hit in hits if hit.id in settled), default=None)


def relevance_of(
    dense: list[VectorHit],
    lexical: list[VectorHit],
    settled: set[str],
    calibration: Calibration,
    fusion: Fusion,
) -> float | None:
    """One memory's relevance from its hits over every query searched (the best row of
    each kind counts); None: no settled row matched. Shared with the in-process benchmark
    (bench/retrieval_local.py), so what is tuned there is what the service ranks by."""
    cosine = _best(dense, settled)
    bm25 = _best(lexical, settled)
    if cosine is None and bm25 is None:
        return None
    return fusion.relevance(None if cosine is None else calibration.relevance(cosine), bm25)


def encode_cursor(document: MemoryDocument) -> str:
    raw = json.dumps([document.creation_datetime, document.id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[str, str] | None:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        created, memory_id = json.loads(raw)
    except (binascii.Error, ValueError, TypeError):
        return None
    if not (isinstance(created, str) and isinstance(memory_id, str)):
        return None
    return created, memory_id


@dataclass
class MemoryReader:
    repo: MemoryRepository
    vectors: VectorStore
    embedder: Embedder
    defaults: SearchDefaults
    access: AccessLog
    fusion: Fusion = field(default_factory=Fusion)

    async def embed(self, request: MemoryEmbed) -> MemoryVectors:
        texts = list(request.texts)
        if request.purpose == "passage":
            vectors = await self.embedder.passages(texts)
        else:
            vectors = await self.embedder.queries(texts)
        return MemoryVectors(embedder=self.embedder.id, vectors=vectors)

    async def search(self, user_id: str, request: MemorySearch) -> MemoryFound:
        limit = request.limit or self.defaults.limit
        if request.mode == "chronological":
            documents = await self.repo.newest(
                user_id,
                memory_type=request.memory_type,
                limit=limit,
                exclude=request.exclude_ids,
                window=TimeWindow(request.since, request.until),
            )
            return MemoryFound(memories=await self._retrieved(user_id, documents, {}))
        scored = await self._semantic(user_id, request, limit)
        return MemoryFound(
            memories=await self._retrieved(
                user_id, [d for d, _ in scored], dict((d.id, relevance) for d, relevance in scored)
            )
        )

    async def _semantic(
        self, user_id: str, request: MemorySearch, limit: int
    ) -> list[tuple[MemoryDocument, float]]:
        excluded = set(request.exclude_ids)
        window = TimeWindow(request.since, request.until)
        per_query = min(MAX_ROWS_PER_QUERY, limit * ROWS_PER_RESULT + len(excluded))
        if not window.open:
            # Vector rows carry no time (giving them one would rewrite every row), so a
            # window filters the matched documents: each store is asked for as many rows
            # as a query may fetch, so that the memories inside it still fill the limit.
            per_query = MAX_ROWS_PER_QUERY
        dense_hits, lexical_hits = await asyncio.gather(
            self._dense_hits(user_id, request, per_query),
            self._lexical_hits(user_id, request, per_query),
        )
        dense = _by_memory(dense_hits, excluded)
        lexical = _by_memory(lexical_hits, excluded)
        if not dense and not lexical:
            return []
        minimum = (
            self.defaults.min_relevance if request.min_relevance is None else request.min_relevance
        )
        calibration = self.embedder.calibration
        documents = await self.repo.ready(
            user_id, list(dict.fromkeys([*dense, *lexical])), request.memory_type, window
        )
        scored: list[tuple[MemoryDocument, float]] = []
        for document in documents:
            if document.vector_collection != self.vectors.collection:
                continue
            relevance = relevance_of(
                dense.get(document.id, []),
                lexical.get(document.id, []),
                set(document.vector_ids),
                calibration,
                self.fusion,
            )
            if relevance is not None and relevance >= minimum:
                scored.append((document, relevance))
        scored.sort(key=lambda pair: (-pair[1], pair[0].id))
        return scored[:limit]

    async def _dense_hits(
        self, user_id: str, request: MemorySearch, per_query: int
    ) -> list[list[VectorHit]]:
        if not self.fusion.dense:
            return []
        return await self.vectors.search(user_id, await self._query_vectors(request), per_query)

    async def _lexical_hits(
        self, user_id: str, request: MemorySearch, per_query: int
    ) -> list[list[VectorHit]]:
        if not self.fusion.lexical:
            return []
        return await self.vectors.lexical_search(user_id, lexical_texts(request.queries), per_query)

    async def _query_vectors(self, request: MemorySearch) -> list[Vector]:
        given = request.vectors
        if not (
            given is not None
            and request.embedder == self.embedder.id
            and all(len(v) == self.embedder.dim for v in given)
        ):
            given = None
        return await dense_vectors(request.queries, self.embedder.queries, given)

    async def _retrieved(
        self, user_id: str, documents: list[MemoryDocument], relevance: dict[str, float]
    ) -> list[Memory]:
        now = clock.stamp(clock.now())
        self.access.record(user_id, [d.id for d in documents], now)
        return [
            d.model_copy(update={"last_accessed": now}).to_memory(relevance.get(d.id))
            for d in documents
        ]

    async def get(self, user_id: str, memory_id: str) -> MemoryFound | MemoryFailure:
        document = await self.repo.get(user_id, memory_id)
        if document is None or document.state != "ready":
            return not_found(memory_id)
        return MemoryFound(memories=await self._retrieved(user_id, [document], {}))

    async def list(self, user_id: str, request: MemoryList) -> MemoryPage | MemoryFailure:
        before = None
        if request.cursor is not None:
            before = decode_cursor(request.cursor)
            if before is None:
                return MemoryFailure(code="invalid", error_message="the cursor is not valid")
        documents = await self.repo.newest(
            user_id,
            memory_type=request.memory_type,
            limit=request.limit + 1,
            before=before,
            window=TimeWindow(request.since, request.until),
        )
        page = documents[: request.limit]
        more = len(documents) > request.limit
        return MemoryPage(
            memories=[d.to_memory() for d in page],
            next_cursor=encode_cursor(page[-1]) if more and page else None,
        )

    async def history(
        self, user_id: str, request: MemoryHistoryQuery
    ) -> MemoryHistory | MemoryFailure:
        changes = await self.repo.changes(user_id, request.memory_id)
        if not changes:
            return not_found(request.memory_id)
        return MemoryHistory(memory_id=request.memory_id, changes=changes)

"""Embedding, search (semantic and chronological), get, list and history.

Search only ever returns ``ready`` memories whose vector row that matched is one of the
memory's settled rows: a half-written memory, or a row left by an interrupted update, is
never an answer. Retrieval (search, get) updates ``last_accessed`` (written behind the
reply, access.py); browsing (list, history) does not, so "not used for a long time" keeps
its meaning when a user scrolls or exports.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections import defaultdict
from dataclasses import dataclass
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
from memoria_memory.embedding import Embedder
from memoria_memory.memories import clock
from memoria_memory.memories.access import AccessLog
from memoria_memory.memories.documents import MemoryDocument
from memoria_memory.memories.repository import MemoryRepository
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
        vectors = await self._query_vectors(request)
        excluded = set(request.exclude_ids)
        per_query = min(MAX_ROWS_PER_QUERY, limit * ROWS_PER_RESULT + len(excluded))
        hits_by_query = await self.vectors.search(user_id, vectors, per_query)
        hits: defaultdict[str, list[VectorHit]] = defaultdict(list)
        for query_hits in hits_by_query:
            for hit in query_hits:
                if hit.memory_id not in excluded:
                    hits[hit.memory_id].append(hit)
        if not hits:
            return []
        minimum = (
            self.defaults.min_relevance if request.min_relevance is None else request.min_relevance
        )
        calibration = self.embedder.calibration
        documents = await self.repo.ready(user_id, list(hits), request.memory_type)
        scored: list[tuple[MemoryDocument, float]] = []
        for document in documents:
            if document.vector_collection != self.vectors.collection:
                continue
            settled = set(document.vector_ids)
            best = max((h.score for h in hits[document.id] if h.id in settled), default=None)
            if best is None:
                continue
            relevance = calibration.relevance(best)
            if relevance >= minimum:
                scored.append((document, relevance))
        scored.sort(key=lambda pair: (-pair[1], pair[0].id))
        return scored[:limit]

    async def _query_vectors(self, request: MemorySearch) -> list[Vector]:
        given = request.vectors
        if (
            given is not None
            and request.embedder == self.embedder.id
            and all(len(v) == self.embedder.dim for v in given)
        ):
            return given
        return await self.embedder.queries(list(request.queries))

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
            user_id, memory_type=request.memory_type, limit=request.limit + 1, before=before
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

"""Vector store port: the binding vectors of every user's memories.

One row per binding: a deterministic id (so writing it again is an upsert, never a
duplicate), the memory document it points to, the owner, and the vector. Every operation
takes the owner's user id and touches that user's rows only; adapters enforce it twice
(a per-user partition or partition key, and a user filter on every query), so a bug above
this port cannot reach another user's vectors.

Beside each row's vector, the store indexes the row's text (its binding and the memory's
content) for lexical search: BM25 over the terms of ``analysis.analyzed``, the same ids, the
same isolation, written and deleted together with the vector.

Dense scores are cosine similarities in [-1, 1] (vectors are L2-normalised by the
embedders; the metric is inner product); lexical scores are BM25 scores, 0 or more. One
contract suite (tests/contract/test_vectors.py) runs against every adapter.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

_NOT_NAME_CHARS = re.compile(r"[^a-z0-9]+")
COLLECTION_PREFIX = "memoria_bindings"
USER_ID_MAX_CHARS = 64
# User ids end up in filter expressions and broker keys: only characters that never need
# escaping there.
USER_ID_PATTERN = re.compile(rf"^[A-Za-z0-9._@-]{{1,{USER_ID_MAX_CHARS}}}$")
# Milvus' limit on a search's topk and a query's result window; the port's for every adapter.
MAX_SEARCH_LIMIT = 16_384
# BM25 parameters every adapter scores with (Milvus standalone's defaults): a memory's
# relevance is computed from its BM25 score, so it must not depend on who answered.
BM25_K1 = 1.2
BM25_B = 0.75


def valid_user_id(user_id: str) -> str:
    if not USER_ID_PATTERN.fullmatch(user_id):
        raise ValueError(f"invalid user id {user_id!r}: expected {USER_ID_PATTERN.pattern}")
    return user_id


def valid_limit(limit: int, name: str = "limit") -> int:
    """A search's (or a page's) size within what every adapter can serve."""
    if not 1 <= limit <= MAX_SEARCH_LIMIT:
        raise ValueError(f"{name} must be within 1..{MAX_SEARCH_LIMIT}, got {limit}")
    return limit


def collection_name(embedder_id: str, dim: int) -> str:
    """Vectors of different models (or dimensions) never share a collection: a query
    vector is only ever compared with vectors from the same model."""
    slug = _NOT_NAME_CHARS.sub("_", embedder_id.lower()).strip("_")
    return f"{COLLECTION_PREFIX}_{slug}_{dim}"


@dataclass(frozen=True)
class VectorRow:
    id: str
    memory_id: str
    vector: Sequence[float]
    text: str = ""
    """What lexical search matches the row by (its binding and the memory's content)."""


@dataclass(frozen=True)
class TextRow:
    """A row's lexical entry alone (to index the text of rows written before it was)."""

    id: str
    memory_id: str
    text: str


@dataclass(frozen=True)
class VectorHit:
    id: str
    memory_id: str
    score: float


class VectorStoreError(Exception):
    """The vector store failed or cannot be reached."""


class VectorStore(ABC):
    """One collection of one embedder's vectors."""

    @property
    @abstractmethod
    def collection(self) -> str: ...

    @property
    @abstractmethod
    def dim(self) -> int: ...

    @abstractmethod
    async def open(self) -> None:
        """Create the collection if it does not exist, and make it searchable."""

    @abstractmethod
    async def upsert(self, user_id: str, rows: Sequence[VectorRow]) -> None:
        """Write rows; an existing id is replaced. Searchable when this returns."""

    @abstractmethod
    async def search(
        self, user_id: str, vectors: Sequence[Sequence[float]], limit: int
    ) -> list[list[VectorHit]]:
        """For each query vector, the user's ``limit`` nearest rows, best first."""

    @abstractmethod
    async def lexical_search(
        self, user_id: str, texts: Sequence[str], limit: int
    ) -> list[list[VectorHit]]:
        """For each query text, the user's ``limit`` rows whose text matches it best by
        BM25, best first (a text without a term matches nothing)."""

    @abstractmethod
    async def index_text(self, user_id: str, rows: Sequence[TextRow]) -> None:
        """Write the lexical entries of rows (an existing id's is replaced); searchable
        when this returns."""

    @abstractmethod
    async def delete(self, user_id: str, ids: Sequence[str]) -> None:
        """Delete the user's rows (vector and text) with these ids; unknown ids (or another
        user's) are ignored."""

    @abstractmethod
    async def rows_of(self, user_id: str) -> list[tuple[str, str]]:
        """Every ``(row id, memory id)`` of the user (for the reconciler)."""

    @abstractmethod
    async def vectors_of(self, user_id: str) -> list[VectorRow]:
        """Every row of the user, vector included (to hold them closer: ``cached``)."""

    @abstractmethod
    async def analyzed_texts_of(self, user_id: str) -> list[TextRow]:
        """Every lexical entry of the user, its text as indexed (``analysis.analyzed``:
        terms joined by spaces), to hold them closer: ``cached``."""

    @abstractmethod
    async def close(self) -> None: ...

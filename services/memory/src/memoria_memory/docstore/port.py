"""Document store port: the subset of MongoDB that Memoria uses, with two adapters.

``mongo.py`` talks to MongoDB (production); ``sqlite.py`` keeps JSON documents in SQLite with
real indexes (embedded profile). One contract suite (tests/contract/test_docstore.py) runs
against both, so code above this port cannot tell them apart.

Documents hold JSON values only (str, int, float, bool, None, lists, objects) and a string
``_id``. Timestamps are stored as ISO-8601 UTC strings, which sort correctly as text.

Filters are a Mongo subset, on scalar fields (dotted paths reach into objects):
``{"f": v}``, ``{"f": {"$eq"|"$ne"|"$gt"|"$gte"|"$lt"|"$lte": v}}``,
``{"f": {"$in"|"$nin": [..]}}``, ``{"f": {"$exists": bool}}``,
``{"$and": [..]}``, ``{"$or": [..]}``. Several keys in a filter are ANDed.
Anything else raises :class:`UnsupportedFilter`.
Comparisons follow MongoDB's type bracketing (``1`` matches neither ``True`` nor ``"1"``;
``None`` matches null and missing fields); range operators take no ``None``. Filters are
meant for scalar fields: one on a field holding a list or an object is undefined (MongoDB
would match list elements, SQLite does not). Malformed documents or updates (no string
``_id``, non-JSON values, touching ``_id``) raise ``ValueError``/``TypeError``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, Literal

Document = dict[str, Any]
Filter = Mapping[str, Any]
SortSpec = Sequence[tuple[str, Literal[1, -1]]]


class DocumentStoreError(Exception):
    """Base of the store's own errors."""


class DuplicateKeyError(DocumentStoreError):
    """An insert collided with an existing ``_id`` or a unique index."""


class UnsupportedFilter(DocumentStoreError):
    """The filter uses an operator outside the supported subset."""


class Collection(ABC):
    """One named collection of documents."""

    name: str

    @abstractmethod
    async def ensure_index(self, keys: SortSpec, *, unique: bool = False) -> None:
        """Create the index if it does not exist (idempotent)."""

    @abstractmethod
    async def insert_one(self, document: Document) -> None:
        """Insert; ``document["_id"]`` is required. Raises :class:`DuplicateKeyError`."""

    @abstractmethod
    async def find_one(self, filter: Filter) -> Document | None: ...

    @abstractmethod
    async def find(
        self, filter: Filter, *, sort: SortSpec = (), limit: int = 0, skip: int = 0
    ) -> list[Document]:
        """Matching documents in ``sort`` order; ``limit=0`` means no limit."""

    @abstractmethod
    async def count(self, filter: Filter) -> int: ...

    @abstractmethod
    async def update_one(
        self,
        filter: Filter,
        *,
        set: Mapping[str, Any] | None = None,
        unset: Sequence[str] = (),
        inc: Mapping[str, int | float] | None = None,
    ) -> bool:
        """``$set``/``$unset``/``$inc`` on the first match, all or nothing; True when a
        document matched. ``inc`` adds to a number (a missing field counts as 0) in the
        same atomic write, so concurrent increments never lose one another."""

    @abstractmethod
    async def update_many(self, filter: Filter, *, set: Mapping[str, Any]) -> int:
        """``$set`` on every match; returns how many matched."""

    @abstractmethod
    async def replace_one(
        self, filter: Filter, document: Document, *, upsert: bool = False
    ) -> bool:
        """Replace the first match (keeping its ``_id``); with ``upsert`` insert when none.
        True when a document matched or was inserted."""

    @abstractmethod
    async def delete_one(self, filter: Filter) -> Document | None:
        """Delete the first match and return it (None when nothing matched)."""

    @abstractmethod
    async def delete_many(self, filter: Filter) -> int: ...


class DocumentStore(ABC):
    @abstractmethod
    def collection(self, name: str) -> Collection: ...

    @abstractmethod
    async def ping(self) -> None:
        """Raise when the store cannot be reached."""

    @abstractmethod
    async def close(self) -> None: ...

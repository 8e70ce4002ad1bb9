"""The cluster adapter: the port is a subset of MongoDB, so this mostly passes calls through.

Filters, documents and updates go through the same validators as the SQLite adapter's
before they reach the server, so both adapters refuse exactly the same input.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

import pymongo
import pymongo.errors

from memoria_memory.docstore.documents import check_document, check_update
from memoria_memory.docstore.fields import ID_FIELD, check_collection_name, check_keys
from memoria_memory.docstore.filters import check_page, parse_filter
from memoria_memory.docstore.port import (
    Collection,
    Document,
    DocumentStore,
    DocumentStoreError,
    DuplicateKeyError,
    Filter,
    SortSpec,
)

if TYPE_CHECKING:
    from pymongo.asynchronous.collection import AsyncCollection
    from pymongo.asynchronous.mongo_client import AsyncMongoClient

DEFAULT_DATABASE = "memoria"
_DATABASE_NAME = re.compile(r"[A-Za-z0-9_-]{1,63}")
# Server error codes that mean "this request cannot be applied", as opposed to an outage.
_OVERFLOW = 15
_TYPE_MISMATCH = 14  # $inc of a field that holds no number
_PATH_NOT_VIABLE = 28
_INDEX_OPTIONS_CONFLICT = 85
_INDEX_KEY_SPECS_CONFLICT = 86
_REQUEST_ERRORS = frozenset(
    {
        _TYPE_MISMATCH,
        _OVERFLOW,
        _PATH_NOT_VIABLE,
        _INDEX_OPTIONS_CONFLICT,
        _INDEX_KEY_SPECS_CONFLICT,
    }
)
# An upsert whose filter does not pin the _id is a replace, then an insert; the insert loses
# a race when another writer creates a match in between, and then the replace is retried.
_UPSERT_ATTEMPTS = 3


def database_from_url(url: str) -> str:
    """The database a MongoDB URL names in its path, or :data:`DEFAULT_DATABASE`."""
    name = unquote(urlsplit(url).path).strip("/") or DEFAULT_DATABASE
    if not _DATABASE_NAME.fullmatch(name):
        raise ValueError(f"database name {name!r} must match {_DATABASE_NAME.pattern}")
    return name


@contextmanager
def _translated_errors() -> Iterator[None]:
    try:
        yield
    except pymongo.errors.DuplicateKeyError as exc:
        raise DuplicateKeyError(str(exc)) from exc
    except pymongo.errors.OperationFailure as exc:
        if exc.code in _REQUEST_ERRORS:
            raise DocumentStoreError(str(exc)) from exc
        raise


class MongoCollection(Collection):
    def __init__(self, collection: AsyncCollection[Document]) -> None:
        self.name = collection.name
        self._collection = collection

    async def ensure_index(self, keys: SortSpec, *, unique: bool = False) -> None:
        checked = check_keys(keys, what="index")
        if not checked:
            raise ValueError("an index needs at least one key")
        with _translated_errors():
            await self._collection.create_index(checked, unique=unique)

    async def insert_one(self, document: Document) -> None:
        checked = check_document(document, require_id=True)
        with _translated_errors():
            await self._collection.insert_one(checked)

    async def find_one(self, filter: Filter) -> Document | None:
        parse_filter(filter)
        return await self._collection.find_one(filter)

    async def find(
        self, filter: Filter, *, sort: SortSpec = (), limit: int = 0, skip: int = 0
    ) -> list[Document]:
        parse_filter(filter)
        sort_keys = check_keys(sort, what="sort")
        check_page(limit, skip)
        cursor = self._collection.find(filter, sort=sort_keys or None, limit=limit, skip=skip)
        return await cursor.to_list(None)

    async def count(self, filter: Filter) -> int:
        parse_filter(filter)
        return await self._collection.count_documents(filter)

    async def update_one(
        self,
        filter: Filter,
        *,
        set: Mapping[str, Any] | None = None,
        unset: Sequence[str] = (),
        inc: Mapping[str, int | float] | None = None,
    ) -> bool:
        parse_filter(filter)
        assignments, removals, increments = check_update(set, unset, inc)
        update = _update(assignments, removals, increments)
        with _translated_errors():
            result = await self._collection.update_one(filter, update)
        return result.matched_count > 0

    async def update_many(self, filter: Filter, *, set: Mapping[str, Any]) -> int:
        parse_filter(filter)
        assignments, removals, _ = check_update(set, ())
        with _translated_errors():
            result = await self._collection.update_many(filter, _update(assignments, removals))
        return result.matched_count

    async def replace_one(
        self, filter: Filter, document: Document, *, upsert: bool = False
    ) -> bool:
        parse_filter(filter)
        replacement = check_document(document, require_id=upsert)
        # Without _id the server keeps the matched document's own, as the port promises.
        body = {key: value for key, value in replacement.items() if key != ID_FIELD}
        with _translated_errors():
            if upsert and filter.get(ID_FIELD) == replacement[ID_FIELD]:
                # The filter pins the _id, so the server's upsert inserts with that very _id
                # and the whole operation is atomic.
                result = await self._collection.replace_one(filter, body, upsert=True)
                return result.matched_count > 0 or result.upserted_id is not None
            return await self._replace_then_insert(filter, body, replacement, upsert=upsert)

    async def _replace_then_insert(
        self, filter: Filter, body: Document, replacement: Document, *, upsert: bool
    ) -> bool:
        for attempt in range(_UPSERT_ATTEMPTS):
            result = await self._collection.replace_one(filter, body)
            if result.matched_count:
                return True
            if not upsert:
                return False
            try:
                await self._collection.insert_one(dict(replacement))
            except pymongo.errors.DuplicateKeyError:
                if attempt == _UPSERT_ATTEMPTS - 1:
                    raise
                continue
            return True
        raise AssertionError("unreachable")  # pragma: no cover

    async def delete_one(self, filter: Filter) -> Document | None:
        parse_filter(filter)
        return await self._collection.find_one_and_delete(filter)

    async def delete_many(self, filter: Filter) -> int:
        parse_filter(filter)
        result = await self._collection.delete_many(filter)
        return result.deleted_count


def _update(
    assignments: Mapping[str, Any],
    removals: Sequence[str],
    increments: Mapping[str, int | float] | None = None,
) -> dict[str, Any]:
    update: dict[str, Any] = {}
    if assignments:
        update["$set"] = dict(assignments)
    if removals:
        update["$unset"] = dict.fromkeys(removals, "")
    if increments:
        update["$inc"] = dict(increments)
    return update


class MongoDocumentStore(DocumentStore):
    def __init__(self, client: AsyncMongoClient[Document], database: str) -> None:
        self._client = client
        self._database = client[database]

    @classmethod
    def from_url(cls, url: str, *, database: str | None = None) -> MongoDocumentStore:
        """A store on ``url``'s server; the client connects lazily, on first use."""
        # Looked up on the module at call time so that tinymongo.patch() (the contract
        # suite's in-process MongoDB) can stand in for the real client.
        client: AsyncMongoClient[Document] = pymongo.AsyncMongoClient(url)
        return cls(client, database or database_from_url(url))

    def collection(self, name: str) -> MongoCollection:
        return MongoCollection(self._database[check_collection_name(name)])

    async def ping(self) -> None:
        await self._client.admin.command("ping")

    async def close(self) -> None:
        await self._client.close()

"""The embedded adapter: JSON documents in one SQLite file, one table per collection.

One connection serves the whole store and an asyncio lock gives each operation exclusive
use of it, so a read-modify-write (update, replace, delete-and-return) can never interleave
with another task's statements, and no reader can see a transaction that later rolls back.
The file belongs to one process (ADR 0004); WAL mode still lets tools read it meanwhile.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiosqlite

from memoria_memory.docstore.documents import apply_update, check_document, check_update
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
from memoria_memory.docstore.sqlite_query import (
    WhereClause,
    index_name,
    index_statements,
    order_by,
    quote,
)

# Another process (a backup, the CLI) may hold the write lock for a moment.
_BUSY_TIMEOUT_MS = 5_000
# SQLite reads a negative LIMIT as "no limit".
_NO_LIMIT = -1
_UNIQUE_VIOLATIONS = frozenset({"SQLITE_CONSTRAINT_UNIQUE", "SQLITE_CONSTRAINT_PRIMARYKEY"})
_PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    # With WAL, NORMAL loses at most the last commits on power loss (never on a crash of
    # the process) and saves an fsync per commit; MongoDB's default journaling is similar.
    "PRAGMA synchronous=NORMAL",
    f"PRAGMA busy_timeout={_BUSY_TIMEOUT_MS}",
)


def _encode(document: Document) -> tuple[str, str]:
    body = {key: value for key, value in document.items() if key != ID_FIELD}
    return document[ID_FIELD], json.dumps(body, ensure_ascii=False, allow_nan=False)


def _decode(row: sqlite3.Row | tuple[Any, ...]) -> Document:
    # _id first, where MongoDB puts it too.
    return {ID_FIELD: row[0], **json.loads(row[1])}


@asynccontextmanager
async def _duplicates_as_port_error() -> AsyncIterator[None]:
    try:
        yield
    except sqlite3.IntegrityError as exc:
        if getattr(exc, "sqlite_errorname", None) in _UNIQUE_VIOLATIONS:
            raise DuplicateKeyError(str(exc)) from exc
        raise


class SqliteCollection(Collection):
    def __init__(self, store: SqliteDocumentStore, name: str) -> None:
        self.name = check_collection_name(name)
        self._store = store
        self._table = quote(name)

    async def ensure_index(self, keys: SortSpec, *, unique: bool = False) -> None:
        checked = check_keys(keys, what="index")
        if not checked:
            raise ValueError("an index needs at least one key")
        name = index_name(self.name, checked)
        async with self._store._transaction(self.name) as db, _duplicates_as_port_error():
            async with db.execute(f"PRAGMA index_list({self._table})") as cursor:
                existing = {row[1]: bool(row[2]) for row in await cursor.fetchall()}
            if name in existing and existing[name] != unique:
                raise DocumentStoreError(
                    f"index {name} already exists with unique={existing[name]}"
                )
            for statement in index_statements(self.name, checked, unique=unique):
                await db.execute(statement)

    async def insert_one(self, document: Document) -> None:
        row = _encode(check_document(document, require_id=True))
        async with self._store._session(self.name) as db, _duplicates_as_port_error():
            await db.execute(f"INSERT INTO {self._table} (id, doc) VALUES (?, ?)", row)

    async def find_one(self, filter: Filter) -> Document | None:
        found = await self.find(filter, limit=1)
        return found[0] if found else None

    async def find(
        self, filter: Filter, *, sort: SortSpec = (), limit: int = 0, skip: int = 0
    ) -> list[Document]:
        sort_keys = check_keys(sort, what="sort")
        check_page(limit, skip)
        where = WhereClause()
        sql = f"SELECT id, doc FROM {self._table} WHERE {where.compile(parse_filter(filter))}"
        if sort_keys:
            sql += f" ORDER BY {order_by(sort_keys)}"
        sql += " LIMIT ? OFFSET ?"
        params = [*where.params, limit or _NO_LIMIT, skip]
        async with self._store._session(self.name) as db:
            rows = await db.execute_fetchall(sql, params)
        return [_decode(row) for row in rows]

    async def count(self, filter: Filter) -> int:
        where = WhereClause()
        sql = f"SELECT COUNT(*) FROM {self._table} WHERE {where.compile(parse_filter(filter))}"
        async with self._store._session(self.name) as db:
            rows = list(await db.execute_fetchall(sql, where.params))
        return int(rows[0][0])

    async def update_one(
        self,
        filter: Filter,
        *,
        set: Mapping[str, Any] | None = None,
        unset: Sequence[str] = (),
    ) -> bool:
        assignments, removals = check_update(set, unset)
        return await self._update(filter, assignments, removals, first_only=True) > 0

    async def update_many(self, filter: Filter, *, set: Mapping[str, Any]) -> int:
        assignments, removals = check_update(set, ())
        return await self._update(filter, assignments, removals, first_only=False)

    async def replace_one(
        self, filter: Filter, document: Document, *, upsert: bool = False
    ) -> bool:
        replacement = check_document(document, require_id=upsert)
        where = WhereClause()
        select = f"SELECT id FROM {self._table} WHERE {where.compile(parse_filter(filter))}"
        async with self._store._transaction(self.name) as db, _duplicates_as_port_error():
            rows = list(await db.execute_fetchall(select + " LIMIT 1", where.params))
            if rows:
                # The match keeps its _id whatever the replacement says, as the port promises.
                _, body = _encode({**replacement, ID_FIELD: rows[0][0]})
                await db.execute(
                    f"UPDATE {self._table} SET doc = ? WHERE id = ?", (body, rows[0][0])
                )
                return True
            if not upsert:
                return False
            await db.execute(
                f"INSERT INTO {self._table} (id, doc) VALUES (?, ?)", _encode(replacement)
            )
            return True

    async def delete_one(self, filter: Filter) -> Document | None:
        where = WhereClause()
        select = f"SELECT id, doc FROM {self._table} WHERE {where.compile(parse_filter(filter))}"
        async with self._store._transaction(self.name) as db:
            rows = list(await db.execute_fetchall(select + " LIMIT 1", where.params))
            if not rows:
                return None
            await db.execute(f"DELETE FROM {self._table} WHERE id = ?", (rows[0][0],))
        return _decode(rows[0])

    async def delete_many(self, filter: Filter) -> int:
        where = WhereClause()
        sql = f"DELETE FROM {self._table} WHERE {where.compile(parse_filter(filter))}"
        async with self._store._session(self.name) as db:
            cursor = await db.execute(sql, where.params)
            deleted = cursor.rowcount
            await cursor.close()
        return deleted

    async def _update(
        self, filter: Filter, set: Mapping[str, Any], unset: Sequence[str], *, first_only: bool
    ) -> int:
        where = WhereClause()
        select = f"SELECT id, doc FROM {self._table} WHERE {where.compile(parse_filter(filter))}"
        if first_only:
            select += " LIMIT 1"
        async with self._store._transaction(self.name) as db, _duplicates_as_port_error():
            rows = list(await db.execute_fetchall(select, where.params))
            changed: list[tuple[str, str]] = []
            for row in rows:
                document = _decode(row)
                apply_update(document, set, unset)
                identifier, body = _encode(document)
                changed.append((body, identifier))
            await db.executemany(f"UPDATE {self._table} SET doc = ? WHERE id = ?", changed)
        return len(rows)


class SqliteDocumentStore(DocumentStore):
    def __init__(self, connection: aiosqlite.Connection) -> None:
        self._connection = connection
        self._lock = asyncio.Lock()
        self._tables: set[str] = set()

    @classmethod
    async def open(cls, path: Path) -> SqliteDocumentStore:
        """Open (creating when needed) the database file and its parent directories."""
        path.parent.mkdir(parents=True, exist_ok=True)
        # Autocommit mode: single statements commit on their own, and multi-statement
        # operations open their transaction explicitly (see ``_transaction``).
        connection = await aiosqlite.connect(path, isolation_level=None)
        try:
            for pragma in _PRAGMAS:
                await connection.execute_fetchall(pragma)
        except BaseException:
            await connection.close()
            raise
        return cls(connection)

    def collection(self, name: str) -> SqliteCollection:
        return SqliteCollection(self, name)

    async def ping(self) -> None:
        async with self._lock:
            await self._connection.execute_fetchall("SELECT 1")

    async def close(self) -> None:
        async with self._lock:
            await self._connection.close()

    @asynccontextmanager
    async def _session(self, table: str) -> AsyncIterator[aiosqlite.Connection]:
        """Exclusive use of the connection, with ``table`` created when it is new."""
        async with self._lock:
            if table not in self._tables:
                await self._connection.execute(
                    f"CREATE TABLE IF NOT EXISTS {quote(table)} "
                    "(id TEXT PRIMARY KEY, doc TEXT NOT NULL)"
                )
                self._tables.add(table)
            yield self._connection

    @asynccontextmanager
    async def _transaction(self, table: str) -> AsyncIterator[aiosqlite.Connection]:
        """Like :meth:`_session`, inside one transaction that any exception rolls back."""
        async with self._session(table) as db:
            # IMMEDIATE takes the write lock up front, so a second process cannot make the
            # transaction fail half-way with SQLITE_BUSY after it has read.
            await db.execute("BEGIN IMMEDIATE")
            try:
                yield db
                await db.commit()
            except BaseException:
                if db.in_transaction:
                    # Shielded: a cancelled caller must not leave the transaction open
                    # for the next operation on this connection.
                    await asyncio.shield(db.rollback())
                raise

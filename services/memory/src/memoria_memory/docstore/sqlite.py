"""The embedded adapter: JSON documents in one SQLite file, one table per collection.

One connection serves the whole store and an asyncio lock gives each operation exclusive
use of it: each operation is one function run start to end (statements, transaction,
commit), so a read-modify-write (update, replace, delete-and-return) can never interleave
with another operation, and no reader can see a transaction that later rolls back.

Where it runs: an operation on one document named by its ``_id`` (and every insert) is a
primary-key lookup that takes microseconds, so it runs right on the event loop; handing it
to another thread and back would cost ten times more CPU than the statement. Anything that
may scan (queries, counts, deletes of many) runs on the connection's own thread, so a long
one never stalls the loop. Either way an operation makes at most one hand-over.
The file belongs to one process (ADR 0004); WAL mode still lets tools read it meanwhile.

Checkpoints (copying the write-ahead log back into the database file) are the store's own
job, about once a second after writes, on a connection and thread of their own: SQLite's
automatic checkpoint would run inside whichever commit crosses its threshold, and an insert
on the event loop would then stall the loop for milliseconds (``bench/sqlite_writes.py``,
docs/benchmarks.md), and one on the store's own thread
would hold every operation behind it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

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
from memoria_runtime.health import stop_task

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
    "PRAGMA wal_autocheckpoint=0",  # checkpoints run on the store's thread (module doc)
    # The log is reused from its start after a checkpoint but keeps its size; after a burst
    # of writes (a second's worth between checkpoints) it is cut back to this.
    f"PRAGMA journal_size_limit={64 * 1024 * 1024}",
)
CHECKPOINT_INTERVAL_S = 1.0

log = logging.getLogger("memoria.memory.sqlite")


def _encode(document: Document) -> tuple[str, str]:
    body = {key: value for key, value in document.items() if key != ID_FIELD}
    return document[ID_FIELD], json.dumps(body, ensure_ascii=False, allow_nan=False)


def _decode(row: sqlite3.Row | tuple[Any, ...]) -> Document:
    # _id first, where MongoDB puts it too.
    return {ID_FIELD: row[0], **json.loads(row[1])}


_T = TypeVar("_T")
Operation = Callable[[sqlite3.Connection], _T]


def _keyed(filter: Filter) -> bool:
    """The filter names one document by its ``_id``: at most one row, found by the key."""
    return isinstance(filter.get(ID_FIELD), str)


@contextmanager
def _duplicates_as_port_error() -> Iterator[None]:
    try:
        yield
    except sqlite3.IntegrityError as exc:
        if getattr(exc, "sqlite_errorname", None) in _UNIQUE_VIOLATIONS:
            raise DuplicateKeyError(str(exc)) from exc
        raise


@contextmanager
def _transaction(db: sqlite3.Connection) -> Iterator[None]:
    """One transaction that any exception rolls back. IMMEDIATE takes the write lock up
    front, so a second process cannot make it fail half-way with SQLITE_BUSY after it has
    read. Runs on the connection's thread, never interrupted by a cancelled caller."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


class _Checkpointer:
    """Folds the log into the database file from a connection and thread of its own, so that
    neither the event loop nor the store's connection waits for it: a PASSIVE checkpoint runs
    beside readers and writers, copying what no reader (another process, a backup) still
    needs, and never waits for them; the next round takes the rest."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memoria-sqlite-ckpt")
        self._db: sqlite3.Connection | None = None

    async def run(self) -> None:
        await asyncio.get_running_loop().run_in_executor(self._thread, self._checkpoint)

    async def close(self) -> None:
        try:
            await asyncio.get_running_loop().run_in_executor(self._thread, self._close)
        finally:
            self._thread.shutdown(wait=False)

    def _checkpoint(self) -> None:
        if self._db is None:
            self._db = _connect(self._path)
        self._db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()

    def _close(self) -> None:
        if self._db is not None:
            self._db.close()


def _connect(path: Path) -> sqlite3.Connection:
    # Autocommit mode: single statements commit on their own, and multi-statement
    # operations open their transaction explicitly (see ``_transaction``).
    # Used from the loop's thread and from its own, never from both at once (the lock).
    connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        for pragma in _PRAGMAS:
            connection.execute(pragma).fetchall()
    except BaseException:
        connection.close()
        raise
    return connection


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
        statements = index_statements(self.name, checked, unique=unique)

        def run(db: sqlite3.Connection) -> None:
            with _transaction(db), _duplicates_as_port_error():
                rows = db.execute(f"PRAGMA index_list({self._table})").fetchall()
                existing = {row[1]: bool(row[2]) for row in rows}
                if name in existing and existing[name] != unique:
                    raise DocumentStoreError(
                        f"index {name} already exists with unique={existing[name]}"
                    )
                for statement in statements:
                    db.execute(statement)

        await self._store._run(self.name, run)

    async def insert_one(self, document: Document) -> None:
        row = _encode(check_document(document, require_id=True))

        def run(db: sqlite3.Connection) -> None:
            with _duplicates_as_port_error():
                db.execute(f"INSERT INTO {self._table} (id, doc) VALUES (?, ?)", row)

        await self._store._run(self.name, run, inline=True)

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

        def run(db: sqlite3.Connection) -> list[Document]:
            return [_decode(row) for row in db.execute(sql, params)]

        return await self._store._run(self.name, run, inline=_keyed(filter))

    async def count(self, filter: Filter) -> int:
        where = WhereClause()
        sql = f"SELECT COUNT(*) FROM {self._table} WHERE {where.compile(parse_filter(filter))}"

        def run(db: sqlite3.Connection) -> int:
            return int(db.execute(sql, where.params).fetchone()[0])

        return await self._store._run(self.name, run)

    async def update_one(
        self,
        filter: Filter,
        *,
        set: Mapping[str, Any] | None = None,
        unset: Sequence[str] = (),
        inc: Mapping[str, int | float] | None = None,
    ) -> bool:
        assignments, removals, increments = check_update(set, unset, inc)
        updated = await self._update(filter, assignments, removals, increments, first_only=True)
        return updated > 0

    async def update_many(self, filter: Filter, *, set: Mapping[str, Any]) -> int:
        assignments, removals, _ = check_update(set, ())
        return await self._update(filter, assignments, removals, {}, first_only=False)

    async def replace_one(
        self, filter: Filter, document: Document, *, upsert: bool = False
    ) -> bool:
        replacement = check_document(document, require_id=upsert)
        where = WhereClause()
        select = f"SELECT id FROM {self._table} WHERE {where.compile(parse_filter(filter))}"

        def run(db: sqlite3.Connection) -> bool:
            with _transaction(db), _duplicates_as_port_error():
                row = db.execute(select + " LIMIT 1", where.params).fetchone()
                if row is not None:
                    # The match keeps its _id whatever the replacement says, as the port
                    # promises.
                    _, body = _encode({**replacement, ID_FIELD: row[0]})
                    db.execute(f"UPDATE {self._table} SET doc = ? WHERE id = ?", (body, row[0]))
                    return True
                if not upsert:
                    return False
                db.execute(
                    f"INSERT INTO {self._table} (id, doc) VALUES (?, ?)", _encode(replacement)
                )
                return True

        return await self._store._run(self.name, run, inline=_keyed(filter))

    async def delete_one(self, filter: Filter) -> Document | None:
        where = WhereClause()
        select = f"SELECT id, doc FROM {self._table} WHERE {where.compile(parse_filter(filter))}"

        def run(db: sqlite3.Connection) -> Document | None:
            with _transaction(db):
                row = db.execute(select + " LIMIT 1", where.params).fetchone()
                if row is None:
                    return None
                db.execute(f"DELETE FROM {self._table} WHERE id = ?", (row[0],))
            return _decode(row)

        return await self._store._run(self.name, run, inline=_keyed(filter))

    async def delete_many(self, filter: Filter) -> int:
        where = WhereClause()
        sql = f"DELETE FROM {self._table} WHERE {where.compile(parse_filter(filter))}"

        def run(db: sqlite3.Connection) -> int:
            return db.execute(sql, where.params).rowcount

        return await self._store._run(self.name, run)

    async def _update(
        self,
        filter: Filter,
        set: Mapping[str, Any],
        unset: Sequence[str],
        inc: Mapping[str, int | float],
        *,
        first_only: bool,
    ) -> int:
        """Read, change in Python and write back in one transaction under the store's lock:
        no other write can come between the read and the write, which is what makes an
        increment atomic here."""
        where = WhereClause()
        select = f"SELECT id, doc FROM {self._table} WHERE {where.compile(parse_filter(filter))}"
        if first_only:
            select += " LIMIT 1"

        def run(db: sqlite3.Connection) -> int:
            with _transaction(db), _duplicates_as_port_error():
                rows = db.execute(select, where.params).fetchall()
                changed: list[tuple[str, str]] = []
                for row in rows:
                    document = _decode(row)
                    apply_update(document, set, unset, inc)
                    identifier, body = _encode(document)
                    changed.append((body, identifier))
                db.executemany(f"UPDATE {self._table} SET doc = ? WHERE id = ?", changed)
            return len(rows)

        return await self._store._run(self.name, run, inline=_keyed(filter))


class SqliteDocumentStore(DocumentStore):
    def __init__(
        self,
        path: Path,
        connection: sqlite3.Connection,
        thread: ThreadPoolExecutor,
        checkpoint_interval_s: float = CHECKPOINT_INTERVAL_S,
    ) -> None:
        self._connection = connection
        self._thread = thread  # one: the operations that may take long run there
        self._lock = asyncio.Lock()
        self._tables: set[str] = set()
        self._checkpointer = _Checkpointer(path)
        # Counted from here, not from when the task first runs: writes that never yield
        # to the loop may come before it.
        unchanged_since = connection.total_changes
        self._checkpoints = asyncio.create_task(
            self._checkpoint_forever(checkpoint_interval_s, unchanged_since),
            name="sqlite checkpoints",
        )

    @classmethod
    async def open(
        cls, path: Path, *, checkpoint_interval_s: float = CHECKPOINT_INTERVAL_S
    ) -> SqliteDocumentStore:
        """Open (creating when needed) the database file and its parent directories."""
        path.parent.mkdir(parents=True, exist_ok=True)
        thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memoria-sqlite")
        try:
            connection = await asyncio.get_running_loop().run_in_executor(thread, _connect, path)
        except BaseException:
            thread.shutdown(wait=False)
            raise
        return cls(path, connection, thread, checkpoint_interval_s)

    def collection(self, name: str) -> SqliteCollection:
        return SqliteCollection(self, name)

    async def ping(self) -> None:
        await self._run(None, lambda db: db.execute("SELECT 1").fetchall(), inline=True)

    async def close(self) -> None:
        await stop_task(self._checkpoints)
        try:
            await self._checkpointer.close()
        except sqlite3.Error as exc:
            log.warning("could not close the SQLite checkpoint connection: %s", exc)
        try:
            # Closing the last connection checkpoints what is left in the log.
            await self._run(None, lambda db: db.close())
        finally:
            self._thread.shutdown(wait=False)

    async def _checkpoint_forever(self, interval_s: float, checkpointed_at: int) -> None:
        while True:
            await asyncio.sleep(interval_s)
            changes = self._connection.total_changes
            if changes == checkpointed_at:
                continue
            try:
                await self._checkpointer.run()
            except sqlite3.Error as exc:
                log.warning("could not checkpoint the SQLite write-ahead log: %s", exc)
                continue
            checkpointed_at = changes

    async def _run(
        self, table: str | None, operation: Operation[_T], *, inline: bool = False
    ) -> _T:
        """``operation`` with exclusive use of the connection, ``table`` created first when it
        is new: ``inline`` on the event loop, else on the connection's thread."""

        def call() -> _T:
            db = self._connection
            if table is not None and table not in self._tables:
                db.execute(
                    f"CREATE TABLE IF NOT EXISTS {quote(table)} "
                    "(id TEXT PRIMARY KEY, doc TEXT NOT NULL)"
                )
                self._tables.add(table)
            return operation(db)

        await self._lock.acquire()
        if inline:
            try:
                return call()
            finally:
                self._lock.release()
        try:
            running = self._thread.submit(call)
        except BaseException:
            self._lock.release()
            raise
        loop = asyncio.get_running_loop()
        # The connection is free again when the operation has ended, not when its caller
        # stops waiting: a cancelled caller leaves it to finish (commit or roll back) first.
        running.add_done_callback(lambda _: loop.call_soon_threadsafe(self._lock.release))
        return await asyncio.wrap_future(running)

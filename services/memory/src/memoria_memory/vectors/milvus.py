"""The vector store on Milvus: a milvus-lite server (embedded profile) or Milvus
standalone/distributed (cluster profile), both spoken to over gRPC with ``AsyncMilvusClient``.

Per-user isolation is enforced three times over:

* the primary key is ``<user id>/<row id>``, so one user's rows can never be overwritten
  or deleted through another user's ids (milvus-lite's upsert replaces a primary key in
  *every* partition, so a bare row id would let user B's upsert clobber user A's row);
* ``partition`` mode puts each user in a partition of their own and names it on every call
  (``partition_key`` mode leaves the routing to Milvus' partition key on ``user_id``);
* searches and scans also filter on ``user_id == "<user>"``.

Each row's text lives in a sibling collection (``<collection>_lexical``: the same keys and
partitions, the analysed text, and the sparse vector Milvus' BM25 function makes of it), so
the dense collection of stores written before lexical search keeps its schema and its rows;
``lexical_index.backfill`` gives their rows a text. Writes go to the dense collection first:
a row's text never exists without its vector.

Filter expressions are built from validated strings only (see the ``*_PATTERN`` constants);
nothing else ever reaches an expression.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import grpc
from pymilvus import (
    AsyncMilvusClient,
    DataType,
    Function,
    FunctionType,
    MilvusClient,
    MilvusException,
)

from memoria_memory.vectors.analysis import analyzed
from memoria_memory.vectors.port import (
    BM25_B,
    BM25_K1,
    USER_ID_MAX_CHARS,
    TextRow,
    VectorHit,
    VectorRow,
    VectorStore,
    VectorStoreError,
    valid_limit,
    valid_user_id,
)
from memoria_runtime.settings import VectorIsolation

ID_FIELD = "id"
USER_FIELD = "user_id"
MEMORY_FIELD = "memory_id"
VECTOR_FIELD = "vector"
TEXT_FIELD = "text"
SPARSE_FIELD = "sparse"
LEXICAL_SUFFIX = "_lexical"
TEXT_MAX_BYTES = 65_535  # analysis.ANALYZED_MAX_CHARS characters fit
# Terms are analysed in process (analysis.py); Milvus' standard tokenizer splits them on
# spaces and changes nothing else. milvus-lite knows no "whitespace" tokenizer.
TEXT_ANALYZER = {"tokenizer": "standard"}
LEXICAL_INDEX_TYPE = "SPARSE_INVERTED_INDEX"
LEXICAL_METRIC_TYPE = "BM25"

ROW_ID_MAX_CHARS = 128
MEMORY_ID_MAX_CHARS = 64
# Not a character of any user id, so "<user>/<row id>" splits back unambiguously.
KEY_SEPARATOR = "/"
PRIMARY_KEY_MAX_CHARS = USER_ID_MAX_CHARS + len(KEY_SEPARATOR) + ROW_ID_MAX_CHARS
# Row ids end up inside filter expressions: only characters that never need escaping.
ROW_ID_PATTERN = re.compile(rf"^[A-Za-z0-9._:@=+-]{{1,{ROW_ID_MAX_CHARS}}}$")

# Milvus partition names allow letters, digits and underscores; a hash keeps every user id
# (dots, @, dashes) representable and the name short. 128 bits: collisions are not a concern.
PARTITION_PREFIX = "u_"
PARTITION_HASH_HEX_CHARS = 32

METRIC_TYPE = "IP"  # vectors are L2-normalised, so inner product = cosine similarity
# FLAT (exact search) measured fastest in milvus-lite at our scale (100k memories of 50
# users, per-user partition + filter; HNSW was slower there). On Milvus
# standalone/distributed with many rows per partition, pass HNSW (or AUTOINDEX) instead.
DEFAULT_INDEX_TYPE = "FLAT"
# "Strong" makes a search see every write acknowledged before it, from any process: the
# port's "searchable when upsert returns". milvus-lite applies writes synchronously anyway.
DEFAULT_CONSISTENCY_LEVEL = "Strong"

ROWS_PAGE_SIZE = 4_096  # rows_of reads the user's rows in pages of this size
WRITE_BATCH_ROWS = 1_000  # rows per upsert request: well below gRPC message limits
DELETE_BATCH_IDS = 1_000  # ids per delete expression
CONNECT_TIMEOUT_S = 10.0
CREATE_RACE_WAIT_S = 5.0
CREATE_RACE_POLL_S = 0.05
REQUEST_TIMEOUT_S = 30.0
# pymilvus pings an idle channel every 10 s; milvus-lite's gRPC server allows one ping per
# 5 minutes without calls and answers the third with GOAWAY "too_many_pings", which fails
# the next request of a long-idle client. Pinging only during calls keeps idle channels
# alive there, and Milvus standalone accepts it too. pymilvus shares one channel per
# address and token, so every client in a process must be made by the two functions below.
GRPC_OPTIONS: dict[str, int] = {
    "grpc.keepalive_time_ms": 60_000,
    "grpc.keepalive_permit_without_calls": 0,
}


def async_client(
    uri: str, token: str | None = None, timeout: float = CONNECT_TIMEOUT_S
) -> AsyncMilvusClient:
    """An asyncio Milvus client with Memoria's channel options."""
    return AsyncMilvusClient(uri=uri, token=token or "", timeout=timeout, grpc_options=GRPC_OPTIONS)


def sync_client(uri: str, token: str | None = None, timeout: float = CONNECT_TIMEOUT_S) -> Any:
    """A blocking Milvus client with Memoria's channel options (pymilvus types it loosely)."""
    return MilvusClient(uri=uri, token=token or "", timeout=timeout, grpc_options=GRPC_OPTIONS)


# Status code pymilvus uses when it cannot open a channel to the server.
_CONNECT_FAILED = 2
# Milvus' "collection not loaded" (milvus-lite and standalone alike).
_COLLECTION_NOT_LOADED = 101

_T = TypeVar("_T")


def partition_name(user_id: str) -> str:
    """The user's partition in ``partition`` mode."""
    digest = hashlib.sha256(valid_user_id(user_id).encode()).hexdigest()
    return PARTITION_PREFIX + digest[:PARTITION_HASH_HEX_CHARS]


def _valid_row_id(row_id: str) -> str:
    if not ROW_ID_PATTERN.fullmatch(row_id):
        raise ValueError(f"invalid vector row id {row_id!r}: expected {ROW_ID_PATTERN.pattern}")
    return row_id


def _string_list(values: Sequence[str]) -> str:
    """A Milvus list literal of already validated strings."""
    return "[" + ", ".join(f'"{value}"' for value in values) + "]"


def lexical_collection_name(collection: str) -> str:
    """Where the texts of ``collection``'s rows are indexed."""
    return collection + LEXICAL_SUFFIX


def _appears(exists: Callable[[], bool]) -> bool:
    """Whether ``exists`` turns true within :data:`CREATE_RACE_WAIT_S`: milvus-lite fails a
    create that races another one before the winner's collection is listed."""
    deadline = time.monotonic() + CREATE_RACE_WAIT_S
    while not exists():
        if time.monotonic() >= deadline:
            return False
        time.sleep(CREATE_RACE_POLL_S)
    return True


def _batches(items: Sequence[_T], size: int) -> Iterator[Sequence[_T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _redact(uri: str) -> str:
    """The URI without credentials, fit for an error message."""
    parts = urlsplit(uri)
    if parts.username is None and parts.password is None:
        return uri
    host = parts.hostname or ""
    netloc = host if parts.port is None else f"{host}:{parts.port}"
    return urlunsplit(parts._replace(netloc=f"***@{netloc}"))


class MilvusVectorStore(VectorStore):
    """One Milvus collection of one embedder's vectors (``id``, ``user_id``, ``memory_id``,
    ``vector``).

    ``flush_after_rows``: flush once this many rows were written since the last flush.
    milvus-lite searches its unflushed rows slowly (a search slows down with every row left
    unflushed), while a flush costs many single-row upserts; so the embedded profile flushes
    in small batches, never per upsert. ``None`` (for Milvus standalone, which seals
    segments itself) never flushes. Rows are searchable right after ``upsert`` either way:
    milvus-lite applies writes synchronously, Milvus standalone is read with ``Strong``
    consistency.
    """

    def __init__(
        self,
        uri: str,
        collection: str,
        dim: int,
        *,
        token: str | None = None,
        isolation: VectorIsolation = "partition",
        index_type: str = DEFAULT_INDEX_TYPE,
        consistency_level: str = DEFAULT_CONSISTENCY_LEVEL,
        flush_after_rows: int | None = None,
        page_size: int = ROWS_PAGE_SIZE,
        timeout: float = REQUEST_TIMEOUT_S,
    ) -> None:
        if dim < 1:
            raise ValueError(f"dim must be positive, got {dim}")
        valid_limit(page_size, "page_size")
        self._uri = uri
        self._token = token
        self._collection = collection
        self._lexical = lexical_collection_name(collection)
        self._dim = dim
        self._isolation: VectorIsolation = isolation
        self._index_type = index_type
        self._consistency = consistency_level
        self._flush_after = flush_after_rows
        self._page_size = page_size
        self._timeout = timeout
        self._client: Any = None  # AsyncMilvusClient once open
        # (collection, partition) known to exist (this adapter never drops one)
        self._partitions: set[tuple[str, str]] = set()
        self._unflushed: dict[str, int] = {}  # rows written since the last flush, by collection

    @property
    def collection(self) -> str:
        return self._collection

    @property
    def dim(self) -> int:
        return self._dim

    # -- lifecycle ---------------------------------------------------------------------------

    async def open(self) -> None:
        if self._client is not None:
            return
        self._partitions.clear()  # the collection may have been dropped while closed
        client = async_client(self._uri, self._token)
        try:
            with self._translate("open the collection"):
                for name in (self._collection, self._lexical):
                    if not await client.has_collection(name, timeout=self._timeout):
                        await asyncio.to_thread(self._create_collection, name)
                    if not await client.list_indexes(name, timeout=self._timeout):
                        await asyncio.to_thread(self._create_index, name)
                    self._check_schema(
                        name, await client.describe_collection(name, timeout=self._timeout)
                    )
                    # Also needed after every server restart: milvus-lite reopens
                    # collections released and refuses to search them until loaded again.
                    await client.load_collection(name, timeout=self._timeout)
        except BaseException:
            await client.close()
            raise
        self._client = client

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    # -- port --------------------------------------------------------------------------------

    async def upsert(self, user_id: str, rows: Sequence[VectorRow]) -> None:
        valid_user_id(user_id)
        # One entry per id, the last one winning (Milvus rejects a batch with repeated keys).
        latest = {self._key(user_id, row.id): row for row in rows}
        records = [self._record(user_id, key, row) for key, row in latest.items()]
        if not records:
            return
        await self._write(user_id, self._collection, records, "write vectors")
        texts = [TextRow(row.id, row.memory_id, row.text) for row in latest.values()]
        await self.index_text(user_id, texts)

    async def index_text(self, user_id: str, rows: Sequence[TextRow]) -> None:
        valid_user_id(user_id)
        latest = {self._key(user_id, row.id): row for row in rows}
        records = [self._text_record(user_id, key, row) for key, row in latest.items()]
        if records:
            await self._write(user_id, self._lexical, records, "index texts")

    async def _write(
        self, user_id: str, collection: str, records: list[dict[str, Any]], action: str
    ) -> None:
        client = self._require_client()
        partition = await self._user_partition(user_id, create=True)
        target = {} if partition is None else {"partition_name": partition}
        with self._translate(action):
            for batch in _batches(records, WRITE_BATCH_ROWS):
                await client.upsert(collection, list(batch), timeout=self._timeout, **target)
            await self._maybe_flush(client, collection, len(records))

    async def search(
        self, user_id: str, vectors: Sequence[Sequence[float]], limit: int
    ) -> list[list[VectorHit]]:
        valid_user_id(user_id)
        valid_limit(limit)
        queries = [self._vector(vector) for vector in vectors]
        if not queries:
            return []
        client = self._require_client()
        partition = await self._user_partition(user_id, create=False)
        if self._isolation == "partition" and partition is None:
            return [[] for _ in queries]  # the user never stored a vector
        with self._translate("search"):
            results = await self._loaded(
                self._collection,
                lambda: client.search(
                    self._collection,
                    data=queries,  # every query vector in one request (nq > 1)
                    limit=limit,
                    filter=self._user_filter(user_id),
                    output_fields=[MEMORY_FIELD],
                    search_params={"metric_type": METRIC_TYPE},
                    partition_names=None if partition is None else [partition],
                    consistency_level=self._consistency,
                    timeout=self._timeout,
                ),
            )
        return self._hits(user_id, results, negated=False)

    async def lexical_search(
        self, user_id: str, texts: Sequence[str], limit: int
    ) -> list[list[VectorHit]]:
        valid_user_id(user_id)
        valid_limit(limit)
        queries = [analyzed(text) for text in texts]
        asked = [query for query in queries if query]
        if not asked:
            return [[] for _ in queries]
        client = self._require_client()
        partition = await self._user_partition(user_id, create=False, collection=self._lexical)
        if self._isolation == "partition" and partition is None:
            return [[] for _ in queries]
        with self._translate("search texts"):
            results = await self._loaded(
                self._lexical,
                lambda: client.search(
                    self._lexical,
                    data=asked,  # Milvus' BM25 function turns each text into its terms
                    anns_field=SPARSE_FIELD,
                    limit=limit,
                    filter=self._user_filter(user_id),
                    output_fields=[MEMORY_FIELD],
                    search_params={"metric_type": LEXICAL_METRIC_TYPE},
                    partition_names=None if partition is None else [partition],
                    consistency_level=self._consistency,
                    timeout=self._timeout,
                ),
            )
        # milvus-lite returns BM25 scores negated (smaller is better), standalone as they are.
        answered = iter(self._hits(user_id, results, negated=True))
        return [next(answered) if query else [] for query in queries]

    def _hits(self, user_id: str, results: Any, *, negated: bool) -> list[list[VectorHit]]:
        return [
            [
                VectorHit(
                    id=self._row_id(user_id, hit["id"]),
                    memory_id=str(hit["entity"][MEMORY_FIELD]),
                    score=abs(float(hit["distance"])) if negated else float(hit["distance"]),
                )
                for hit in hits
            ]
            for hits in results
        ]

    async def delete(self, user_id: str, ids: Sequence[str]) -> None:
        valid_user_id(user_id)
        keys = list(dict.fromkeys(self._key(user_id, row_id) for row_id in ids))
        if not keys:
            return
        client = self._require_client()
        partition = await self._user_partition(user_id, create=False)
        if self._isolation == "partition" and partition is None:
            return  # nothing of the user's was ever stored
        if partition is not None:  # the texts' partition too, to delete from
            await self._user_partition(user_id, create=True)
        # Texts first: a row's text never outlives its vector, even when a delete fails
        # half way (and the memory's delete is finished again).
        with self._translate("delete vectors"):
            for collection in (self._lexical, self._collection):
                for batch in _batches(keys, DELETE_BATCH_IDS):
                    await self._delete_keys(client, collection, partition, user_id, batch)

    async def _delete_keys(
        self,
        client: Any,
        collection: str,
        partition: str | None,
        user_id: str,
        keys: Sequence[str],
    ) -> None:
        if partition is not None:
            # The keys carry the user and the partition is theirs. A bare "id in [...]" is
            # also the only form milvus-lite deletes by key directly; adding "and user_id
            # == ..." makes it scan the collection.
            await client.delete(
                collection,
                filter=f"{ID_FIELD} in {_string_list(keys)}",
                partition_name=partition,
                timeout=self._timeout,
            )
        else:
            await client.delete(
                collection,
                filter=f"{ID_FIELD} in {_string_list(keys)} and " + self._user_filter(user_id),
                timeout=self._timeout,
            )

    async def rows_of(self, user_id: str) -> list[tuple[str, str]]:
        return [
            (row_id, str(record[MEMORY_FIELD]))
            async for row_id, record in self._scan(user_id, [MEMORY_FIELD])
        ]

    async def vectors_of(self, user_id: str) -> list[VectorRow]:
        return [
            VectorRow(id=row_id, memory_id=str(record[MEMORY_FIELD]), vector=record[VECTOR_FIELD])
            async for row_id, record in self._scan(user_id, [MEMORY_FIELD, VECTOR_FIELD])
        ]

    async def analyzed_texts_of(self, user_id: str) -> list[TextRow]:
        return [
            TextRow(id=row_id, memory_id=str(record[MEMORY_FIELD]), text=str(record[TEXT_FIELD]))
            async for row_id, record in self._scan(
                user_id, [MEMORY_FIELD, TEXT_FIELD], self._lexical
            )
        ]

    async def _scan(
        self, user_id: str, fields: list[str], collection: str | None = None
    ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        """Every row of the user in ``collection`` (the vectors' by default) as ``(row id,
        record with fields)``, in pages."""
        valid_user_id(user_id)
        collection = collection or self._collection
        client = self._require_client()
        partition = await self._user_partition(user_id, create=False, collection=collection)
        if self._isolation == "partition" and partition is None:
            return
        after = ""  # primary-key cursor: stable while rows are written concurrently
        while True:
            with self._translate("list the user's vectors"):
                page = await self._rows_after(
                    client, user_id, partition, after=after, fields=fields, collection=collection
                )
            for record in page:
                yield self._row_id(user_id, record[ID_FIELD]), record
            if len(page) < self._page_size:
                return
            after = str(page[-1][ID_FIELD])

    async def _rows_after(
        self,
        client: Any,
        user_id: str,
        partition: str | None,
        *,
        after: str,
        fields: list[str],
        collection: str,
    ) -> list[dict[str, Any]]:
        """One page of the user's rows (primary key and ``fields``) with keys above
        ``after``, in key order."""
        if after and not ROW_ID_PATTERN.fullmatch(self._row_id(user_id, after)):
            raise VectorStoreError(f"collection {collection} holds a malformed key")
        page = await self._loaded(
            collection,
            lambda: client.query(
                collection,
                filter=f'{self._user_filter(user_id)} and {ID_FIELD} > "{after}"',
                output_fields=fields,
                limit=self._page_size,
                partition_names=None if partition is None else [partition],
                consistency_level=self._consistency,
                timeout=self._timeout,
                # What pymilvus' own QueryIterator sends: results ordered by primary key,
                # which the cursor relies on (AsyncMilvusClient has no query iterator).
                iterator="True",
            ),
        )
        return sorted(page, key=lambda record: str(record[ID_FIELD]))

    # -- collection setup --------------------------------------------------------------------

    def _sync_client(self) -> Any:
        return sync_client(self._uri, self._token)

    def _create_collection(self, name: str) -> None:
        """Runs in a thread. Another process may create the collection at the same time;
        losing that race is fine as long as the collection exists afterwards."""
        schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field(
            ID_FIELD, DataType.VARCHAR, is_primary=True, max_length=PRIMARY_KEY_MAX_CHARS
        )
        schema.add_field(
            USER_FIELD,
            DataType.VARCHAR,
            max_length=USER_ID_MAX_CHARS,
            is_partition_key=self._isolation == "partition_key",
        )
        schema.add_field(MEMORY_FIELD, DataType.VARCHAR, max_length=MEMORY_ID_MAX_CHARS)
        if name == self._lexical:
            schema.add_field(
                TEXT_FIELD,
                DataType.VARCHAR,
                max_length=TEXT_MAX_BYTES,
                enable_analyzer=True,
                analyzer_params=TEXT_ANALYZER,
            )
            schema.add_field(SPARSE_FIELD, DataType.SPARSE_FLOAT_VECTOR)
            schema.add_function(
                Function(
                    name="bm25",
                    function_type=FunctionType.BM25,
                    input_field_names=[TEXT_FIELD],
                    output_field_names=[SPARSE_FIELD],
                )
            )
        else:
            schema.add_field(VECTOR_FIELD, DataType.FLOAT_VECTOR, dim=self._dim)
        client = self._sync_client()
        try:
            client.create_collection(
                name,
                schema=schema,
                consistency_level=self._consistency,
                timeout=self._timeout,
            )
        except MilvusException:
            if not _appears(lambda: bool(client.has_collection(name, timeout=self._timeout))):
                raise
        finally:
            client.close()

    def _create_index(self, name: str) -> None:
        """Runs in a thread, with the synchronous client and ``sync=False``: both clients
        otherwise poll for the build (AllocTimestamp + 0.5 s sleeps); the asynchronous one
        always does, and milvus-lite does not implement AllocTimestamp. Not waiting is fine:
        the collection is new (all but empty), and loading it does not wait for a build.
        Race-safe like :meth:`_create_collection`."""
        params = MilvusClient.prepare_index_params()
        if name == self._lexical:
            params.add_index(
                field_name=SPARSE_FIELD,
                index_type=LEXICAL_INDEX_TYPE,
                metric_type=LEXICAL_METRIC_TYPE,
                # Explicit (milvus-lite's own default k1 is 1.5, standalone's 1.2), as one
                # JSON "params" entry: the form both read (milvus-lite ignores flat keys).
                params={"params": {"bm25_k1": BM25_K1, "bm25_b": BM25_B}},
            )
        else:
            params.add_index(
                field_name=VECTOR_FIELD, index_type=self._index_type, metric_type=METRIC_TYPE
            )
        client = self._sync_client()
        try:
            client.create_index(name, params, timeout=self._timeout, sync=False)
        except MilvusException:
            if not client.list_indexes(name, timeout=self._timeout):
                raise
        finally:
            client.close()

    def _check_schema(self, name: str, description: dict[str, Any]) -> None:
        """Refuse a collection made for another dimension or isolation mode: mixing modes
        would put rows where the other mode never looks."""
        fields = {field["name"]: field for field in description["fields"]}
        own = {TEXT_FIELD, SPARSE_FIELD} if name == self._lexical else {VECTOR_FIELD}
        missing = {ID_FIELD, USER_FIELD, MEMORY_FIELD, *own} - fields.keys()
        if missing:
            raise VectorStoreError(f"collection {name} lacks the fields {sorted(missing)}")
        if name == self._collection:
            dim = int(fields[VECTOR_FIELD]["params"]["dim"])
            if dim != self._dim:
                raise VectorStoreError(
                    f"collection {name} holds {dim}-dimensional vectors, not {self._dim}"
                )
        keyed = bool(fields[USER_FIELD].get("is_partition_key", False))
        if keyed != (self._isolation == "partition_key"):
            made_for = "partition_key" if keyed else "partition"
            raise VectorStoreError(
                f"collection {name} was created for vector isolation "
                f"{made_for!r}, not {self._isolation!r}; set MEMORIA_VECTOR_ISOLATION="
                f"{made_for} (or move the vectors to a new collection)"
            )

    # -- helpers -----------------------------------------------------------------------------

    def _require_client(self) -> Any:
        if self._client is None:
            raise VectorStoreError(f"the vector store {self._collection} is not open")
        return self._client

    async def _user_partition(
        self, user_id: str, *, create: bool, collection: str | None = None
    ) -> str | None:
        """The user's partition (``partition`` mode), or None when it does not exist in
        ``collection`` (the vectors' by default; ``create`` makes it in both) or the mode has
        no per-user partitions."""
        if self._isolation != "partition":
            return None
        name = partition_name(user_id)
        # A write makes both; a read needs the one it reads (the texts' partition of a
        # store written before them may be missing while the vectors' exists).
        wanted = (self._collection, self._lexical) if create else (collection or self._collection,)
        for where in wanted:
            if (where, name) in self._partitions:
                continue
            if not await self._has_partition(where, name, create=create):
                return None
            self._partitions.add((where, name))
        return name

    async def _has_partition(self, collection: str, name: str, *, create: bool) -> bool:
        client = self._require_client()
        with self._translate("prepare the user's partition"):
            if await client.has_partition(collection, name, timeout=self._timeout):
                return True
            if not create:
                return False
            try:
                await client.create_partition(collection, name, timeout=self._timeout)
            except MilvusException:
                # Another process (or task) created it first: fine.
                if not await client.has_partition(collection, name, timeout=self._timeout):
                    raise
        return True

    async def _loaded(self, collection: str, read: Callable[[], Awaitable[_T]]) -> _T:
        """Run ``read``; when the collection is not loaded, load it and run it again. A
        restarted milvus-lite reopens collections released (and `memoria run` restarts a
        crashed one), so a long-lived store must not rely on the load done by ``open``."""
        try:
            return await read()
        except MilvusException as exc:
            if exc.code != _COLLECTION_NOT_LOADED:
                raise
        await self._require_client().load_collection(collection, timeout=self._timeout)
        return await read()

    async def _maybe_flush(self, client: Any, collection: str, written: int) -> None:
        if self._flush_after is None:
            return
        self._unflushed[collection] = self._unflushed.get(collection, 0) + written
        if self._unflushed[collection] >= self._flush_after:
            await client.flush(collection, timeout=self._timeout)
            self._unflushed[collection] = 0

    @staticmethod
    def _keys(user_id: str, key: str, row: VectorRow | TextRow) -> dict[str, Any]:
        """The fields a vector row and a text row share, checked."""
        if not 1 <= len(row.memory_id) <= MEMORY_ID_MAX_CHARS:
            raise ValueError(
                f"memory id of row {row.id!r} must have 1..{MEMORY_ID_MAX_CHARS} characters"
            )
        return {ID_FIELD: key, USER_FIELD: user_id, MEMORY_FIELD: row.memory_id}

    def _record(self, user_id: str, key: str, row: VectorRow) -> dict[str, Any]:
        return {**self._keys(user_id, key, row), VECTOR_FIELD: self._vector(row.vector)}

    def _text_record(self, user_id: str, key: str, row: TextRow) -> dict[str, Any]:
        return {**self._keys(user_id, key, row), TEXT_FIELD: analyzed(row.text)}

    def _vector(self, vector: Sequence[float]) -> list[float]:
        if len(vector) != self._dim:
            raise ValueError(f"expected a {self._dim}-dimensional vector, got {len(vector)}")
        return [float(value) for value in vector]

    @staticmethod
    def _key(user_id: str, row_id: str) -> str:
        return f"{user_id}{KEY_SEPARATOR}{_valid_row_id(row_id)}"

    def _row_id(self, user_id: str, key: object) -> str:
        prefix = user_id + KEY_SEPARATOR
        text = str(key)
        if not text.startswith(prefix):  # the filters make this impossible; never leak it
            raise VectorStoreError(
                f"collection {self._collection} returned a row outside the user's key space"
            )
        return text[len(prefix) :]

    @staticmethod
    def _user_filter(user_id: str) -> str:
        return f'{USER_FIELD} == "{valid_user_id(user_id)}"'

    @contextmanager
    def _translate(self, action: str) -> Iterator[None]:
        """pymilvus and gRPC failures as :class:`VectorStoreError` naming the server (never
        the token)."""
        where = _redact(self._uri)
        try:
            yield
        except MilvusException as exc:
            if exc.code == _CONNECT_FAILED:
                raise VectorStoreError(f"cannot reach Milvus at {where}: {exc.message}") from exc
            raise VectorStoreError(
                f"Milvus at {where} failed to {action} ({self._collection}): "
                f"{exc.message} (code {exc.code})"
            ) from exc
        except grpc.RpcError as exc:
            raise VectorStoreError(
                f"Milvus at {where} failed to {action} ({self._collection}): {exc}"
            ) from exc
        except TimeoutError as exc:
            raise VectorStoreError(
                f"Milvus at {where} did not answer in time to {action} ({self._collection})"
            ) from exc

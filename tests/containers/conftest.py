"""Servers for the `containers` suites, one of each per test session: Redis (the real one,
not the Valkey the other suites use), MongoDB and Milvus standalone, started with
testcontainers, or the servers ``REDIS_CONTAINER_URL`` / ``MONGODB_URL`` / ``MILVUS_URI``
name. Without a Docker engine (and without those variables) every test here is skipped with
one reason. See docs/testing-containers.md.

The suites write to (and flush) Redis databases of their own (``db`` numbers chosen by each
suite), use MongoDB databases with unique names (dropped afterwards) and Milvus users with
unique names: point the variables at throwaway servers only.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pymongo
import pymongo.errors
import pytest
import redis
import redis.exceptions

# The stack helpers and the container helpers live beside the tests, not in a package.
sys.path.insert(0, str(Path(__file__).parent.parent / "support"))
from containers import (
    MILVUS_IMAGE,
    MILVUS_TOKEN_ENV,
    MILVUS_URI_ENV,
    MONGO_IMAGE,
    MONGODB_URL_ENV,
    REDIS_URL_ENV,
    MilvusServer,
    RedisServer,
    redis_container,
    redis_container_url,
    require_docker,
)

PING_TIMEOUT_S = 5.0  # a server named by a variable answers in this or fails the run


def _check_redis(url: str) -> None:
    """Fail at once when ``REDIS_CONTAINER_URL`` does not answer or is not Redis."""
    client = redis.Redis.from_url(
        url, socket_timeout=PING_TIMEOUT_S, socket_connect_timeout=PING_TIMEOUT_S
    )
    try:
        server = client.info("server")
    except redis.exceptions.RedisError as exc:
        pytest.fail(f"{REDIS_URL_ENV} is set but the server does not answer: {exc}")
    finally:
        client.close()
    # Valkey answers INFO with a redis_version too (for compatibility), and its own fields.
    if "valkey_version" in server or server.get("server_name") == "valkey":
        pytest.fail(
            f"{REDIS_URL_ENV} points at Valkey; these suites exist to test Redis itself "
            "(every other suite already runs on Valkey)"
        )


def _check_mongodb(url: str) -> None:
    """Fail at once, rather than once per test after pymongo's 30 s server selection."""
    client: pymongo.MongoClient[dict[str, object]] = pymongo.MongoClient(
        url, serverSelectionTimeoutMS=int(PING_TIMEOUT_S * 1000)
    )
    try:
        client.admin.command("ping")
    except pymongo.errors.PyMongoError as exc:
        pytest.fail(f"{MONGODB_URL_ENV} is set but the server does not answer: {exc}")
    finally:
        client.close()


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """Redis 7.4 with the append-only file on (``REDIS_COMMAND``)."""
    url = os.environ.get(REDIS_URL_ENV)
    if url:
        _check_redis(url)
        yield RedisServer(url)
        return
    require_docker()
    with redis_container() as container:
        yield RedisServer(redis_container_url(container))


@pytest.fixture(scope="session")
def mongodb_url() -> Iterator[str]:
    """The server's URL; tests name a database of their own
    (:func:`containers.mongodb_url_with_database`)."""
    url = os.environ.get(MONGODB_URL_ENV)
    if url:
        _check_mongodb(url)
        yield url
        return
    require_docker()
    from testcontainers.community.mongodb import MongoDbContainer

    with MongoDbContainer(MONGO_IMAGE) as container:
        yield container.get_connection_url()


@pytest.fixture(scope="session")
def milvus_standalone() -> Iterator[MilvusServer]:
    """Milvus standalone, the image tests/contract/test_vectors.py pins."""
    uri = os.environ.get(MILVUS_URI_ENV)
    if uri:
        yield MilvusServer(uri, os.environ.get(MILVUS_TOKEN_ENV) or None)
        return
    require_docker()
    from testcontainers.community.milvus import MilvusContainer

    with MilvusContainer(MILVUS_IMAGE) as container:  # no authentication: no token
        yield MilvusServer(container.get_connection_url(), None)

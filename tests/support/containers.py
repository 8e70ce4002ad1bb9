"""What the `containers` suites share: whether a Docker engine answers, the images they pin
(one place, so every suite tests the same server versions), the Redis container's settings
and the URL rewriting that points a suite at a database of its own.

Imported by tests/containers/ and by the container parametrisations of tests/contract/.
testcontainers itself is imported lazily: nothing here needs it until a container starts.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit

import pytest
import redis

if TYPE_CHECKING:
    from testcontainers.community.redis import RedisContainer

DOCKER_PING_TIMEOUT_S = 3

REDIS_IMAGE = "redis:7.4"
MONGO_IMAGE = "mongo:7.0"
MILVUS_IMAGE = os.environ.get("MILVUS_IMAGE", "milvusdb/milvus:v2.6.16")

REDIS_PORT = 6379
# As `memoria run` starts its embedded broker (cli/src/memoria_cli/embedded_broker.py): the
# append-only file with an fsync per second, and no RDB snapshots, so whatever survives a
# restart survived through the AOF.
REDIS_COMMAND = [
    "redis-server",
    "--appendonly",
    "yes",
    "--appendfsync",
    "everysec",
    "--save",
    "",
]

# Environment variables that point the suites at servers already running.
REDIS_URL_ENV = "REDIS_CONTAINER_URL"
MONGODB_URL_ENV = "MONGODB_URL"
MILVUS_URI_ENV = "MILVUS_URI"
MILVUS_TOKEN_ENV = "MILVUS_TOKEN"
REDIS_TIMEOUT_S = 5.0
NO_DOCKER_HINT = (
    f"set {REDIS_URL_ENV}, {MONGODB_URL_ENV} and {MILVUS_URI_ENV} to use servers "
    "already running (docs/testing-containers.md)"
)


@dataclass(frozen=True)
class RedisServer:
    url: str
    """Any database of the server; :meth:`fresh_database` picks one."""

    def fresh_database(self, db: int) -> str:
        """The URL of database ``db``, emptied first: a test starts from nothing."""
        url = redis_url_with_db(self.url, db)
        client = redis.Redis.from_url(url, socket_timeout=REDIS_TIMEOUT_S)
        try:
            client.flushdb()
        finally:
            client.close()
        return url


@dataclass(frozen=True)
class MilvusServer:
    uri: str
    token: str | None


@functools.cache
def _docker_engine_error() -> str | None:
    """Why no Docker engine answers a ping (``"<error type>: <message>"``), or None.
    Asked once per test session."""
    try:
        import docker  # type: ignore[import-untyped]

        client = docker.from_env(timeout=DOCKER_PING_TIMEOUT_S)
        try:
            client.ping()
        finally:
            client.close()
    except Exception as exc:  # any failure to reach the engine means "skip"
        return f"{type(exc).__name__}: {exc}"
    return None


def docker_unavailable_reason(needed_for: str) -> str | None:
    """Why no Docker engine can run the containers ``needed_for`` names, or None when one
    answers a ping."""
    error = _docker_engine_error()
    if error is None:
        return None
    return f"no Docker engine reachable for {needed_for} ({error})"


def require_docker() -> None:
    """Skip the calling test, with the one reason every suite of tests/containers gives,
    unless a Docker engine answers."""
    reason = docker_unavailable_reason("the containers suites")
    if reason is not None:
        pytest.skip(f"{reason}; {NO_DOCKER_HINT}")


def redis_container() -> RedisContainer:
    """A Redis container (not started) configured as every suite runs it."""
    from testcontainers.community.redis import RedisContainer

    container = RedisContainer(REDIS_IMAGE, port=REDIS_PORT)
    container.with_command(REDIS_COMMAND)
    return container


def redis_container_url(container: RedisContainer, db: int = 0) -> str:
    """The URL of a started Redis container's database ``db``. Asked again after a restart:
    Docker may publish the port on another host port then."""
    host = container.get_container_host_ip()
    port = container.get_exposed_port(REDIS_PORT)
    return f"redis://{host}:{port}/{db}"


def redis_url_with_db(url: str, db: int) -> str:
    """``url`` (``redis://`` or ``rediss://``, credentials and options kept) naming database
    ``db`` instead of the one it names, if any (in its path or a ``db`` option)."""
    if db < 0:
        raise ValueError(f"a Redis database number is not negative, got {db}")
    parts = urlsplit(url)
    options = parse_qsl(parts.query, keep_blank_values=True)
    query = parts.query
    if any(key == "db" for key, _ in options):  # redis-py prefers it to the path
        query = urlencode([(key, value) for key, value in options if key != "db"])
    return urlunsplit(parts._replace(path=f"/{db}", query=query))


def mongodb_url_with_database(url: str, database: str) -> str:
    """``url`` naming ``database`` in its path, which is where Memoria takes its database
    from (``MEMORIA_DOCSTORE_URL``).

    With a user name and password (SCRAM, MongoDB's default mechanism), the path is also
    the database the credentials are checked against (``admin`` without a path, as in the
    URL a ``mongo`` container gives). Unless the URL names its ``authSource``, the one it
    implied is added, so they are still checked where they were created.
    """
    parts = urlsplit(url)
    query = parts.query
    options = {key.lower(): value for key, value in parse_qsl(query, keep_blank_values=True)}
    mechanism = options.get("authmechanism", "DEFAULT").upper()
    scram = mechanism == "DEFAULT" or mechanism.startswith("SCRAM")
    if "@" in parts.netloc and "authsource" not in options and scram:
        source = unquote(parts.path.strip("/")) or "admin"
        option = f"authSource={quote(source, safe='')}"
        query = f"{query}&{option}" if query else option
    return urlunsplit(parts._replace(path=f"/{quote(database, safe='')}", query=query))

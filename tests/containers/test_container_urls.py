"""The URL rewriting the container suites use to give each test a database of its own. It
needs no server, so it runs (and can fail) on every machine, Docker or not: a mistake here
would otherwise only show on a machine with Docker, as a login or connection failure."""

from __future__ import annotations

import pytest
import redis
from containers import mongodb_url_with_database, redis_url_with_db
from pymongo.uri_parser import parse_uri

from memoria_memory.docstore.mongo import database_from_url

pytestmark = pytest.mark.containers


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        # As a mongo container gives it: root user, created in "admin", no path.
        pytest.param(
            "mongodb://test:test@localhost:32768",
            "mongodb://test:test@localhost:32768/e2e_1?authSource=admin",
            id="container-root-user",
        ),
        # A user of the "chat" database keeps logging in there.
        pytest.param(
            "mongodb://u:p@h1:1,h2:2/chat?replicaSet=rs",
            "mongodb://u:p@h1:1,h2:2/e2e_1?replicaSet=rs&authSource=chat",
            id="user-of-the-path-database",
        ),
        pytest.param(
            "mongodb://u:p@h/x?authSource=other",
            "mongodb://u:p@h/e2e_1?authSource=other",
            id="explicit-auth-source",
        ),
        pytest.param("mongodb://h:27017", "mongodb://h:27017/e2e_1", id="no-credentials"),
        pytest.param("mongodb://h:27017/old?w=1", "mongodb://h:27017/e2e_1?w=1", id="options"),
        # Mechanisms that authenticate against $external never take the path as source.
        pytest.param(
            "mongodb://CN%3Dme@h/?authMechanism=MONGODB-X509",
            "mongodb://CN%3Dme@h/e2e_1?authMechanism=MONGODB-X509",
            id="x509",
        ),
    ],
)
def test_a_mongodb_url_names_the_database_and_keeps_the_credentials_source(
    url: str, expected: str
) -> None:
    rewritten = mongodb_url_with_database(url, "e2e_1")

    assert rewritten == expected
    assert database_from_url(rewritten) == "e2e_1"  # where Memoria takes its database from
    parsed = parse_uri(rewritten, validate=False)
    assert parsed["database"] == "e2e_1"


def test_pymongo_checks_the_credentials_where_they_were_created() -> None:
    rewritten = mongodb_url_with_database("mongodb://test:secret@localhost:1", "e2e_1")

    options = parse_uri(rewritten)["options"]
    assert options["authSource"] == "admin"


@pytest.mark.parametrize(
    ("url", "db", "expected"),
    [
        pytest.param("redis://localhost:32768", 2, "redis://localhost:32768/2", id="no-path"),
        pytest.param("redis://localhost:32768/0", 1, "redis://localhost:32768/1", id="path"),
        pytest.param(
            "rediss://:pw@h:6380/5?socket_timeout=3",
            2,
            "rediss://:pw@h:6380/2?socket_timeout=3",
            id="tls-password-options",
        ),
        pytest.param(
            "redis://h/0?db=7&health_check_interval=2",
            1,
            "redis://h/1?health_check_interval=2",
            id="db-option",
        ),
    ],
)
def test_a_redis_url_names_the_database(url: str, db: int, expected: str) -> None:
    rewritten = redis_url_with_db(url, db)

    assert rewritten == expected
    client = redis.Redis.from_url(rewritten)  # connects lazily: nothing is opened here
    try:
        assert client.connection_pool.connection_kwargs["db"] == db  # what it will SELECT
    finally:
        client.close()


def test_a_negative_redis_database_is_refused() -> None:
    with pytest.raises(ValueError, match="not negative"):
        redis_url_with_db("redis://h", -1)

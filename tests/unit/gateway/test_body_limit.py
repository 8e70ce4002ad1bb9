"""Request bodies are bounded while they are read: a body over the limit is a 413 that says
the limit, before the token is checked and before anything is parsed, whether its size is
declared or it comes in chunks, and the bulk routes take bigger ones. The app is built but
not started (no broker): nothing here reaches one."""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from memoria_gateway.app import create_app
from memoria_runtime.settings import GatewayProcessSettings, Settings

JSON = {"content-type": "application/json"}
LIMIT = 4096
BULK_LIMIT = 65536


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings.load(
        _env_file=None, data_dir=tmp_path, max_body_bytes=LIMIT, max_bulk_body_bytes=BULK_LIMIT
    )


@pytest.fixture
def client(settings: Settings) -> TestClient:
    return TestClient(
        create_app(settings.process(GatewayProcessSettings)), raise_server_exceptions=False
    )


def chunks(total: int, size: int = 1024) -> Iterator[bytes]:
    for _ in range(total // size):
        yield b"a" * size


@pytest.mark.parametrize(
    "path", ["/api/token", "/api/memories", "/api/threads", "/api/threads/main/config"]
)
def test_a_declared_body_over_the_limit_is_refused_before_the_token_is_asked(
    client: TestClient, path: str
) -> None:
    method = "PATCH" if path.endswith("/config") else "POST"
    body = b"{" + b" " * LIMIT + b"}"
    response = client.request(method, path, content=body, headers=JSON)
    assert response.status_code == 413, response.text
    assert response.json() == {
        "detail": f"The request body is larger than {LIMIT} bytes, the most this route takes."
    }


def test_a_chunked_body_is_refused_once_it_passes_the_limit(client: TestClient) -> None:
    response = client.post(
        "/api/memories", content=chunks(50 * LIMIT), headers={"content-type": "application/json"}
    )
    assert response.status_code == 413
    assert str(LIMIT) in response.json()["detail"]


def test_a_body_within_the_limit_goes_on_to_the_token_check(client: TestClient) -> None:
    response = client.post("/api/memories", json={"content": "x" * (LIMIT // 2)})
    assert response.status_code == 401


def test_the_batch_route_takes_a_bigger_body_but_not_an_endless_one(client: TestClient) -> None:
    batch = {"memories": [{"content": "x" * 1000, "bindings": ["x"]}] * 20}  # ~21 kB
    assert client.post("/api/memories/batch", json=batch).status_code == 401
    huge = client.post(
        "/api/memories/batch",
        content=b" " * (BULK_LIMIT + 1),
        headers={"content-type": "application/json"},
    )
    assert huge.status_code == 413
    assert str(BULK_LIMIT) in huge.json()["detail"]


def test_the_openai_route_refuses_in_its_own_error_shape(client: TestClient) -> None:
    response = client.post(
        "/v1/chat/completions",
        content=b" " * (BULK_LIMIT + 1),
        headers={"content-type": "application/json", "authorization": "Bearer nope"},
    )
    assert response.status_code == 413
    error = response.json()["error"]
    assert str(BULK_LIMIT) in error["message"]
    assert error["type"] == "invalid_request_error"


async def test_the_body_is_not_read_past_the_limit(settings: Settings) -> None:
    """Read at the ASGI level: the app stops asking for the body once it passes the limit,
    however much more the client would send."""
    app = create_app(settings.process(GatewayProcessSettings))
    sent_chunks = 0
    total_chunks = 1000

    async def receive() -> dict[str, Any]:
        nonlocal sent_chunks
        sent_chunks += 1
        return {"type": "http.request", "body": b"a" * 1024, "more_body": True}

    answer: list[MutableMapping[str, Any]] = []

    async def send(message: MutableMapping[str, Any]) -> None:
        answer.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "path": "/api/memories",
        "raw_path": b"/api/memories",
        "query_string": b"",
        "root_path": "",
        "scheme": "http",
        "server": ("127.0.0.1", 8000),
        "client": ("127.0.0.1", 50000),
        "headers": [(b"content-type", b"application/json"), (b"host", b"127.0.0.1:8000")],
    }
    await app(scope, receive, send)
    assert answer[0]["status"] == 413
    assert (b"connection", b"close") in answer[0]["headers"]
    assert sent_chunks <= LIMIT // 1024 + 1 < total_chunks


def test_the_limits_are_in_the_openapi_document(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    for path, method in [
        ("/api/token", "post"),
        ("/api/memories", "post"),
        ("/api/memories/batch", "post"),
        ("/v1/chat/completions", "post"),
    ]:
        assert "413" in paths[path][method]["responses"], path

"""/api/memories: who the caller is, what reaches the memory service, how its answers map to
HTTP, and the OpenAPI document. The memory service is a scripted stand-in."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, TypeVar

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from memoria_contracts.base import ContractModel
from memoria_contracts.memory import (
    FailureCode,
    Memory,
    MemoryChange,
    MemoryDelete,
    MemoryDeleted,
    MemoryFailure,
    MemoryFound,
    MemoryHistory,
    MemoryList,
    MemoryPage,
    MemorySave,
    MemorySaved,
    MemorySearch,
    MemoryUpdate,
    MemoryUpdated,
)
from memoria_gateway.memory_routes import NOT_ANSWERING, NOT_FOUND, memory_router
from memoria_runtime.auth import TokenIssuer
from memoria_runtime.bus.memory_requests import NO_THREAD
from memoria_runtime.bus.request_reply import RpcError

SECRET = "a-test-secret-long-enough-for-hs256"  # PyJWT warns below 32 bytes
TTL_S = 3600
USER = "ana"
MEMORY_ID = "mem_abc123"
WHEN = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)

R = TypeVar("R")
Reply = ContractModel | Exception


@dataclass(frozen=True)
class Call:
    method: str
    user_id: str
    request: Any
    thread_id: str


class ScriptedMemory:
    """Stands in for MemoryClient: records each call and answers with the next scripted
    reply of its method (an exception is raised)."""

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self._replies: dict[str, list[Reply]] = {}

    def script(self, method: str, *replies: Reply) -> None:
        self._replies.setdefault(method, []).extend(replies)

    def _answer(
        self, method: str, user_id: str, request: Any, thread_id: str, expected: type[R]
    ) -> R | MemoryFailure:
        self.calls.append(Call(method, user_id, request, thread_id))
        reply = self._replies[method].pop(0)
        if isinstance(reply, Exception):
            raise reply
        assert isinstance(reply, expected | MemoryFailure)
        return reply

    async def search(
        self,
        user_id: str,
        request: MemorySearch,
        *,
        thread_id: str = NO_THREAD,
        cycle_id: str | None = None,
    ) -> MemoryFound | MemoryFailure:
        return self._answer("search", user_id, request, thread_id, MemoryFound)

    async def get(
        self,
        user_id: str,
        memory_id: str,
        *,
        thread_id: str = NO_THREAD,
        cycle_id: str | None = None,
    ) -> MemoryFound | MemoryFailure:
        return self._answer("get", user_id, memory_id, thread_id, MemoryFound)

    async def list(
        self,
        user_id: str,
        request: MemoryList,
        *,
        thread_id: str = NO_THREAD,
        cycle_id: str | None = None,
    ) -> MemoryPage | MemoryFailure:
        return self._answer("list", user_id, request, thread_id, MemoryPage)

    async def changes(
        self,
        user_id: str,
        memory_id: str,
        *,
        thread_id: str = NO_THREAD,
        cycle_id: str | None = None,
    ) -> MemoryHistory | MemoryFailure:
        return self._answer("changes", user_id, memory_id, thread_id, MemoryHistory)

    async def save(
        self,
        user_id: str,
        request: MemorySave,
        *,
        thread_id: str = NO_THREAD,
        cycle_id: str | None = None,
    ) -> MemorySaved | MemoryFailure:
        return self._answer("save", user_id, request, thread_id, MemorySaved)

    async def update(
        self,
        user_id: str,
        request: MemoryUpdate,
        *,
        thread_id: str = NO_THREAD,
        cycle_id: str | None = None,
    ) -> MemoryUpdated | MemoryFailure:
        return self._answer("update", user_id, request, thread_id, MemoryUpdated)

    async def delete(
        self,
        user_id: str,
        request: MemoryDelete,
        *,
        thread_id: str = NO_THREAD,
        cycle_id: str | None = None,
    ) -> MemoryDeleted | MemoryFailure:
        return self._answer("delete", user_id, request, thread_id, MemoryDeleted)


def a_memory(memory_id: str = MEMORY_ID, content: Any = "Likes green tea") -> Memory:
    return Memory(
        memory_id=memory_id,
        memory_type="preference",
        content_kind="text" if isinstance(content, str) else "json",
        content=content,
        bindings=["tea"],
        creation_datetime=WHEN,
        last_accessed=WHEN,
        updated_at=WHEN,
    )


def failure(code: FailureCode) -> MemoryFailure:
    return MemoryFailure(code=code, error_message=f"{code}: details", memory_id=MEMORY_ID)


@pytest.fixture
def issuer() -> TokenIssuer:
    return TokenIssuer(SECRET, TTL_S)


@pytest.fixture
def memory() -> ScriptedMemory:
    return ScriptedMemory()


@pytest.fixture
def client(memory: ScriptedMemory, issuer: TokenIssuer) -> Iterator[TestClient]:
    app = FastAPI()
    app.include_router(memory_router(memory, lambda: issuer))
    with TestClient(app) as test_client:
        test_client.headers["Authorization"] = f"Bearer {issuer.issue(USER)}"
        yield test_client


# Every route once, with a body that would be valid.
ROUTES: list[tuple[str, str, dict[str, Any] | None]] = [
    ("POST", "/api/memories", {"content": "x", "bindings": ["x"]}),
    ("POST", "/api/memories/batch", {"memories": [{"content": "x", "bindings": ["x"]}]}),
    ("GET", "/api/memories", None),
    ("GET", "/api/memories/search?q=tea", None),
    ("GET", f"/api/memories/{MEMORY_ID}", None),
    ("PATCH", f"/api/memories/{MEMORY_ID}", {"content": "y"}),
    ("DELETE", f"/api/memories/{MEMORY_ID}", None),
    ("GET", f"/api/memories/{MEMORY_ID}/history", None),
]


# -- authentication -------------------------------------------------------------------------


@pytest.mark.parametrize(("method", "path", "body"), ROUTES)
@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "Bearer not-a-jwt",
        f"Bearer {TokenIssuer(SECRET[::-1], TTL_S).issue(USER)}",
        f"Bearer {TokenIssuer(SECRET, -1).issue(USER)}",  # expired
        f"Basic {TokenIssuer(SECRET, TTL_S).issue(USER)}",  # not a bearer token
    ],
)
def test_every_route_needs_a_valid_bearer_token(
    client: TestClient,
    memory: ScriptedMemory,
    method: str,
    path: str,
    body: dict[str, Any] | None,
    authorization: str | None,
) -> None:
    del client.headers["Authorization"]
    headers = {} if authorization is None else {"Authorization": authorization}
    response = client.request(method, path, json=body, headers=headers)
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == "Bearer"
    assert memory.calls == []


def test_the_user_comes_from_the_token_only(client: TestClient, memory: ScriptedMemory) -> None:
    memory.script("list", MemoryPage(memories=[]))
    memory.script("get", MemoryFound(memories=[a_memory()]))
    response = client.get("/api/memories?user_id=mallory")
    assert response.status_code == 200
    response = client.get(f"/api/memories/{MEMORY_ID}", params={"user_id": "mallory"})
    assert response.status_code == 200
    assert [(c.user_id, c.thread_id) for c in memory.calls] == [(USER, NO_THREAD)] * 2


def test_a_body_naming_a_user_is_refused(client: TestClient, memory: ScriptedMemory) -> None:
    body = {"content": "x", "bindings": ["x"], "user_id": "mallory"}
    assert client.post("/api/memories", json=body).status_code == 422
    patch = {"content": "x", "user_id": "mallory"}
    assert client.patch(f"/api/memories/{MEMORY_ID}", json=patch).status_code == 422
    assert memory.calls == []


# -- error mapping --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "status", "tells_why"),
    [
        (failure("not_found"), 404, False),
        (failure("invalid"), 422, True),
        (failure("unavailable"), 503, False),
        (TimeoutError(), 503, False),
        (RpcError("unexpected_reply", "expected memory.found: details"), 502, False),
    ],
)
def test_memory_service_answers_become_statuses(
    client: TestClient, memory: ScriptedMemory, reply: Reply, status: int, tells_why: bool
) -> None:
    memory.script("get", reply)
    response = client.get(f"/api/memories/{MEMORY_ID}")
    assert response.status_code == status
    # Only a refusal of the request itself is worded for the client; storage and protocol
    # troubles stay in the logs.
    assert ("details" in response.text) is tells_why


def test_a_timeout_says_the_memory_service_is_not_answering(
    client: TestClient, memory: ScriptedMemory
) -> None:
    memory.script("list", TimeoutError())
    response = client.get("/api/memories")
    assert response.status_code == 503
    assert response.json() == {"detail": NOT_ANSWERING}


def test_an_invalid_answer_is_a_422_in_fastapi_shape(
    client: TestClient, memory: ScriptedMemory
) -> None:
    memory.script("list", MemoryFailure(code="invalid", error_message="the cursor is not valid"))
    response = client.get("/api/memories?cursor=junk")
    assert response.status_code == 422
    assert response.json()["detail"][0]["msg"] == "the cursor is not valid"


def test_unknown_foreign_and_impossible_ids_look_the_same(
    client: TestClient, memory: ScriptedMemory
) -> None:
    memory.script("get", failure("not_found"), failure("not_found"))
    unknown = client.get("/api/memories/mem_unknown")
    foreign = client.get("/api/memories/mem_ofsomeoneelse")
    impossible = client.get("/api/memories/not-an-id")
    assert unknown.status_code == foreign.status_code == impossible.status_code == 404
    assert unknown.json() == foreign.json() == impossible.json() == {"detail": NOT_FOUND}
    assert len(memory.calls) == 2  # an id that cannot exist is not even asked about


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("PATCH", f"/api/memories/{MEMORY_ID}"),
        ("DELETE", f"/api/memories/{MEMORY_ID}"),
        ("GET", f"/api/memories/{MEMORY_ID}/history"),
    ],
)
def test_not_found_on_every_id_route(
    client: TestClient, memory: ScriptedMemory, method: str, path: str
) -> None:
    for name in ("update", "delete", "changes"):
        memory.script(name, failure("not_found"))
    response = client.request(method, path, json={"content": "y"} if method == "PATCH" else None)
    assert response.status_code == 404
    assert response.json() == {"detail": NOT_FOUND}


# -- create ---------------------------------------------------------------------------------


def test_create_with_an_idempotency_key(client: TestClient, memory: ScriptedMemory) -> None:
    created = MemorySaved(memory_id=MEMORY_ID, created=True, memory=a_memory())
    again = MemorySaved(memory_id=MEMORY_ID, created=False, memory=a_memory())
    memory.script("save", created, again)
    body = {
        "content": "Likes green tea",
        "memory_type": "preference",
        "bindings": ["tea", "drinks"],
        "creation_datetime": "2024-05-06T07:08:09Z",
    }
    first = client.post("/api/memories", json=body, headers={"Idempotency-Key": "k-1"})
    second = client.post("/api/memories", json=body, headers={"Idempotency-Key": "k-1"})

    assert (first.status_code, first.json()["created"]) == (201, True)
    assert (second.status_code, second.json()["created"]) == (200, False)
    assert first.json()["memory_id"] == MEMORY_ID
    request = memory.calls[0].request
    assert isinstance(request, MemorySave)
    assert request.idempotency_key == "api:k-1"
    assert request.source == "api"
    assert request.memory_type == "preference"
    assert request.content_kind == "text"
    assert request.bindings == ["tea", "drinks"]
    assert request.creation_datetime == datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC)
    assert memory.calls[0].thread_id == NO_THREAD


def test_create_without_a_key_uses_a_fresh_one(client: TestClient, memory: ScriptedMemory) -> None:
    saved = MemorySaved(memory_id=MEMORY_ID, created=True, memory=a_memory(content={"a": 1}))
    memory.script("save", saved, saved)
    body = {"content": {"a": 1}, "bindings": ["a"]}
    assert client.post("/api/memories", json=body).status_code == 201
    assert client.post("/api/memories", json=body).status_code == 201
    keys = [call.request.idempotency_key for call in memory.calls]
    assert all(key.startswith("api:") for key in keys)
    assert keys[0] != keys[1]
    assert memory.calls[0].request.content_kind == "json"  # inferred from the content
    assert memory.calls[0].request.creation_datetime is None


@pytest.mark.parametrize(
    "body",
    [
        {"content": "x", "bindings": []},
        {"content": "x", "bindings": [f"b{n}" for n in range(17)]},
        {"content": {"a": 1}},  # a JSON memory is found by its bindings only
        {"content": "  ", "bindings": ["x"]},
        {"content": "x", "content_kind": "json", "bindings": ["x"]},
        {"content": "x", "bindings": ["x"], "memory_type": "gossip"},
        {"content": "x", "bindings": ["x"], "creation_datetime": "2024-05-06T07:08:09"},
    ],
)
def test_create_refuses_invalid_bodies(
    client: TestClient, memory: ScriptedMemory, body: dict[str, Any]
) -> None:
    assert client.post("/api/memories", json=body).status_code == 422
    assert memory.calls == []


# -- list and search ------------------------------------------------------------------------


def test_list_passes_filters_and_cursor(client: TestClient, memory: ScriptedMemory) -> None:
    memory.script("list", MemoryPage(memories=[a_memory()], next_cursor="c2"))
    response = client.get("/api/memories?memory_type=goal&limit=10&cursor=c1")
    assert response.status_code == 200
    assert response.json()["next_cursor"] == "c2"
    assert [m["memory_id"] for m in response.json()["memories"]] == [MEMORY_ID]
    assert memory.calls[0].request == MemoryList(memory_type="goal", limit=10, cursor="c1")


def test_search_passes_queries(client: TestClient, memory: ScriptedMemory) -> None:
    found = a_memory().model_copy(update={"relevance_score": 0.8})
    memory.script("search", MemoryFound(memories=[found]))
    response = client.get("/api/memories/search?q=tea&q=drinks&limit=5&min_relevance=0.3")
    assert response.status_code == 200
    assert response.json()["memories"][0]["relevance_score"] == 0.8
    request = memory.calls[0].request
    assert isinstance(request, MemorySearch)
    assert (request.mode, request.queries) == ("semantic", ["tea", "drinks"])
    assert (request.limit, request.min_relevance) == (5, 0.3)


def test_chronological_search_needs_no_query(client: TestClient, memory: ScriptedMemory) -> None:
    memory.script("search", MemoryFound(memories=[]))
    response = client.get("/api/memories/search?mode=chronological&memory_type=goal")
    assert response.status_code == 200
    request = memory.calls[0].request
    assert (request.mode, request.queries, request.memory_type) == ("chronological", [], "goal")


def test_semantic_search_without_a_query_is_refused(
    client: TestClient, memory: ScriptedMemory
) -> None:
    response = client.get("/api/memories/search")
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["query", "q"]
    assert memory.calls == []


def test_search_and_list_pass_a_time_window(client: TestClient, memory: ScriptedMemory) -> None:
    memory.script("search", MemoryFound(memories=[]))
    memory.script("list", MemoryPage(memories=[], next_cursor=None))
    window = "since=2026-11-16T00:00:00Z&until=2026-11-23T00:00:00%2B01:00"
    assert client.get(f"/api/memories/search?mode=chronological&{window}").status_code == 200
    assert client.get(f"/api/memories?{window}").status_code == 200
    since = datetime(2026, 11, 16, tzinfo=UTC)
    until = datetime(2026, 11, 23, tzinfo=timezone(timedelta(hours=1)))
    for call in memory.calls:
        assert (call.request.since, call.request.until) == (since, until)


@pytest.mark.parametrize("route", ["/api/memories/search?q=tea&", "/api/memories?"])
@pytest.mark.parametrize(
    ("window", "field"),
    [
        ("since=2026-11-23T00:00:00Z&until=2026-11-16T00:00:00Z", "since"),
        ("since=2026-11-16T00:00:00", "since"),  # no offset: whose midnight?
        ("until=last-week", "until"),
        ("since=0001-01-01T00:00:00%2B01:00", "since"),  # overflows on the way to UTC
    ],
)
def test_a_window_that_cannot_be_is_refused(
    client: TestClient, memory: ScriptedMemory, route: str, window: str, field: str
) -> None:
    response = client.get(route + window)
    assert response.status_code == 422
    assert field in response.text
    assert memory.calls == []


# -- one memory -----------------------------------------------------------------------------


def test_update(client: TestClient, memory: ScriptedMemory) -> None:
    changed = a_memory(content="Likes black tea")
    memory.script(
        "update",
        MemoryUpdated(
            memory_id=MEMORY_ID,
            old_content="Likes green tea",
            new_content="Likes black tea",
            memory=changed,
        ),
    )
    body = {"content": "Likes black tea", "bindings": ["tea"]}
    response = client.patch(f"/api/memories/{MEMORY_ID}", json=body)
    assert response.status_code == 200
    assert response.json()["old_content"] == "Likes green tea"
    assert response.json()["new_content"] == "Likes black tea"
    assert response.json()["memory"]["content"] == "Likes black tea"
    request = memory.calls[0].request
    assert isinstance(request, MemoryUpdate)
    assert (request.memory_id, request.source, request.bindings) == (MEMORY_ID, "api", ["tea"])


def test_an_update_must_change_something(client: TestClient, memory: ScriptedMemory) -> None:
    assert client.patch(f"/api/memories/{MEMORY_ID}", json={}).status_code == 422
    assert memory.calls == []


def test_delete(client: TestClient, memory: ScriptedMemory) -> None:
    memory.script(
        "delete",
        MemoryDeleted(memory_id=MEMORY_ID, deleted_content="Likes green tea", memory=a_memory()),
    )
    response = client.delete(f"/api/memories/{MEMORY_ID}")
    assert response.status_code == 200
    assert response.json() == {"memory_id": MEMORY_ID, "deleted_content": "Likes green tea"}
    assert memory.calls[0].request == MemoryDelete(memory_id=MEMORY_ID, source="api")


def test_history(client: TestClient, memory: ScriptedMemory) -> None:
    change = MemoryChange(
        change_id="chg_1",
        memory_id=MEMORY_ID,
        kind="created",
        at=WHEN,
        source="api",
        new=a_memory(),
    )
    memory.script("changes", MemoryHistory(memory_id=MEMORY_ID, changes=[change]))
    response = client.get(f"/api/memories/{MEMORY_ID}/history")
    assert response.status_code == 200
    assert response.json()["memory_id"] == MEMORY_ID
    assert [c["kind"] for c in response.json()["changes"]] == ["created"]
    assert memory.calls[0] == Call("changes", USER, MEMORY_ID, NO_THREAD)


# -- OpenAPI --------------------------------------------------------------------------------


def test_openapi_documents_every_route(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    documented = {
        (method.upper(), path)
        for path, operations in spec["paths"].items()
        for method in operations
    }
    assert documented == {
        ("POST", "/api/memories"),
        ("POST", "/api/memories/batch"),
        ("GET", "/api/memories"),
        ("GET", "/api/memories/search"),
        ("GET", "/api/memories/{memory_id}"),
        ("PATCH", "/api/memories/{memory_id}"),
        ("DELETE", "/api/memories/{memory_id}"),
        ("GET", "/api/memories/{memory_id}/history"),
    }
    for path, operations in spec["paths"].items():
        for operation in operations.values():
            assert operation["summary"] and operation["description"]
            assert {"401", "503"} <= set(operation["responses"])
            assert operation["security"] == [{"HTTPBearer": []}]
            if "{memory_id}" in path:
                assert "404" in operation["responses"]
    assert spec["paths"]["/api/memories"]["post"]["responses"].keys() >= {"200", "201"}
    assert spec["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"

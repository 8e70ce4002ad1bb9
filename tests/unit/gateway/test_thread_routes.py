"""/api/threads: who the caller is, what reaches the memory service, how its answers map to
HTTP, and the OpenAPI document. The memory service is a scripted stand-in (the integration
suite runs the real one)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from memoria_contracts.base import ContractModel
from memoria_contracts.session import SessionConfigGet, SessionConfigState, SessionConfigUpdate
from memoria_contracts.threads import (
    Thread,
    ThreadCreate,
    ThreadFailure,
    ThreadList,
    ThreadPage,
    ThreadRename,
    ThreadSaved,
)
from memoria_gateway.memory_routes import NOT_ANSWERING
from memoria_gateway.thread_routes import THREAD_NOT_FOUND, thread_router
from memoria_runtime.auth import TokenIssuer

SECRET = "a-test-secret-long-enough-for-hs256"
USER = "ana"
WHEN = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
THREAD_ID_PATTERN = re.compile(r"^[A-Za-z0-9._-]{1,64}$")

Reply = ContractModel | Exception


class ScriptedThreads:
    """Stands in for MemoryClient's thread calls: records them, answers as scripted."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, Any]] = []
        self.replies: dict[str, list[Reply]] = {}

    def script(self, method: str, *replies: Reply) -> None:
        self.replies.setdefault(method, []).extend(replies)

    def _answer(self, method: str, user_id: str, request: Any) -> Any:
        self.calls.append((method, user_id, request))
        reply = self.replies[method].pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply

    async def threads(self, user_id: str, request: ThreadList) -> ThreadPage | ThreadFailure:
        answer: ThreadPage | ThreadFailure = self._answer("threads", user_id, request)
        return answer

    async def create_thread(
        self, user_id: str, request: ThreadCreate
    ) -> ThreadSaved | ThreadFailure:
        answer: ThreadSaved | ThreadFailure = self._answer("create_thread", user_id, request)
        return answer

    async def rename_thread(
        self, user_id: str, request: ThreadRename
    ) -> ThreadSaved | ThreadFailure:
        answer: ThreadSaved | ThreadFailure = self._answer("rename_thread", user_id, request)
        return answer

    async def session_config(
        self, user_id: str, request: SessionConfigGet
    ) -> SessionConfigState | ThreadFailure:
        answer: SessionConfigState | ThreadFailure = self._answer(
            "session_config", user_id, request
        )
        return answer

    async def update_session_config(
        self, user_id: str, request: SessionConfigUpdate
    ) -> SessionConfigState | ThreadFailure:
        answer: SessionConfigState | ThreadFailure = self._answer(
            "update_session_config", user_id, request
        )
        return answer


def a_thread(thread_id: str = "t_1", title: str = "New chat") -> Thread:
    return Thread(
        thread_id=thread_id,
        title=title,
        created_at=WHEN,
        updated_at=WHEN,
        message_count=0,
        last_message=None,
    )


@pytest.fixture
def issuer() -> TokenIssuer:
    return TokenIssuer(SECRET, 3600)


@pytest.fixture
def backend() -> ScriptedThreads:
    return ScriptedThreads()


@pytest.fixture
def client(backend: ScriptedThreads, issuer: TokenIssuer) -> Iterator[TestClient]:
    app = FastAPI()
    app.include_router(thread_router(backend, lambda: issuer))
    with TestClient(app) as test_client:
        test_client.headers["Authorization"] = f"Bearer {issuer.issue(USER)}"
        yield test_client


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/api/threads", None),
        ("POST", "/api/threads", {}),
        ("PATCH", "/api/threads/t1", {"title": "x"}),
    ],
)
@pytest.mark.parametrize("authorization", [None, "Bearer forged", "Basic YW5hOnB3"])
def test_every_route_needs_a_valid_bearer_token(
    client: TestClient,
    backend: ScriptedThreads,
    method: str,
    path: str,
    body: dict[str, Any] | None,
    authorization: str | None,
) -> None:
    headers = {} if authorization is None else {"Authorization": authorization}
    del client.headers["Authorization"]
    response = client.request(method, path, json=body, headers=headers)
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == "Bearer"
    assert backend.calls == []


def test_list_asks_for_the_callers_threads(client: TestClient, backend: ScriptedThreads) -> None:
    backend.script("threads", ThreadPage(threads=[a_thread("t_2"), a_thread("t_1")]))
    response = client.get("/api/threads", params={"limit": 2, "user_id": "bob"})
    assert response.status_code == 200
    assert [t["thread_id"] for t in response.json()["threads"]] == ["t_2", "t_1"]
    assert response.json()["threads"][0] == {
        "thread_id": "t_2",
        "title": "New chat",
        "created_at": "2025-01-02T03:04:05Z",
        "updated_at": "2025-01-02T03:04:05Z",
        "message_count": 0,
        "last_message": None,
    }
    assert backend.calls == [("threads", USER, ThreadList(limit=2))]


@pytest.mark.parametrize("limit", [0, 201, "many"])
def test_list_limits_are_checked(client: TestClient, backend: ScriptedThreads, limit: Any) -> None:
    assert client.get("/api/threads", params={"limit": limit}).status_code == 422
    assert backend.calls == []


def test_list_defaults_to_fifty(client: TestClient, backend: ScriptedThreads) -> None:
    backend.script("threads", ThreadPage(threads=[]))
    assert client.get("/api/threads").json() == {"threads": []}
    assert backend.calls == [("threads", USER, ThreadList(limit=50))]


@pytest.mark.parametrize(
    ("body", "title"), [({}, None), ({"title": None}, None), ({"title": "  Trip  "}, "Trip")]
)
def test_create_makes_the_thread_id_here(
    client: TestClient, backend: ScriptedThreads, body: dict[str, Any], title: str | None
) -> None:
    backend.script("create_thread", ThreadSaved(created=True, thread=a_thread("t_made")))
    response = client.post("/api/threads", json=body)
    assert response.status_code == 201
    assert response.json()["thread_id"] == "t_made"
    [(_, user_id, request)] = backend.calls
    assert user_id == USER
    assert isinstance(request, ThreadCreate)
    assert request.title == title
    assert THREAD_ID_PATTERN.fullmatch(request.thread_id)
    assert re.fullmatch(r"t_[0-9a-z]{26}", request.thread_id)


def test_two_creates_make_two_threads(client: TestClient, backend: ScriptedThreads) -> None:
    backend.script("create_thread", *(ThreadSaved(created=True, thread=a_thread()),) * 2)
    client.post("/api/threads", json={})
    client.post("/api/threads", json={})
    first, second = (request.thread_id for _, _, request in backend.calls)
    assert first != second


@pytest.mark.parametrize(
    "body",
    [
        {"title": ""},
        {"title": "   "},
        {"title": "x" * 121},
        {"title": "ok", "user_id": "bob"},
        {"thread_id": "mine"},
        {"title": 5},
    ],
)
def test_create_refuses_bad_bodies(
    client: TestClient, backend: ScriptedThreads, body: dict[str, Any]
) -> None:
    assert client.post("/api/threads", json=body).status_code == 422
    assert backend.calls == []


def test_rename(client: TestClient, backend: ScriptedThreads) -> None:
    backend.script("rename_thread", ThreadSaved(created=False, thread=a_thread("t1", "Italy")))
    response = client.patch("/api/threads/t1", json={"title": " " + "I" * 120 + " "})
    assert response.status_code == 200
    assert response.json()["title"] == "Italy"
    assert backend.calls == [("rename_thread", USER, ThreadRename(thread_id="t1", title="I" * 120))]


@pytest.mark.parametrize(
    "body", [{}, {"title": ""}, {"title": " \n "}, {"title": "x" * 121}, {"title": "a", "x": 1}]
)
def test_rename_refuses_bad_titles(
    client: TestClient, backend: ScriptedThreads, body: dict[str, Any]
) -> None:
    assert client.patch("/api/threads/t1", json=body).status_code == 422
    assert backend.calls == []


def test_renaming_a_thread_that_is_not_yours_is_not_found(
    client: TestClient, backend: ScriptedThreads
) -> None:
    backend.script("rename_thread", ThreadFailure(code="not_found", error_message="no such thread"))
    response = client.patch("/api/threads/someone-elses", json={"title": "Mine"})
    assert response.status_code == 404
    assert response.json() == {"detail": THREAD_NOT_FOUND}


def test_an_id_that_cannot_exist_is_not_found_without_asking(
    client: TestClient, backend: ScriptedThreads
) -> None:
    response = client.patch(f"/api/threads/{'x' * 65}", json={"title": "Mine"})
    assert response.status_code == 404
    assert response.json() == {"detail": THREAD_NOT_FOUND}
    assert backend.calls == []


def test_a_silent_memory_service_is_a_503(client: TestClient, backend: ScriptedThreads) -> None:
    backend.script("threads", TimeoutError())
    response = client.get("/api/threads")
    assert response.status_code == 503
    assert response.json() == {"detail": NOT_ANSWERING}


def test_openapi_documents_the_thread_routes(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    operations = {
        (method.upper(), path): operation
        for path, methods in spec["paths"].items()
        for method, operation in methods.items()
    }
    assert set(operations) == {
        ("GET", "/api/threads"),
        ("POST", "/api/threads"),
        ("PATCH", "/api/threads/{thread_id}"),
        ("GET", "/api/threads/{thread_id}/config"),
        ("PATCH", "/api/threads/{thread_id}/config"),
    }
    for operation in operations.values():
        assert operation["summary"] and operation["description"]
        assert operation["security"] == [{"HTTPBearer": []}]
        assert {"401", "503"} <= set(operation["responses"])
    assert "201" in operations["POST", "/api/threads"]["responses"]
    assert "404" in operations["PATCH", "/api/threads/{thread_id}"]["responses"]
    assert "404" in operations["GET", "/api/threads/{thread_id}/config"]["responses"]
    assert "404" in operations["PATCH", "/api/threads/{thread_id}/config"]["responses"]

"""GET/PATCH /api/threads/{thread_id}/config and the ``session_config`` WebSocket frame,
over the memory service's real session config code and a SQLite document store (no broker:
the backend calls what the memory service's handler calls)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from in_process_sessions import InProcessSessions, in_process_sessions

from memoria_contracts.frames import ClientSessionConfig, ErrorFrame, SessionConfigFrame
from memoria_gateway import validation_errors
from memoria_gateway.intake import Intake
from memoria_gateway.session_frames import answer_session_config
from memoria_gateway.thread_routes import THREAD_NOT_FOUND, thread_router
from memoria_runtime.auth import TokenIssuer
from memoria_runtime.settings import Settings

SECRET = "a-test-secret-long-enough-for-hs256"
SETTINGS = Settings.load(_env_file=None, system_prompt="Be kind.", memory_limit=20)


@pytest.fixture
async def sessions(tmp_path: Path) -> AsyncIterator[InProcessSessions]:
    async with in_process_sessions(tmp_path, SETTINGS) as backend:
        yield backend


@pytest.fixture
def issuer() -> TokenIssuer:
    return TokenIssuer(SECRET, 3600)


@pytest.fixture
def client(sessions: InProcessSessions, issuer: TokenIssuer) -> Iterator[TestClient]:
    app = FastAPI()
    validation_errors.install(app)  # as the gateway does
    app.include_router(thread_router(sessions, lambda: issuer))  # type: ignore[arg-type]
    with TestClient(app) as test_client:
        yield test_client


def auth(issuer: TokenIssuer, user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {issuer.issue(user)}"}


def test_read_gives_the_defaults_and_the_user(client: TestClient, issuer: TokenIssuer) -> None:
    response = client.get("/api/threads/t1/config", headers=auth(issuer, "ana"))
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["user_id"] == "ana"
    assert body["config"]["thread_id"] == "t1"
    assert body["config"]["system_prompt"] == "Be kind."
    assert body["config"]["memory_limit"] == 20
    assert body["config"]["chat_model"] is None
    assert body["config"]["proactive_retrieval"] is False
    assert set(body["config"]["memory_type_descriptions"]) == {
        "user_profile",
        "preference",
        "goal",
        "constraint",
        "critical_info",
    }
    assert all(value is None for value in body["overrides"].values())


def test_patch_changes_what_it_names_and_null_resets(
    client: TestClient, issuer: TokenIssuer
) -> None:
    headers = auth(issuer, "ana")
    first = client.patch(
        "/api/threads/t1/config",
        json={"memory_limit": 3, "proactive_retrieval": True, "system_prompt": "Be brief."},
        headers=headers,
    )
    assert first.status_code == 200, first.text
    assert first.json()["config"]["memory_limit"] == 3
    second = client.patch("/api/threads/t1/config", json={"system_prompt": None}, headers=headers)
    config = second.json()["config"]
    assert config["system_prompt"] == "Be kind."  # back to the default
    assert (config["memory_limit"], config["proactive_retrieval"]) == (3, True)
    assert client.get("/api/threads/t1/config", headers=headers).json() == second.json()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"memory_limit": 0}, "memory_limit"),
        ({"memory_min_relevance": 2}, "memory_min_relevance"),
        ({"system_prompt": " "}, "system_prompt"),
        ({"chat_model": "not a model"}, "chat_model"),
        ({"memory_type_descriptions": {"hobby": "x"}}, "memory_type_descriptions"),
        ({"user_id": "bob"}, "user_id"),
    ],
)
def test_invalid_values_are_a_422_that_names_the_field(
    client: TestClient, issuer: TokenIssuer, body: dict[str, Any], field: str
) -> None:
    response = client.patch("/api/threads/t1/config", json=body, headers=auth(issuer, "ana"))
    assert response.status_code == 422, response.text
    errors = response.json()["detail"]
    assert any(field in error["loc"] for error in errors), errors
    assert all(error["msg"] for error in errors)
    unchanged = client.get("/api/threads/t1/config", headers=auth(issuer, "ana")).json()
    assert all(value is None for value in unchanged["overrides"].values())


@pytest.mark.parametrize(
    "raw",
    ['{"system_prompt": "\\ud800 lone"}', '{"memory_type_descriptions": {"goal": "x\\udfff"}}'],
)
def test_a_lone_surrogate_is_a_422_not_a_500(
    client: TestClient, issuer: TokenIssuer, raw: str
) -> None:
    headers = {**auth(issuer, "ana"), "content-type": "application/json"}
    response = client.patch("/api/threads/t1/config", content=raw, headers=headers)
    assert response.status_code == 422, response.text


def test_another_users_thread_is_not_found(client: TestClient, issuer: TokenIssuer) -> None:
    bob = auth(issuer, "bob")
    for response in (
        client.get("/api/threads/t1/config", headers=bob),
        client.patch("/api/threads/t1/config", json={"memory_limit": 1}, headers=bob),
        client.get("/api/threads/no-such-thread/config", headers=auth(issuer, "ana")),
        client.get("/api/threads/bad%20id/config", headers=auth(issuer, "ana")),
    ):
        assert response.status_code == 404, response.text
        assert response.json() == {"detail": THREAD_NOT_FOUND}
    ana = client.get("/api/threads/t1/config", headers=auth(issuer, "ana")).json()
    assert ana["config"]["memory_limit"] == 20  # bob's attempt changed nothing


@pytest.mark.parametrize("authorization", [None, "Bearer forged"])
def test_no_valid_token_is_a_401(client: TestClient, authorization: str | None) -> None:
    headers = {"Authorization": authorization} if authorization else {}
    assert client.get("/api/threads/t1/config", headers=headers).status_code == 401
    response = client.patch("/api/threads/t1/config", json={}, headers=headers)
    assert response.status_code == 401


def test_the_memory_service_not_answering_is_a_503(
    client: TestClient, issuer: TokenIssuer, sessions: InProcessSessions
) -> None:
    sessions.failing = TimeoutError()
    response = client.get("/api/threads/t1/config", headers=auth(issuer, "ana"))
    assert response.status_code == 503


def test_openapi_documents_both_routes(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert set(paths["/api/threads/{thread_id}/config"]) == {"get", "patch"}


# -- the WebSocket frame --------------------------------------------------------------------


def frame(data: dict[str, Any]) -> ClientSessionConfig:
    return ClientSessionConfig.model_validate(data)


async def test_the_frame_reads_and_changes(sessions: InProcessSessions) -> None:
    read = await answer_session_config(
        sessions, "ana", frame({"type": "session_config", "thread_id": "t1"})
    )
    assert isinstance(read, SessionConfigFrame)
    assert (read.user_id, read.config.memory_limit) == ("ana", 20)
    changed = await answer_session_config(
        sessions,
        "ana",
        frame({"type": "session_config", "thread_id": "t1", "config": {"memory_limit": 2}}),
    )
    assert isinstance(changed, SessionConfigFrame)
    assert changed.config.memory_limit == 2
    assert changed.model_dump(mode="json")["type"] == "session_config"


async def test_the_frame_refuses_another_users_thread(sessions: InProcessSessions) -> None:
    for data in (
        {"type": "session_config", "thread_id": "t1"},
        {"type": "session_config", "thread_id": "t1", "config": {"memory_limit": 2}},
    ):
        reply = await answer_session_config(sessions, "bob", frame(data))
        assert isinstance(reply, ErrorFrame) and reply.code == "not_found"
    ana = await answer_session_config(
        sessions, "ana", frame({"type": "session_config", "thread_id": "t1"})
    )
    assert isinstance(ana, SessionConfigFrame) and ana.config.memory_limit == 20


async def test_the_frame_says_when_the_memory_service_is_away(
    sessions: InProcessSessions,
) -> None:
    sessions.failing = TimeoutError()
    reply = await answer_session_config(
        sessions, "ana", frame({"type": "session_config", "thread_id": "t1"})
    )
    assert isinstance(reply, ErrorFrame) and reply.code == "unavailable"


def test_the_socket_parses_the_frame_and_refuses_bad_ones() -> None:
    intake = Intake(SETTINGS.gateway, None, None)  # type: ignore[arg-type]  # parse needs none
    parsed = intake.parse('{"type": "session_config", "thread_id": "t1", "config": {}}')
    assert isinstance(parsed, ClientSessionConfig) and parsed.config is not None
    for raw in (
        '{"type": "session_config", "thread_id": "t1", "config": {"memory_limit": 0}}',
        '{"type": "session_config", "thread_id": "t1", "config": {"user_id": "bob"}}',
        '{"type": "session_config", "thread_id": "t1", "user_id": "bob"}',
        '{"type": "session_config"}',
    ):
        refused = intake.parse(raw)
        assert isinstance(refused, ErrorFrame) and refused.code == "invalid_frame", raw
    bad_limit = intake.parse(
        '{"type": "session_config", "thread_id": "t1", "config": {"memory_limit": 0}}'
    )
    assert isinstance(bad_limit, ErrorFrame)
    assert bad_limit.message == "Memory limit must be at least 1."

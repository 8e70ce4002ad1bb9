"""Persona switching over HTTP and the WebSocket frame: GET /api/personas, PATCH
``persona`` logged in agentHistory, unknown persona 422, another user's thread 404; and the
decision's detection of the switch over the same store (switch, next cycle, redelivery).

As in test_session_config_routes.py: the memory service's real code over SQLite, no broker."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from core_cycles import AT, CONFIG, arrived
from fastapi import FastAPI
from fastapi.testclient import TestClient
from in_process_sessions import InProcessSessions, in_process_sessions

from memoria_contracts.frames import ClientSessionConfig, ErrorFrame, SessionConfigFrame
from memoria_contracts.session import (
    SessionConfigGet,
    SessionConfigState,
    SessionConfigUpdate,
    SessionPersonaApplied,
)
from memoria_decision.core import events
from memoria_decision.core.machine import decide
from memoria_decision.core.state import CycleState
from memoria_gateway import validation_errors
from memoria_gateway.persona_routes import persona_router
from memoria_gateway.session_frames import answer_session_config
from memoria_gateway.thread_routes import THREAD_NOT_FOUND, thread_router
from memoria_runtime.auth import TokenIssuer
from memoria_runtime.personas import load_personas
from memoria_runtime.settings import Settings

SECRET = "a-test-secret-long-enough-for-hs256"
SETTINGS = Settings.load(_env_file=None)
PERSONAS = load_personas(SETTINGS.cycle)


@pytest.fixture
async def memory(tmp_path: Path) -> AsyncIterator[InProcessSessions]:
    async with in_process_sessions(tmp_path, SETTINGS) as backend:
        yield backend


@pytest.fixture
def issuer() -> TokenIssuer:
    return TokenIssuer(SECRET, 3600)


@pytest.fixture
def client(memory: InProcessSessions, issuer: TokenIssuer) -> Iterator[TestClient]:
    app = FastAPI()
    validation_errors.install(app)
    app.include_router(thread_router(memory, lambda: issuer))  # type: ignore[arg-type]
    app.include_router(persona_router(PERSONAS, lambda: issuer))
    with TestClient(app) as test_client:
        yield test_client


def auth(issuer: TokenIssuer, user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {issuer.issue(user)}"}


def switch(client: TestClient, issuer: TokenIssuer, persona: str | None) -> Any:
    response = client.patch(
        "/api/threads/t1/config", json={"persona": persona}, headers=auth(issuer, "ana")
    )
    assert response.status_code == 200, response.text
    return response.json()


def test_personas_are_listed_for_a_signed_in_user(client: TestClient, issuer: TokenIssuer) -> None:
    assert client.get("/api/personas").status_code == 401
    body = client.get("/api/personas", headers=auth(issuer, "ana")).json()
    assert body["default"] == "memoria"
    assert [p["id"] for p in body["personas"]] == ["memoria", "tutor", "coach"]
    assert set(body["personas"][1]) == {"id", "name", "description"}  # no prompts leak


def test_a_switch_is_logged_in_agent_history(client: TestClient, issuer: TokenIssuer) -> None:
    fresh = client.get("/api/threads/t1/config", headers=auth(issuer, "ana")).json()
    assert fresh["config"]["persona"] == "memoria" and fresh["agentHistory"] == []
    first = switch(client, issuer, "tutor")
    assert first["config"]["persona"] == "tutor"
    [entry] = first["agentHistory"]
    assert (entry["seq"], entry["previous"], entry["persona"], entry["by"]) == (
        1,
        "memoria",
        "tutor",
        "ana",
    )
    assert switch(client, issuer, "tutor")["agentHistory"] == first["agentHistory"]  # no-op
    back = switch(client, issuer, None)  # reset: back to the default persona
    assert back["config"]["persona"] == "memoria"
    assert [(e["seq"], e["previous"], e["persona"]) for e in back["agentHistory"]] == [
        (1, "memoria", "tutor"),
        (2, "tutor", "memoria"),
    ]
    read = client.get("/api/threads/t1/config", headers=auth(issuer, "ana")).json()
    assert read["agentHistory"] == back["agentHistory"]


def test_an_unknown_persona_is_a_422(client: TestClient, issuer: TokenIssuer) -> None:
    headers = auth(issuer, "ana")
    for body in ({"persona": "pirate"}, {"persona": "Not An Id!"}):
        response = client.patch("/api/threads/t1/config", json=body, headers=headers)
        assert response.status_code == 422, response.text
        assert response.json()["detail"][0]["loc"][-1] == "persona"
    config = client.get("/api/threads/t1/config", headers=headers).json()
    assert config["config"]["persona"] == "memoria" and config["agentHistory"] == []


def test_another_users_thread_is_not_found(client: TestClient, issuer: TokenIssuer) -> None:
    response = client.patch(
        "/api/threads/t1/config", json={"persona": "coach"}, headers=auth(issuer, "bob")
    )
    assert response.status_code == 404
    assert response.json() == {"detail": THREAD_NOT_FOUND}
    ana = client.get("/api/threads/t1/config", headers=auth(issuer, "ana")).json()
    assert ana["config"]["persona"] == "memoria" and ana["agentHistory"] == []


async def test_the_frame_switches_and_refuses_an_unknown_persona(memory: InProcessSessions) -> None:
    def frame(config: dict[str, Any]) -> ClientSessionConfig:
        data = {"type": "session_config", "thread_id": "t1", "config": config}
        return ClientSessionConfig.model_validate(data)

    switched = await answer_session_config(memory, "ana", frame({"persona": "coach"}))
    assert isinstance(switched, SessionConfigFrame)
    assert switched.config.persona == "coach"
    assert switched.model_dump(mode="json")["agentHistory"][0]["persona"] == "coach"
    refused = await answer_session_config(memory, "ana", frame({"persona": "pirate"}))
    assert isinstance(refused, ErrorFrame) and refused.code == "invalid_frame"
    assert "pirate" in refused.message
    other = await answer_session_config(memory, "bob", frame({"persona": "tutor"}))
    assert isinstance(other, ErrorFrame) and other.code == "not_found"


# -- detection by the decision service, over the same store ---------------------------------


async def cycle_persona(
    memory: InProcessSessions, cycle_id: str, *, asks_model: bool = True
) -> Any:
    """What a cycle's start detects (decision's core, on the thread's stored config); a
    cycle that asks a model records it (a fast path not)."""
    get = SessionConfigGet(thread_id="t1", defaults_if_missing=True)
    stored = await memory.session_config("ana", get, cycle_id=cycle_id)
    message = arrived().message.model_copy(update={"cycle_id": cycle_id})
    opening = decide(None, events.Arrived(**{**arrived().__dict__, "message": message}), CONFIG)
    begun = decide(opening.state, events.Answered(AT, "session", (stored,)), CONFIG).state
    assert isinstance(begun, CycleState) and begun.persona is not None
    if asks_model and begun.persona_record is not None:
        applied = SessionPersonaApplied(thread_id="t1", applied=begun.persona_record)
        await memory.persona_applied("ana", applied, cycle_id=cycle_id)
    return begun.persona


async def change(memory: InProcessSessions, persona: str) -> None:
    update = SessionConfigUpdate.model_validate({"thread_id": "t1", "set": {"persona": persona}})
    assert isinstance(await memory.update_session_config("ana", update), SessionConfigState)


async def test_detection_switch_next_cycle_and_redelivery(memory: InProcessSessions) -> None:
    before = await cycle_persona(memory, "cyc_0")
    assert before.persona.id == "memoria" and before.reset is None
    assert memory.recorded == []  # nothing to record without a switch

    await change(memory, "tutor")
    fast = await cycle_persona(memory, "cyc_f", asks_model=False)  # "list my memories"
    assert fast.reset is not None and memory.recorded == []  # not used up: no model saw it
    after = await cycle_persona(memory, "cyc_1")
    assert after.persona.id == "tutor"
    assert after.reset is not None
    assert (after.reset.turn, after.reset.previous_id, after.reset.previous_name) == (
        0,
        "memoria",
        "Memoria",
    )
    redelivered = await cycle_persona(memory, "cyc_1")  # the start runs again
    assert redelivered == after

    next_cycle = await cycle_persona(memory, "cyc_2")
    assert next_cycle.reset is not None and next_cycle.reset.turn == 1  # strategies decide

    await change(memory, "coach")
    await change(memory, "memoria")
    two = await cycle_persona(memory, "cyc_3")
    assert two.persona.id == "memoria"
    assert two.reset is not None and two.reset.previous_id == "tutor" and two.reset.turn == 0

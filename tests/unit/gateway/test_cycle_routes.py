"""/api/cycles: who the caller is, what reaches the memory service, how its answers map to
HTTP. The memory service is a scripted stand-in (the integration suite runs the real one)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from memoria_contracts.chat import ChatRecord
from memoria_contracts.cycles import Cycle, CycleEvent, CycleFailure, CycleFound
from memoria_gateway.cycle_routes import CYCLE_NOT_FOUND, cycle_router
from memoria_gateway.memory_routes import BAD_REPLY, NOT_ANSWERING
from memoria_runtime.auth import TokenIssuer
from memoria_runtime.bus.request_reply import RpcError

SECRET = "a-test-secret-long-enough-for-hs256"
USER = "ana"
WHEN = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
CYCLE_ID = "cyc_01hzy3k2v7q9r8s6t5u4w3x2y1"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"

Reply = CycleFound | CycleFailure | Exception


class ScriptedCycles:
    """Stands in for MemoryClient.cycle: records the calls, answers as scripted."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.replies: list[Reply] = []

    async def cycle(self, user_id: str, cycle_id: str) -> CycleFound | CycleFailure:
        self.calls.append((user_id, cycle_id))
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply


def a_cycle() -> Cycle:
    message = ChatRecord(
        id="msg_1", chat_history=True, modal="text", role="user", content="hi", created_at=WHEN
    )
    return Cycle(
        cycle_id=CYCLE_ID,
        thread_id="t-1",
        trace_id=TRACE_ID,
        started_at=WHEN,
        ended_at=WHEN,
        end_reason="done",
        actions=["Finalize"],
        events=[
            CycleEvent(
                event_id="evt_1",
                at=WHEN,
                stream="chat.in",
                type="user.message",
                trace_id=TRACE_ID,
                message=message,
            ),
            CycleEvent(
                event_id="evt_2",
                at=WHEN,
                stream="actions",
                type="action.requested",
                trace_id=TRACE_ID,
                step=1,
                action="Finalize",
            ),
        ],
    )


@pytest.fixture
def issuer() -> TokenIssuer:
    return TokenIssuer(SECRET, 3600)


@pytest.fixture
def backend() -> ScriptedCycles:
    return ScriptedCycles()


@pytest.fixture
def client(backend: ScriptedCycles, issuer: TokenIssuer) -> Iterator[TestClient]:
    app = FastAPI()
    app.include_router(cycle_router(backend, lambda: issuer))
    with TestClient(app) as test_client:
        test_client.headers["Authorization"] = f"Bearer {issuer.issue(USER)}"
        yield test_client


@pytest.mark.parametrize("authorization", [None, "Bearer forged", "Basic YW5hOnB3"])
def test_the_route_needs_a_valid_bearer_token(
    client: TestClient, backend: ScriptedCycles, authorization: str | None
) -> None:
    del client.headers["Authorization"]
    headers = {} if authorization is None else {"Authorization": authorization}
    response = client.get(f"/api/cycles/{CYCLE_ID}", headers=headers)
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == "Bearer"
    assert backend.calls == []


def test_a_cycle_of_the_caller_is_returned(client: TestClient, backend: ScriptedCycles) -> None:
    backend.replies.append(CycleFound(cycle=a_cycle()))
    response = client.get(f"/api/cycles/{CYCLE_ID}", params={"user_id": "bob"})
    assert response.status_code == 200
    assert backend.calls == [(USER, CYCLE_ID)]  # the token's user, never a parameter
    body = response.json()
    assert (body["cycle_id"], body["trace_id"], body["end_reason"]) == (CYCLE_ID, TRACE_ID, "done")
    assert [e["type"] for e in body["events"]] == ["user.message", "action.requested"]
    assert body["events"][0]["message"]["chat-history"] is True  # the chat message's key names
    assert body["events"][1] == {
        "event_id": "evt_2",
        "at": "2025-01-02T03:04:05Z",
        "stream": "actions",
        "type": "action.requested",
        "trace_id": TRACE_ID,
        "step": 1,
        "action": "Finalize",
    }  # only the fields of its type
    assert "step" not in body["events"][0]


def test_an_unknown_or_another_users_cycle_is_a_404(
    client: TestClient, backend: ScriptedCycles
) -> None:
    backend.replies.append(
        CycleFailure(code="not_found", error_message="no such cycle", cycle_id=CYCLE_ID)
    )
    response = client.get(f"/api/cycles/{CYCLE_ID}")
    assert response.status_code == 404
    assert response.json() == {"detail": CYCLE_NOT_FOUND}


@pytest.mark.parametrize("cycle_id", ["msg_123", "cyc_", "cyc_a.b", "cyc_" + "x" * 81, "x"])
def test_a_malformed_cycle_id_is_a_422_without_asking(
    client: TestClient, backend: ScriptedCycles, cycle_id: str
) -> None:
    response = client.get(f"/api/cycles/{cycle_id}")
    assert response.status_code == 422
    assert backend.calls == []


@pytest.mark.parametrize(
    ("failure", "status", "detail"),
    [
        (TimeoutError(), 503, NOT_ANSWERING),
        (RpcError("unexpected_reply", "expected cycle.found"), 502, BAD_REPLY),
    ],
)
def test_a_memory_service_that_does_not_answer_is_a_5xx(
    client: TestClient, backend: ScriptedCycles, failure: Exception, status: int, detail: str
) -> None:
    backend.replies.append(failure)
    response = client.get(f"/api/cycles/{CYCLE_ID}")
    assert response.status_code == status
    assert response.json() == {"detail": detail}


def test_the_openapi_document_describes_the_route(client: TestClient) -> None:
    operation = client.get("/openapi.json").json()["paths"]["/api/cycles/{cycle_id}"]["get"]
    assert set(operation["responses"]) >= {"200", "401", "404", "422", "502", "503"}

"""A socket says who it is in its handshake (the ``bearer.<token>`` subprotocol, or the older
``?token=``) or in its first frame; a missing or bad token gets one ``unauthorized`` frame
and close 4401, and no refusal quotes what the client sent."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import FastAPI, WebSocket
from fastapi.testclient import TestClient
from starlette.testclient import WebSocketTestSession
from starlette.websockets import WebSocketDisconnect

from memoria_gateway.socket_auth import accept_and_authenticate, read_handshake
from memoria_gateway.ws import refuse
from memoria_runtime.auth import AuthError, TokenIssuer

SECRET = "a-test-secret-long-enough-for-hs256"
ISSUER = TokenIssuer(SECRET, 3600)
TOKEN = ISSUER.issue("ana")
FORGED = TokenIssuer("another-secret-long-enough-for-hs256", 3600).issue("ana")
AUTH_TIMEOUT_S = 0.3


@pytest.fixture
def client() -> Iterator[TestClient]:
    """A socket route that authenticates as the gateway's does, then names the user."""
    app = FastAPI()

    @app.websocket("/ws")
    async def socket(websocket: WebSocket, token: str | None = None) -> None:
        try:
            user_id = await accept_and_authenticate(websocket, ISSUER, token, AUTH_TIMEOUT_S)
        except AuthError as exc:
            await refuse(websocket, "unauthorized", str(exc))
            return
        await websocket.send_json({"user_id": user_id})
        await websocket.close()

    with TestClient(app) as test_client:
        yield test_client


def refused(ws: WebSocketTestSession) -> dict[str, Any]:
    """The error frame that refuses the socket, after checking the close code."""
    frame: dict[str, Any] = ws.receive_json()
    with pytest.raises(WebSocketDisconnect) as closed:
        ws.receive_json()
    assert closed.value.code == 4401
    assert frame["type"] == "error" and frame["code"] == "unauthorized"
    return frame


def test_the_bearer_subprotocol_authenticates_and_only_memoria_v1_is_echoed(
    client: TestClient,
) -> None:
    with client.websocket_connect("/ws", subprotocols=["memoria.v1", f"bearer.{TOKEN}"]) as ws:
        assert ws.accepted_subprotocol == "memoria.v1"
        assert ws.receive_json() == {"user_id": "ana"}


def test_the_query_token_still_works(client: TestClient) -> None:
    with client.websocket_connect(f"/ws?token={TOKEN}") as ws:
        assert ws.accepted_subprotocol is None
        assert ws.receive_json() == {"user_id": "ana"}


def test_a_first_auth_frame_authenticates(client: TestClient) -> None:
    with client.websocket_connect("/ws") as ws:
        ws.send_text(json.dumps({"type": "auth", "token": TOKEN}))
        assert ws.receive_json() == {"user_id": "ana"}


def test_a_forged_token_in_the_subprotocol_is_refused(client: TestClient) -> None:
    with client.websocket_connect("/ws", subprotocols=["memoria.v1", f"bearer.{FORGED}"]) as ws:
        assert FORGED not in refused(ws)["message"]


def test_a_forged_token_in_the_auth_frame_is_refused(client: TestClient) -> None:
    with client.websocket_connect("/ws") as ws:
        ws.send_text(json.dumps({"type": "auth", "token": FORGED}))
        assert refused(ws)["message"] == "the token is not valid"


@pytest.mark.parametrize(
    "first",
    [
        json.dumps({"type": "message", "thread_id": "t1", "content": "hi"}),
        json.dumps({"type": "auth"}),
        json.dumps({"type": "auth", "token": ""}),
        json.dumps({"type": "auth", "token": FORGED, "extra": 1}),
        json.dumps({"type": "auth", "token": ["not", FORGED]}),
        "not json " + FORGED,
    ],
)
def test_a_first_frame_that_is_no_auth_frame_is_refused_without_quoting_it(
    client: TestClient, first: str
) -> None:
    with client.websocket_connect("/ws") as ws:
        ws.send_text(first)
        message = refused(ws)["message"]
    assert '{"type": "auth", "token": "<token>"}' in message
    assert FORGED not in message


def test_no_auth_frame_in_time_is_refused(client: TestClient) -> None:
    with client.websocket_connect("/ws") as ws:
        assert f"no token within {AUTH_TIMEOUT_S:g} s" in refused(ws)["message"]


def test_the_subprotocol_token_wins_over_the_query() -> None:
    handshake = read_handshake(["bearer.from-header", "memoria.v1"], "from-query")
    assert handshake.token == "from-header"
    assert handshake.subprotocol == "memoria.v1"


def test_the_token_subprotocol_is_never_the_one_accepted() -> None:
    handshake = read_handshake([f"bearer.{TOKEN}"], None)
    assert handshake.token == TOKEN
    assert handshake.subprotocol is None


def test_an_empty_query_token_waits_for_the_auth_frame() -> None:
    assert read_handshake([], "").token is None

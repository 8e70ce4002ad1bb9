"""A user's token reaches no output of any service: the four services' stdout/stderr (their
logs, uvicorn's socket lines included) and their exported spans, while the user connects
each of the three ways, chats, and provokes every refusal that could quote a request."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets
from stack import SERVICES, Stack, running_stack
from websockets.typing import Subprotocol
from ws_client import ChatClient, Frame, chat

from memoria_runtime.auth import TokenIssuer

pytestmark = pytest.mark.integration

ANSWER = "Hello there, friend!"
SCRIPT: dict[str, Any] = {
    "rules": [{"match": "", "decide": ["Finalize"], "chat": {"Finalize": ANSWER}}],
    "chat_chunk_words": 1,
}
HANDSHAKE_TIMEOUT_S = 10.0


def spans_path(data_dir: Path, service: str) -> Path:
    return data_dir / f"spans-{service}.jsonl"


async def chat_once(client: ChatClient, thread_id: str) -> None:
    accepted = await client.send(thread_id, "hi there")
    assert accepted["type"] == "accepted", accepted
    frames = await client.cycle(accepted["id"])
    assert frames[-1]["reason"] == "done", frames


async def refusal(url: str, first: str | None = None, **connect: Any) -> tuple[Frame, int | None]:
    """The error frame a refused socket gets, and its close code."""
    async with websockets.connect(url, open_timeout=HANDSHAKE_TIMEOUT_S, **connect) as ws:
        if first is not None:
            await ws.send(first)
        frame: Frame = json.loads(await ws.recv())
        await ws.wait_closed()
        return frame, ws.close_code


async def exercise(stack: Stack, token: str) -> None:
    """Everything a user (or a careless client) does with a token."""
    thread_id = f"t-{uuid.uuid4().hex[:8]}"
    bearer = [Subprotocol("memoria.v1"), Subprotocol(f"bearer.{token}")]

    # The three ways to authenticate, each followed by a whole cycle.
    async with chat(f"{stack.ws_base}?token={token}") as client:
        await chat_once(client, thread_id)
        # Errors on an open socket, each quoting the token in what the client sent.
        stray = {"type": "message", "thread_id": thread_id, "content": "x", "token": token}
        reply = await client.send_raw(json.dumps(stray))
        assert reply["code"] == "invalid_frame" and token not in json.dumps(reply), reply
        late_auth = await client.send_raw(json.dumps({"type": "auth", "token": token}))
        assert late_auth["code"] == "invalid_frame" and token not in json.dumps(late_auth)
        not_json = await client.send_raw(f"token={token} {{")
        assert not_json["code"] == "invalid_frame" and token not in json.dumps(not_json)
    async with websockets.connect(stack.ws_base, subprotocols=bearer, max_size=None) as ws:
        assert ws.subprotocol == "memoria.v1"
        await chat_once(ChatClient(ws), thread_id)
    async with websockets.connect(stack.ws_base, max_size=None) as ws:
        await ws.send(json.dumps({"type": "auth", "token": token}))
        await chat_once(ChatClient(ws), thread_id)

    # Refused sockets: a forged token each way, an auth frame with the token in a bad frame.
    forged = TokenIssuer("not-the-gateway-secret-0123456789abcdef", 60).issue("mallory")
    for url, first, extra in [
        (f"{stack.ws_base}?token={forged}", None, {}),
        (stack.ws_base, None, {"subprotocols": [Subprotocol(f"bearer.{forged}")]}),
        (stack.ws_base, json.dumps({"type": "auth", "token": forged}), {}),
        (stack.ws_base, json.dumps({"type": "auth", "token": token, "extra": 1}), {}),
        (stack.ws_base, json.dumps({"type": "message", "token": token}), {}),
    ]:
        frame, close_code = await refusal(url, first, **extra)
        assert frame["code"] == "unauthorized" and close_code == 4401, (frame, close_code)
        assert token not in json.dumps(frame) and forged not in json.dumps(frame)

    # HTTP: the bearer header, a token in the query of a refused, an unknown and a good route.
    async with httpx.AsyncClient(base_url=stack.base_url) as http:
        auth = {"Authorization": f"Bearer {token}"}
        assert (await http.get("/api/threads", headers=auth)).status_code == 200
        assert (await http.get(f"/api/threads?token={token}")).status_code == 401
        assert (await http.get(f"/api/nowhere?token={token}", headers=auth)).status_code == 404
        bad = {"Authorization": f"Bearer {forged}"}
        assert (await http.get(f"/api/memories?access_token={token}", headers=bad)).status_code == (
            401
        )


async def test_no_token_in_any_service_output(
    valkey_server: Any, milvus_server: Any, tmp_path: Path
) -> None:
    redis_url = f"redis://127.0.0.1:{valkey_server.port}/10"
    data_dir = tmp_path / "stack"
    data_dir.mkdir()
    # Every service exports its spans; the gateway logs at DEBUG, so that the libraries under
    # it (uvicorn, websockets) print all they would, handshake headers included.
    service_settings = {
        name: {"otel_exporter": "console", "otel_console_path": str(spans_path(data_dir, name))}
        for name in SERVICES
    }
    service_settings["gateway"]["log_level"] = "DEBUG"
    with running_stack(
        redis_url, milvus_server.uri, data_dir, SCRIPT, service_settings=service_settings
    ) as stack:
        token = stack.token(f"u{uuid.uuid4().hex[:10]}")
        await exercise(stack, token)
    # Stopped: every log line and span is written out.

    outputs = {name: stack.logs(name) for name in SERVICES} | {
        f"{name} spans": spans_path(data_dir, name).read_text() for name in SERVICES
    }
    signature = token.rsplit(".", 1)[1]
    for name, text in outputs.items():
        assert text, f"{name} wrote nothing: the check would prove nothing"
        assert token not in text and signature not in text, f"the token is in {name}'s output"
    # The line that used to carry it is still there, redacted.
    assert '"WebSocket /ws?token=[REDACTED]" [accepted]' in outputs["gateway"]

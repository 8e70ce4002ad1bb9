"""``/persona`` in `memoria chat`: list the personas with the thread's marked, switch
the current thread, and say why not (unknown persona, thread not stored yet)."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator
from typing import Annotated, Any

import httpx
import pytest
from fastapi import Body, FastAPI, Header
from fastapi.responses import JSONResponse
from rich.console import Console

from memoria_cli.chat.commands import ChatState, Invalid, Persona, parse, run_command
from memoria_cli.chat.render import ChatView
from memoria_cli.gateway_client import Connection, connect
from memoria_client import AsyncMemoria

TOKEN = "a-token"
PERSONAS = [
    {"id": "memoria", "name": "Memoria", "description": "The default."},
    {"id": "tutor", "name": "Ada the Tutor", "description": "Explains step by step."},
]


def gateway(personas: dict[str, str]) -> FastAPI:
    """``personas``: thread id → its persona (a thread not in it is not stored)."""
    app = FastAPI()

    @app.get("/api/personas")
    def list_personas(authorization: Annotated[str | None, Header()] = None) -> dict[str, Any]:
        assert authorization == f"Bearer {TOKEN}"
        return {"default": "memoria", "personas": PERSONAS}

    @app.get("/api/threads/{thread_id}/config")
    def read(thread_id: str) -> JSONResponse:
        if thread_id not in personas:
            return JSONResponse({"detail": "thread not found"}, status_code=404)
        return JSONResponse({"config": {"persona": personas[thread_id]}, "agentHistory": []})

    @app.patch("/api/threads/{thread_id}/config")
    def change(thread_id: str, body: Annotated[dict[str, Any], Body()]) -> JSONResponse:
        if thread_id not in personas:
            return JSONResponse({"detail": "thread not found"}, status_code=404)
        if body["persona"] not in {p["id"] for p in PERSONAS}:
            problem = {"loc": ["body", "persona"], "msg": "unknown persona", "type": "value_error"}
            return JSONResponse({"detail": [problem]}, status_code=422)
        personas[thread_id] = body["persona"]
        return JSONResponse({"config": {"persona": body["persona"]}})

    return app


class Chat:
    def __init__(self, client: AsyncMemoria, personas: dict[str, str]) -> None:
        self.client = client
        self.personas = personas
        self.output = io.StringIO()
        console = Console(file=self.output, width=120, color_system=None)
        self.view = ChatView(console, echo_input=True)
        self.state = ChatState("main")

    async def run(self, line: str) -> str:
        start = len(self.output.getvalue())
        await run_command(parse(line), self.client, self.view, self.state)
        return self.output.getvalue()[start:]


@pytest.fixture
async def chat() -> AsyncIterator[Chat]:
    personas = {"main": "memoria"}
    transport = httpx.ASGITransport(app=gateway(personas))
    async with connect(Connection("http://gateway.test", token=TOKEN, transport=transport)) as c:
        yield Chat(c, personas)


def test_parsing() -> None:
    assert parse("/persona") == Persona(None)
    assert parse("/persona tutor") == Persona("tutor")
    refused = parse("/persona Ada Tutor")
    assert isinstance(refused, Invalid) and "not a persona id" in refused.reason


async def test_list_marks_the_threads_persona_and_switch_changes_it(chat: Chat) -> None:
    listed = await chat.run("/persona")
    assert "* memoria: Memoria - The default." in listed
    assert "  tutor: Ada the Tutor - Explains step by step." in listed
    switched = await chat.run("/persona tutor")
    assert "tutor answers in thread main from your next message" in switched
    assert chat.personas["main"] == "tutor"
    assert "* tutor: Ada the Tutor" in await chat.run("/persona")


async def test_refusals_are_reported_and_change_nothing(chat: Chat) -> None:
    unknown = await chat.run("/persona pirate")
    assert "switching the persona failed (422)" in unknown and "unknown persona" in unknown
    chat.state.thread = "never-used"
    assert "not stored yet" in await chat.run("/persona tutor")
    assert "* memoria" in await chat.run("/persona")  # a thread not stored: the default
    assert chat.personas == {"main": "memoria"}

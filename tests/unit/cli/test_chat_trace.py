"""`memoria chat`'s /trace: reading the command, and showing a cycle's trace from a stand-in
gateway that answers ``GET /api/cycles/{cycle_id}`` as docs/protocol.md says."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any

import httpx
import pytest
from fastapi import FastAPI, Header, HTTPException
from fastapi.responses import JSONResponse
from rich.console import Console

from memoria_cli.chat.commands import ChatState, Invalid, Trace, parse, run_command
from memoria_cli.chat.render import ChatView, _event_text
from memoria_cli.gateway_client import Connection, connect
from memoria_client import AsyncMemoria
from memoria_contracts.chat import ChatRecord, ToolCall
from memoria_contracts.cycles import CycleEvent

TOKEN = "a-token"
URL = "http://gateway.test"
CYCLE_ID = "cyc_01hzy3k2v7q9r8s6t5u4w3x2y1"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
Auth = Annotated[str | None, Header()]

TRACE: dict[str, Any] = {
    "cycle_id": CYCLE_ID,
    "thread_id": "main",
    "trace_id": TRACE_ID,
    "started_at": "2025-01-02T03:04:05.000Z",
    "ended_at": "2025-01-02T03:04:05.250Z",
    "end_reason": "done",
    "actions": ["Finalize"],
    "truncated": False,
    "events": [
        {
            "event_id": "evt_1",
            "at": "2025-01-02T03:04:05.000Z",
            "stream": "chat.in",
            "type": "user.message",
            "trace_id": TRACE_ID,
            "message": {
                "id": "msg_1",
                "chat-history": True,
                "modal": "text",
                "role": "user",
                "content": "hi there",
            },
        },
        {
            "event_id": "evt_2",
            "at": "2025-01-02T03:04:05.100Z",
            "stream": "actions",
            "type": "action.requested",
            "trace_id": TRACE_ID,
            "step": 1,
            "action": "Finalize",
        },
        {
            "event_id": "evt_3",
            "at": "2025-01-02T03:04:05.200Z",
            "stream": "actions.done",
            "type": "action.completed",
            "trace_id": TRACE_ID,
            "step": 1,
            "action": "Finalize",
            "status": "ok",
            "ends_cycle": True,
            "summary": "answered the user",
            "worker": "w1",
        },
        {
            "event_id": "evt_4",
            "at": "2025-01-02T03:04:05.250Z",
            "stream": "chat.out",
            "type": "cycle.ended",
            "trace_id": TRACE_ID,
            "actions": ["Finalize"],
            "reason": "done",
        },
    ],
}


def gateway_app() -> FastAPI:
    app = FastAPI()

    @app.get("/api/cycles/{cycle_id}")
    def cycle(cycle_id: str, authorization: Auth = None) -> JSONResponse:
        if authorization != f"Bearer {TOKEN}":
            raise HTTPException(401, "invalid token")
        if cycle_id != CYCLE_ID:
            return JSONResponse({"detail": "cycle not found"}, status_code=404)
        return JSONResponse(TRACE)

    return app


@dataclass
class Chat:
    client: AsyncMemoria
    view: ChatView
    state: ChatState
    output: io.StringIO

    async def run(self, line: str) -> str:
        start = len(self.output.getvalue())
        await run_command(parse(line), self.client, self.view, self.state)
        return self.output.getvalue()[start:]


@pytest.fixture
async def chat() -> AsyncIterator[Chat]:
    transport = httpx.ASGITransport(app=gateway_app())
    output = io.StringIO()
    view = ChatView(Console(file=output, width=140, color_system=None), echo_input=True)
    async with connect(Connection(URL, token=TOKEN, transport=transport)) as client:
        yield Chat(client, view, ChatState("main"), output)


@pytest.mark.parametrize(
    ("line", "command"),
    [("/trace", Trace(None)), (f"/trace {CYCLE_ID}", Trace(CYCLE_ID))],
)
def test_trace_names_a_cycle_or_the_last_one(line: str, command: Trace) -> None:
    assert parse(line) == command


@pytest.mark.parametrize("line", ["/trace msg_1", "/trace cyc_1 cyc_2", "/trace ../x"])
def test_trace_refuses_what_is_not_a_cycle_id(line: str) -> None:
    command = parse(line)
    assert isinstance(command, Invalid) and "not a cycle id" in command.reason


async def test_trace_shows_every_event_in_order_with_the_trace_id(chat: Chat) -> None:
    shown = await chat.run(f"/trace {CYCLE_ID}")

    assert f"{CYCLE_ID} · thread main · done" in shown
    rows = [
        "user/text: hi there",
        "step 1 Finalize",
        "step 1 Finalize ok: answered the user",
        "done: Finalize",
    ]
    positions = [shown.index(row) for row in rows]
    assert positions == sorted(positions)
    assert "250" in shown  # milliseconds since the cycle started
    assert f"trace id {TRACE_ID}" in shown


async def test_trace_without_an_id_shows_the_last_cycle_of_the_chat(chat: Chat) -> None:
    assert "no reply yet" in await chat.run("/trace")
    chat.state.last_cycle = CYCLE_ID
    assert f"trace id {TRACE_ID}" in await chat.run("/trace")


async def test_an_unknown_cycle_is_reported_and_the_chat_goes_on(chat: Chat) -> None:
    assert "no such cycle: cyc_nothing" in await chat.run("/trace cyc_nothing")


def test_a_trace_names_tool_calls_and_results() -> None:
    """A step's call and result are chat.out messages too; the trace says what they
    are instead of an empty assistant line."""

    def event(message: ChatRecord) -> CycleEvent:
        return CycleEvent(
            event_id="evt_1",
            at=datetime(2026, 1, 1, tzinfo=UTC),
            stream="chat.out",
            type="chat.message",
            message=message,
        )

    call = ChatRecord(
        id="c.1.call",
        chat_history=True,
        modal="text",
        role="assistant",
        content="",
        tool_calls=[ToolCall(id="call_1", name="MemorySearch")],
    )
    result = ChatRecord(
        id="c.1.result",
        chat_history=True,
        modal="text",
        role="tool",
        content="found 3 memories",
        tool_call_id="call_1",
        name="MemorySearch",
    )
    assert _event_text(event(call)) == "tool call: MemorySearch"
    assert _event_text(event(result)) == "tool result MemorySearch: found 3 memories"

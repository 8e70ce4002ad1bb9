"""`memoria chat`'s slash commands: how a line is read, and what each command does against
a gateway that answers the HTTP routes of docs/protocol.md (a small stand-in app served
in-process through the CLI's own authenticated client)."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Annotated, Any

import httpx
import pytest
from fastapi import FastAPI, Header, HTTPException, Query
from fastapi.responses import JSONResponse
from rich.console import Console

from memoria_cli.chat.commands import (
    Blank,
    ChatState,
    Command,
    Edit,
    Forget,
    Help,
    Invalid,
    Memories,
    NewThread,
    Quit,
    Say,
    SwitchThread,
    Threads,
    parse,
    run_command,
)
from memoria_cli.chat.render import ChatView
from memoria_cli.gateway_client import Connection, connect
from memoria_client import AsyncMemoria

TOKEN = "a-token"
Auth = Annotated[str | None, Header()]
URL = "http://gateway.test"


# -- parsing ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "command"),
    [
        ("remember that I like tea", Say("remember that I like tea")),
        ("  hello  ", Say("hello")),
        ("", Blank()),
        ("   ", Blank()),
        ("//etc/hosts is a file", Say("/etc/hosts is a file")),
        ("/help", Help()),
        ("/HELP", Help()),
        ("/threads", Threads()),
        ("/thread trip-2025", SwitchThread("trip-2025")),
        ("/new", NewThread()),
        ("/memories", Memories(None)),
        ("/memories  coffee beans ", Memories("coffee beans")),
        ("/forget mem_01abc", Forget("mem_01abc")),
        ("/edit mem_01abc I drink tea now ", Edit("mem_01abc", "I drink tea now")),
        ("/quit", Quit()),
        ("/exit", Quit()),
    ],
)
def test_a_line_means(line: str, command: Command) -> None:
    assert parse(line) == command


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("/thread", "usage: /thread ID"),
        ("/thread my trip", "not a thread id"),
        ("/thread ../../etc", "not a thread id"),
        ("/forget", "usage: /forget ID"),
        ("/edit", "usage: /edit ID TEXT"),
        ("/edit mem_01abc   ", "usage: /edit ID TEXT"),
        ("/forget mem_1 mem_2", "usage: /forget ID"),
        ("/frobnicate", "unknown command /frobnicate"),
    ],
)
def test_a_command_that_cannot_run_says_why(line: str, reason: str) -> None:
    command = parse(line)
    assert isinstance(command, Invalid)
    assert reason in command.reason


# -- a gateway -------------------------------------------------------------------------------


WHEN = "2025-01-02T03:04:05Z"


@dataclass
class Gateway:
    """The routes' contract, with memories and threads kept in dicts."""

    with_threads: bool = True
    memories: dict[str, dict[str, Any]] = field(default_factory=dict)
    threads: list[dict[str, Any]] = field(default_factory=list)
    history: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    searches: list[list[str]] = field(default_factory=list)
    patches: list[dict[str, Any]] = field(default_factory=list)
    memory_service_down: bool = False

    def app(self) -> FastAPI:
        app = FastAPI()

        def authorize(authorization: str | None) -> None:
            if authorization != f"Bearer {TOKEN}":
                raise HTTPException(401, "invalid token")

        def memory_service() -> None:
            if self.memory_service_down:
                raise HTTPException(503, "the memory service is not answering")

        if self.with_threads:

            @app.get("/api/threads")
            def list_threads(authorization: Auth = None) -> dict[str, Any]:
                authorize(authorization)
                return {"threads": self.threads}

            @app.post("/api/threads", status_code=201)
            def create_thread(authorization: Auth = None) -> dict[str, Any]:
                authorize(authorization)
                thread = {"thread_id": "t_new01", "title": "New chat", "message_count": 0}
                thread |= {"created_at": WHEN, "updated_at": WHEN}
                self.threads.insert(0, thread)
                return thread

        @app.get("/api/threads/{thread_id}/messages")
        def messages(
            thread_id: str, limit: int = 100, authorization: Auth = None
        ) -> list[dict[str, Any]]:
            authorize(authorization)
            return self.history.get(thread_id, [])[-limit:]

        @app.get("/api/memories")
        def list_memories(limit: int = 50, authorization: Auth = None) -> dict[str, Any]:
            authorize(authorization)
            memory_service()
            return {"memories": list(self.memories.values())[:limit], "next_cursor": None}

        @app.get("/api/memories/search")
        def search(q: Annotated[list[str], Query()], authorization: Auth = None) -> dict[str, Any]:
            authorize(authorization)
            memory_service()
            self.searches.append(q)
            words = {word for query in q for word in query.lower().split()}
            found = [
                m | {"relevance_score": 0.9}
                for m in self.memories.values()
                if words & set(m["content"].lower().split())
            ]
            return {"memories": found}

        @app.get("/api/memories/{memory_id}")
        def get(memory_id: str, authorization: Auth = None) -> JSONResponse:
            authorize(authorization)
            if memory_id not in self.memories:
                return JSONResponse({"detail": "memory not found"}, status_code=404)
            return JSONResponse(self.memories[memory_id])

        @app.patch("/api/memories/{memory_id}")
        def change(
            memory_id: str, body: dict[str, Any], authorization: Auth = None
        ) -> JSONResponse:
            authorize(authorization)
            memory = self.memories.get(memory_id)
            if memory is None:
                return JSONResponse({"detail": "memory not found"}, status_code=404)
            self.patches.append(body)
            old = memory["content"]
            memory.update(body)
            return JSONResponse(
                {"memory": memory, "old_content": old, "new_content": body["content"]}
            )

        @app.delete("/api/memories/{memory_id}")
        def delete(memory_id: str, authorization: Auth = None) -> JSONResponse:
            authorize(authorization)
            memory = self.memories.pop(memory_id, None)
            if memory is None:
                return JSONResponse({"detail": "memory not found"}, status_code=404)
            return JSONResponse({"memory_id": memory_id, "deleted_content": memory["content"]})

        return app

    def add_memory(self, memory_id: str, content: str) -> None:
        self.memories[memory_id] = {
            "memory_id": memory_id,
            "memory_type": "preference",
            "content_kind": "text",
            "content": content,
            "bindings": [content.lower()],
            "creation_datetime": "2025-01-02T03:04:05Z",
            "last_accessed": "2025-01-02T03:04:05Z",
            "updated_at": "2025-01-02T03:04:05Z",
        }


@dataclass
class Chat:
    gateway: Gateway
    client: AsyncMemoria
    view: ChatView
    state: ChatState
    output: io.StringIO

    async def run(self, line: str) -> str:
        """The command's output."""
        start = len(self.output.getvalue())
        await run_command(parse(line), self.client, self.view, self.state)
        return self.output.getvalue()[start:]


async def chat_on(gateway: Gateway) -> AsyncIterator[Chat]:
    transport = httpx.ASGITransport(app=gateway.app())
    output = io.StringIO()
    view = ChatView(Console(file=output, width=120, color_system=None), echo_input=True)
    async with connect(Connection(URL, token=TOKEN, transport=transport)) as client:
        yield Chat(gateway, client, view, ChatState("main"), output)


@pytest.fixture
async def chat() -> AsyncIterator[Chat]:
    async for session in chat_on(Gateway()):
        yield session


@pytest.fixture
async def old_chat() -> AsyncIterator[Chat]:
    """On a gateway without the thread routes."""
    async for session in chat_on(Gateway(with_threads=False)):
        yield session


# -- threads ---------------------------------------------------------------------------------


async def test_threads_are_listed_with_the_current_one_marked(chat: Chat) -> None:
    chat.gateway.threads = [
        {"thread_id": "t_2", "title": "Trip to Italy", "message_count": 6, "last_message": "Ok"},
        {"thread_id": "main", "title": "Hello", "message_count": 2, "last_message": None},
    ]
    for thread in chat.gateway.threads:
        thread |= {"created_at": WHEN, "updated_at": WHEN}
    shown = await chat.run("/threads")
    trip = next(line for line in shown.splitlines() if "t_2" in line)
    main = next(line for line in shown.splitlines() if "main" in line)
    assert "Trip to Italy" in trip
    assert "6" in trip
    assert "*" in main
    assert "*" not in trip


async def test_a_gateway_without_threads_says_so_and_the_chat_goes_on(old_chat: Chat) -> None:
    assert "threads are not available on this gateway" in await old_chat.run("/threads")
    assert "no memories" in await old_chat.run("/memories")


async def test_new_makes_a_thread_and_switches_to_it(chat: Chat) -> None:
    shown = await chat.run("/new")
    assert chat.state.thread == "t_new01"
    assert "now in thread t_new01" in shown


async def test_new_on_a_gateway_without_threads_still_starts_a_fresh_thread(
    old_chat: Chat,
) -> None:
    await old_chat.run("/new")
    assert old_chat.state.thread != "main"
    assert parse(f"/thread {old_chat.state.thread}") == SwitchThread(old_chat.state.thread)


async def test_switching_thread_shows_its_latest_messages(chat: Chat) -> None:
    chat.gateway.history["trip"] = [
        {"type": "message", "id": "m1", "thread_id": "trip", "cycle_id": "c1", "role": "user",
         "modal": "text", "chat-history": True, "content": "plan my trip", "created_at": WHEN},
        {"type": "message", "id": "m2", "thread_id": "trip", "cycle_id": "c1",
         "role": "assistant", "modal": "text", "chat-history": True, "content": "Rome first.",
         "created_at": WHEN},
    ]  # fmt: skip
    shown = await chat.run("/thread trip")
    assert chat.state.thread == "trip"
    assert "plan my trip" in shown
    assert "Rome first." in shown


async def test_an_invalid_command_changes_nothing(chat: Chat) -> None:
    shown = await chat.run("/thread no spaces allowed")
    assert chat.state.thread == "main"
    assert "not a thread id" in shown


# -- memories --------------------------------------------------------------------------------


async def test_memories_are_listed_with_their_ids(chat: Chat) -> None:
    chat.gateway.add_memory("mem_01aaa", "Likes green tea")
    chat.gateway.add_memory("mem_01bbb", "Lives in Lisbon")
    shown = await chat.run("/memories")
    assert "2 memories" in shown
    assert "mem_01aaa" in shown
    assert "Likes green tea" in shown
    assert "Lives in Lisbon" in shown


async def test_memories_with_a_query_searches_by_meaning(chat: Chat) -> None:
    chat.gateway.add_memory("mem_01aaa", "Likes green tea")
    chat.gateway.add_memory("mem_01bbb", "Lives in Lisbon")
    shown = await chat.run("/memories green tea")
    assert chat.gateway.searches == [["green tea"]]
    assert "Likes green tea" in shown
    assert "Lisbon" not in shown
    assert "best match" in shown


async def test_forget_deletes_the_memory(chat: Chat) -> None:
    chat.gateway.add_memory("mem_01aaa", "Likes green tea")
    shown = await chat.run("/forget mem_01aaa")
    assert "forgot mem_01aaa: Likes green tea" in shown
    assert chat.gateway.memories == {}


async def test_edit_changes_the_text(chat: Chat) -> None:
    """Only the text is sent: the memory service renames the key that was the old text
    (tests/component/test_memories.py), for every client alike."""
    chat.gateway.add_memory("mem_01aaa", "Likes green tea")
    shown = await chat.run("/edit mem_01aaa Likes black coffee")
    assert "changed mem_01aaa: Likes green tea → Likes black coffee" in shown
    assert chat.gateway.patches == [{"content": "Likes black coffee"}]
    assert chat.gateway.memories["mem_01aaa"]["content"] == "Likes black coffee"


async def test_editing_an_unknown_or_a_json_memory_changes_nothing(chat: Chat) -> None:
    assert "no such memory: mem_01zzz" in await chat.run("/edit mem_01zzz new text")
    chat.gateway.add_memory("mem_01json", "placeholder")
    chat.gateway.memories["mem_01json"] |= {"content_kind": "json", "content": {"budget": 5}}
    shown = await chat.run("/edit mem_01json a budget of 6")
    assert "holds JSON" in shown
    assert chat.gateway.memories["mem_01json"]["content"] == {"budget": 5}


async def test_forgetting_an_unknown_memory_says_there_is_no_such_memory(chat: Chat) -> None:
    assert "no such memory: mem_01zzz" in await chat.run("/forget mem_01zzz")


async def test_a_refusal_is_reported_and_the_chat_goes_on(chat: Chat) -> None:
    chat.gateway.memory_service_down = True
    shown = await chat.run("/memories")
    assert "listing memories failed (503): the memory service is not answering" in shown
    chat.gateway.memory_service_down = False
    assert "no memories" in await chat.run("/memories")


async def test_help_lists_every_command(chat: Chat) -> None:
    shown = await chat.run("/help")
    for command in (
        "/threads",
        "/thread ID",
        "/new",
        "/memories",
        "/forget ID",
        "/edit ID",
        "/quit",
    ):
        assert command in shown

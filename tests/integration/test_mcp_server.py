"""``memoria mcp`` driven by the MCP SDK's own client over stdio and streamable HTTP against
the four services as processes (offline planner): a memory's round trip and the chat tool,
another user's memory refused, bad arguments refused with nothing changed, and a clear error
when the gateway is away."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, TextContent
from stack import Stack, free_port, running_stack

from memoria_client import Memoria

pytestmark = pytest.mark.integration

MEMORIA = str(Path(sys.executable).parent / "memoria")
Connect = Callable[[str, str], AbstractAsyncContextManager[Client]]


@pytest.fixture(scope="module")
def stack(
    valkey_server: Any, milvus_server: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    redis_url = f"redis://127.0.0.1:{valkey_server.port}/8"
    data_dir: Path = tmp_path_factory.mktemp("mcp-stack")
    with running_stack(
        redis_url, milvus_server.uri, data_dir, {"rules": []}, llm_provider="offline"
    ) as running:
        running.wait_ready(actions=6)
        yield running


def wait_for_port(port: int, process: subprocess.Popen[bytes], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"memoria mcp exited with {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.2)
    raise TimeoutError(f"memoria mcp is not listening on {port}")


@contextmanager
def mcp_http_server(
    gateway_url: str, log_path: Path
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``memoria mcp --transport http`` in front of ``gateway_url``: its endpoint and process."""
    port = free_port()
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [MEMORIA, "mcp", "--transport", "http", "--port", str(port), "--url", gateway_url],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_for_port(port, process)
            yield f"http://127.0.0.1:{port}/mcp", process
        finally:
            process.terminate()
            process.wait(timeout=10)


@pytest.fixture(scope="module")
def http_server(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One HTTP MCP server for every user: each request's bearer names the user."""
    log_path = tmp_path_factory.mktemp("mcp-http") / "server.log"
    with mcp_http_server(stack.base_url, log_path) as (endpoint, _):
        yield endpoint


def stdio_client(url: str, token: str) -> AbstractAsyncContextManager[Client]:
    params = StdioServerParameters(
        command=MEMORIA, args=["mcp", "--url", url], env={"MEMORIA_TOKEN": token}
    )
    return Client(params)


@asynccontextmanager
async def http_client(endpoint: str, token: str | None) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=120) as http,
        Client(streamable_http_client(endpoint, http_client=http)) as client,
    ):
        yield client


@pytest.fixture(params=["stdio", "http"])
def connect(request: pytest.FixtureRequest, stack: Stack) -> Connect:
    """Open an MCP session as ``user``: (user, gateway url) -> client."""
    if request.param == "stdio":
        return lambda user, url: stdio_client(url, stack.token(user))
    endpoint: str = request.getfixturevalue("http_server")
    return lambda user, url: http_client(endpoint, stack.token(user))


def data(result: CallToolResult) -> Any:
    assert not result.is_error, text(result)
    structured = result.structured_content
    assert isinstance(structured, dict)
    return structured.get("result", structured)


def text(result: CallToolResult) -> str:
    return " ".join(c.text for c in result.content if isinstance(c, TextContent))


async def test_the_tools_are_described(connect: Connect, stack: Stack) -> None:
    async with connect("mcp-tools", stack.base_url) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(tools) == {
        "add_memory",
        "search_memories",
        "get_memory",
        "update_memory",
        "delete_memory",
        "list_memories",
        "memory_history",
        "chat",
    }
    assert "last week" in (tools["search_memories"].description or "")
    assert {"since", "until"} <= set(tools["search_memories"].input_schema["properties"])
    for tool in tools.values():
        assert tool.description
        assert "user" not in tool.input_schema.get("properties", {})


async def test_memory_round_trip(
    connect: Connect, stack: Stack, request: pytest.FixtureRequest
) -> None:
    user = f"mcp-ana-{request.node.callspec.id}"
    async with connect(user, stack.base_url) as client:
        saved = data(
            await client.call_tool(
                "add_memory",
                {
                    "content": "Prefers window seats",
                    "bindings": ["seat preference on planes"],
                    "memory_type": "preference",
                },
            )
        )
        memory_id = saved["memory_id"]
        assert (
            data(await client.call_tool("get_memory", {"memory_id": memory_id}))["content"]
            == "Prefers window seats"
        )
        changed = data(
            await client.call_tool(
                "update_memory", {"memory_id": memory_id, "content": "Prefers aisle seats"}
            )
        )
        assert changed["new_content"] == "Prefers aisle seats"
        found = data(
            await client.call_tool(
                "search_memories", {"query": "which seat on a plane?", "min_relevance": 0}
            )
        )
        assert memory_id in [m["memory_id"] for m in found]
        latest = data(await client.call_tool("search_memories", {"mode": "chronological"}))
        assert [m["memory_id"] for m in latest] == [memory_id]
        told_then = {"mode": "chronological", "until": "2999-01-01T00:00:00Z"}
        within = data(await client.call_tool("search_memories", told_then))
        assert [m["memory_id"] for m in within] == [memory_id]
        later = {"query": "seat", "since": "2999-01-01T00:00:00Z", "min_relevance": 0}
        assert data(await client.call_tool("search_memories", later)) == []
        page = data(await client.call_tool("list_memories", {"limit": 10}))
        assert [m["memory_id"] for m in page["memories"]] == [memory_id]
        data(await client.call_tool("delete_memory", {"memory_id": memory_id}))
        history = data(await client.call_tool("memory_history", {"memory_id": memory_id}))
        assert [c["kind"] for c in history["changes"]] == ["created", "updated", "deleted"]


async def test_chat_returns_the_answer_actions_and_memories(
    connect: Connect, stack: Stack, request: pytest.FixtureRequest
) -> None:
    user = f"mcp-chat-{request.node.callspec.id}"
    async with connect(user, stack.base_url) as client:
        saved = data(
            await client.call_tool("chat", {"message": "Remember that I am allergic to peanuts"})
        )
        assert saved["actions"] == ["MemorySave", "Finalize"]
        recalled = data(
            await client.call_tool("chat", {"message": "What am I allergic to?", "thread": "t2"})
        )
    assert recalled["actions"] == ["MemorySearch", "Finalize"]
    assert [m["content"] for m in recalled["memories"]] == ["I am allergic to peanuts"]
    assert recalled["answer"]
    assert recalled["thread_id"] == "t2"


async def test_another_users_memory_is_not_found(
    connect: Connect, stack: Stack, request: pytest.FixtureRequest
) -> None:
    owner = f"mcp-owner-{request.node.callspec.id}"
    with Memoria(stack.base_url, stack.token(owner)) as memoria:
        mine = memoria.add("A secret of the owner").memory_id
    async with connect(f"mcp-intruder-{request.node.callspec.id}", stack.base_url) as client:
        for tool in ("get_memory", "delete_memory", "memory_history"):
            refused = await client.call_tool(tool, {"memory_id": mine})
            assert refused.is_error
            assert "not found" in text(refused)
    with Memoria(stack.base_url, stack.token(owner)) as memoria:
        assert memoria.get(mine).content == "A secret of the owner"


async def test_bad_arguments_are_refused_and_change_nothing(
    connect: Connect, stack: Stack, request: pytest.FixtureRequest
) -> None:
    user = f"mcp-bad-{request.node.callspec.id}"
    async with connect(user, stack.base_url) as client:
        cases: list[tuple[str, dict[str, Any], str]] = [
            ("add_memory", {"content": "x", "bindings": []}, "bindings"),
            ("add_memory", {"content": "x", "memory_type": "gossip"}, "memory_type"),
            ("add_memory", {"content": {"a": 1}}, "needs bindings"),
            ("search_memories", {"query": "x", "limit": 1000}, "limit"),
            ("search_memories", {}, "needs a query"),
            ("update_memory", {"memory_id": "mem_x"}, "nothing to change"),
            ("chat", {"message": "hi", "thread": "no spaces"}, "thread"),
            ("get_memory", {}, "memory_id"),
        ]
        for tool, arguments, says in cases:
            refused = await client.call_tool(tool, arguments)
            assert refused.is_error, (tool, arguments)
            assert says in text(refused), text(refused)
    with Memoria(stack.base_url, stack.token(user)) as memoria:
        assert list(memoria.list_memories()) == []


async def test_a_gateway_away_is_a_clear_tool_error(stack: Stack) -> None:
    away = f"http://127.0.0.1:{free_port()}"
    async with stdio_client(away, stack.token("mcp-away")) as client:
        refused = await client.call_tool("search_memories", {"mode": "chronological"})
    assert refused.is_error
    assert f"Memoria is not reachable: no answer from the gateway at {away}" in text(refused)


async def test_http_without_a_bearer_is_refused(http_server: str) -> None:
    async with http_client(http_server, None) as client:
        refused = await client.call_tool("list_memories", {})
    assert refused.is_error
    assert "Authorization: Bearer" in text(refused)


def test_an_oversized_body_is_refused_before_it_is_read(http_server: str) -> None:
    """The MCP SDK bounds a Streamable HTTP body (4 MiB by default) before parsing it; the
    server stays up for the next request."""
    too_big = (
        b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"pad": "'
        + (b"x" * (5 * 1024 * 1024))
        + b'"}}'
    )
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    refused = httpx.post(http_server, content=too_big, headers=headers, timeout=60)
    assert refused.status_code == 413
    again = httpx.post(http_server, content=b"{}", headers=headers, timeout=60)
    assert again.status_code != 413

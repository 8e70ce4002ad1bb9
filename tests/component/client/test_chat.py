"""The chat iterator against an in-process WebSocket server: frames of other cycles and
threads are left out, a dropped socket is resumed with ``since`` without sending the message
twice, refusals become ``ChatError``, and ``ChatReply`` reads a cycle's answer."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
from websockets.asyncio.server import ServerConnection, serve

from memoria_client import AsyncMemoria, ChatError, ChatOptions, CycleEndFrame
from memoria_client.chat import ws_url

NOW = "2025-01-02T03:04:05Z"


def message(id_: str, cycle: str, role: str, content: Any, event: str, **more: Any) -> str:
    return json.dumps(
        {
            "type": "message",
            "id": id_,
            "thread_id": more.pop("thread_id", "t1"),
            "cycle_id": cycle,
            "chat-history": True,
            "modal": more.pop("modal", "text"),
            "role": role,
            "content": content,
            "model": None,
            "created_at": NOW,
            "event_id": event,
        }
    )


def cycle_end(cycle: str, event: str) -> str:
    return json.dumps(
        {
            "type": "cycle_end",
            "cycle_id": cycle,
            "thread_id": "t1",
            "actions": ["MemorySearch", "Finalize"],
            "reason": "done",
            "event_id": event,
        }
    )


class Gateway:
    """Accepts one message; the first socket drops after the echo, the resumed one replays
    the rest after ``since``."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.queries: list[dict[str, list[str]]] = []
        self.protocols: list[str] = []

    async def handle(self, socket: ServerConnection) -> None:
        assert socket.request is not None
        query = parse_qs(urlparse(socket.request.path).query)
        self.queries.append(query)
        self.protocols.append(socket.request.headers.get("Sec-WebSocket-Protocol", ""))
        if "since" not in query:
            frame = json.loads(await socket.recv())
            self.sent.append(frame)
            await socket.send(
                json.dumps({"type": "accepted", "id": "msg_1", "thread_id": "t1", "queued": True})
            )
            # Another cycle of the thread, and another thread, come first: not ours.
            await socket.send(message("cyc_0.1.1", "cyc_0", "assistant", "old", "1-0"))
            await socket.send(
                message("x", "cyc_9", "assistant", "elsewhere", "2-0", thread_id="t2")
            )
            await socket.send(message("msg_1", "cyc_1", "user", "hi", "3-0"))
            await socket.close()
            return
        assert query["since"] == ["3-0"]
        await socket.send(
            message("cyc_1.0.1", "cyc_1", "system", {"content": "peanuts"}, "4-0", modal="memory")
        )
        await socket.send(message("cyc_1.1.1", "cyc_1", "assistant", "You said peanuts.", "5-0"))
        await socket.send(cycle_end("cyc_1", "6-0"))
        await socket.send(
            json.dumps({"type": "resumed", "since": "3-0", "replayed": 3, "complete": True})
        )
        await socket.wait_closed()


@asynccontextmanager
async def gateway_at(handler: Any) -> AsyncIterator[str]:
    async with serve(handler, "127.0.0.1", 0) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        yield f"http://127.0.0.1:{port}"


FAST = ChatOptions(idle_timeout=5, reconnects=2, resends=2, max_wait=1)


async def test_a_dropped_socket_is_resumed_and_only_our_cycle_is_yielded() -> None:
    gateway = Gateway()
    async with gateway_at(gateway.handle) as url, AsyncMemoria(url, "tok") as memoria:
        frames = [f async for f in memoria.chat("hi", thread="t1", options=FAST)]
    assert [f.type for f in frames] == ["accepted", "message", "message", "message", "cycle_end"]
    assert {getattr(f, "cycle_id", "cyc_1") for f in frames} == {"cyc_1"}
    assert len(gateway.sent) == 1  # not sent again on the resumed socket
    assert gateway.sent[0]["content"] == "hi"
    assert "token" not in gateway.queries[0]  # the token never travels in the URL
    assert gateway.protocols[0] == "memoria.v1, bearer.tok"


async def test_ask_reads_the_answer_actions_and_memories() -> None:
    gateway = Gateway()
    async with gateway_at(gateway.handle) as url, AsyncMemoria(url, "tok") as memoria:
        reply = await memoria.ask("hi", thread="t1", options=FAST)
    assert reply.answer == "You said peanuts."
    assert reply.actions == ["MemorySearch", "Finalize"]
    assert reply.memories == [{"content": "peanuts"}]
    assert (reply.cycle_id, reply.message_id) == ("cyc_1", "msg_1")


async def test_rate_limited_is_waited_out_and_sent_again_with_the_same_id() -> None:
    received: list[dict[str, Any]] = []

    async def handle(socket: ServerConnection) -> None:
        received.append(json.loads(await socket.recv()))
        await socket.send(
            json.dumps(
                {"type": "error", "code": "rate_limited", "message": "wait", "retry_after": 0}
            )
        )
        received.append(json.loads(await socket.recv()))
        await socket.send(json.dumps({"type": "accepted", "id": "msg_2", "thread_id": "t1"}))
        await socket.send(message("msg_2", "cyc_2", "user", "hi", "1-0"))
        await socket.send(cycle_end("cyc_2", "2-0"))
        await socket.wait_closed()

    async with gateway_at(handle) as url, AsyncMemoria(url, "tok") as memoria:
        frames = [f async for f in memoria.chat("hi", thread="t1", options=FAST)]
    assert isinstance(frames[-1], CycleEndFrame)
    assert received[0] == received[1]


async def test_a_refused_frame_is_a_chat_error() -> None:
    async def handle(socket: ServerConnection) -> None:
        await socket.recv()
        await socket.send(json.dumps({"type": "error", "code": "invalid_frame", "message": "bad"}))
        await socket.wait_closed()

    async with gateway_at(handle) as url, AsyncMemoria(url, "tok") as memoria:
        with pytest.raises(ChatError) as caught:
            [f async for f in memoria.chat("hi", thread="t1", options=FAST)]
    assert caught.value.code == "invalid_frame"


async def test_a_refused_token_is_a_chat_error_not_a_reconnect_loop() -> None:
    async def handle(socket: ServerConnection) -> None:
        await socket.send(json.dumps({"type": "error", "code": "unauthorized", "message": "no"}))
        await socket.close(4401)

    async with gateway_at(handle) as url, AsyncMemoria(url, "bad") as memoria:
        with pytest.raises(ChatError) as caught:
            [f async for f in memoria.chat("hi", thread="t1", options=FAST)]
    assert caught.value.code == "unauthorized"


def test_ws_url_keeps_the_scheme_and_path() -> None:
    assert ws_url("https://m.example/", "1-0") == "wss://m.example/ws?since=1-0"
    assert ws_url("http://127.0.0.1:8000", None) == "ws://127.0.0.1:8000/ws"

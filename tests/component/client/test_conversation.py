"""The client's long-lived chat connection against an in-process WebSocket server, for what
the real gateway never does: frames this client cannot read, a gateway that does not replay,
a reply lost with its socket."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
from websockets.asyncio.server import ServerConnection

from memoria_client import (
    AcceptedFrame,
    AsyncMemoria,
    ChatClosed,
    Conversation,
    CycleEndFrame,
    Disconnected,
    Incoming,
    Message,
    Reconnected,
)
from tests.component.client.test_chat import NOW, cycle_end, gateway_at, message

FAST = [0.01, 0.01]
DEADLINE_S = 10.0  # against a hanging test, not a measurement


async def receive_until(
    conversation: Conversation, done: Callable[[list[Incoming]], bool]
) -> list[Incoming]:
    seen: list[Incoming] = []
    async with asyncio.timeout(DEADLINE_S):
        while not done(seen):
            seen.append(await conversation.receive())
    return seen


def ended(seen: list[Incoming]) -> bool:
    return any(isinstance(item, CycleEndFrame) for item in seen)


async def test_a_frame_that_cannot_be_read_is_skipped_and_the_rest_still_comes() -> None:
    async def handle(socket: ServerConnection) -> None:
        await socket.send("not json")
        await socket.send(json.dumps({"type": "message", "id": "m", "created_at": NOW}))
        await socket.send(json.dumps({"type": "a_newer_frame", "id": "x"}))
        await socket.send(message("msg_1", "cyc_1", "user", "hi", "1-0"))
        await socket.send(cycle_end("cyc_1", "2-0"))
        await socket.wait_closed()

    async with (
        gateway_at(handle) as url,
        AsyncMemoria(url, "tok") as memoria,
        memoria.connect() as conversation,
    ):
        seen = await receive_until(conversation, ended)
    assert [type(item) for item in seen] == [Message, CycleEndFrame]
    assert conversation.last_event_id == "2-0"


async def test_a_gateway_that_does_not_replay_is_reported_as_frames_lost() -> None:
    """An older gateway: reconnected with ``since``, it says no ``resumed``."""
    queries: list[dict[str, list[str]]] = []

    async def handle(socket: ServerConnection) -> None:
        assert socket.request is not None
        queries.append(parse_qs(urlparse(socket.request.path).query))
        if len(queries) == 1:
            await socket.send(message("msg_1", "cyc_1", "user", "hi", "1-0"))
            await socket.close()
            return
        await socket.wait_closed()

    async with (
        gateway_at(handle) as url,
        AsyncMemoria(url, "tok") as memoria,
        Conversation(memoria.base_url, "tok", reconnect_delays=FAST, resume_quiet=0.2) as chat,
    ):
        seen = await receive_until(
            chat, lambda seen: bool(seen) and isinstance(seen[-1], Reconnected)
        )
    assert seen[1:] == [Disconnected(), Reconnected(since="1-0", complete=False)]
    assert queries[1] == {"since": ["1-0"]}


async def test_a_reply_lost_with_its_socket_is_asked_for_again_under_the_same_id() -> None:
    received: list[dict[str, Any]] = []

    async def handle(socket: ServerConnection) -> None:
        received.append(json.loads(await socket.recv()))
        if len(received) == 1:
            await socket.close()  # before the gateway could answer
            return
        await socket.send(json.dumps({"type": "accepted", "id": "msg_1", "thread_id": "t1"}))
        await socket.wait_closed()

    async with (
        gateway_at(handle) as url,
        AsyncMemoria(url, "tok") as memoria,
        memoria.connect(reconnect_delays=FAST) as conversation,
    ):
        reply = await asyncio.wait_for(conversation.send("t1", "hi"), DEADLINE_S)
    assert isinstance(reply, AcceptedFrame)
    assert len(received) == 2
    assert received[0] == received[1]  # same client id: the gateway takes it once


async def test_a_closed_conversation_ends_its_iteration_and_refuses_to_send() -> None:
    async def handle(socket: ServerConnection) -> None:
        await socket.wait_closed()

    async with gateway_at(handle) as url, AsyncMemoria(url, "tok") as memoria:
        conversation = memoria.connect()
        async with conversation:
            pass
        assert [item async for item in conversation] == []
        with pytest.raises(ChatClosed) as refused:
            await conversation.send("t1", "hi")
    assert refused.value.code == "closed"

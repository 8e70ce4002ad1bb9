"""A cycle's trace end to end: a real two-step cycle through the WebSocket, then
``GET /api/cycles/{cycle_id}`` — four services as processes, a real broker."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import httpx
import pytest
from faststream.redis.parser.binary import BinaryMessageFormatV1
from redis.asyncio import Redis
from stack import Stack, running_stack
from traces import ended_trace as trace_when_ended
from ws_client import chat

from memoria_contracts.events import Envelope
from memoria_contracts.streams import Stream
from memoria_memory.cycle_log import trace_id_of

pytestmark = pytest.mark.integration

SCRIPT: dict[str, Any] = {
    "rules": [
        {
            "match": "^ponder",
            "decide": ["Ponder", "Finalize"],
            "chat": {"Finalize": "Pondered and done."},
        },
        {"match": "", "decide": ["Finalize"], "chat": {"Finalize": "Hello there, friend!"}},
    ],
    "chat_chunk_words": 1,
}
CLI_WAIT_S = 60.0
MEMORIA = Path(sys.executable).parent / "memoria"
CYCLE_STREAMS = (Stream.CHAT_IN, Stream.ACTIONS, Stream.ACTIONS_DONE, Stream.CHAT_OUT)


@pytest.fixture(scope="module")
def stack(
    valkey_server: Any, milvus_server: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    data_dir: Path = tmp_path_factory.mktemp("trace-stack")
    with running_stack(
        f"redis://127.0.0.1:{valkey_server.port}/6",
        milvus_server.uri,
        data_dir,
        SCRIPT,
        step_timeout_seconds="10",
    ) as running:
        yield running


async def trace_of(stack: Stack, user_id: str, cycle_id: str) -> httpx.Response:
    headers = {"Authorization": f"Bearer {stack.token(user_id)}"}
    async with httpx.AsyncClient(base_url=stack.base_url, headers=headers) as http:
        return await http.get(f"/api/cycles/{cycle_id}")


async def ended_trace(stack: Stack, user_id: str, cycle_id: str) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {stack.token(user_id)}"}
    async with httpx.AsyncClient(base_url=stack.base_url, headers=headers) as http:
        return await trace_when_ended(http, cycle_id)


async def envelopes_of(stack: Stack, cycle_id: str, message_id: str) -> list[Envelope]:
    """Every envelope of the cycle as it sits in the streams."""
    found: list[Envelope] = []
    redis = Redis.from_url(stack.redis_url)
    try:
        for stream in CYCLE_STREAMS:
            entries = await redis.xrange(stream.value)
            for _, fields in cast(list[tuple[bytes, dict[bytes, bytes]]], entries):
                body, _ = BinaryMessageFormatV1.parse(fields[b"__data__"])
                event = Envelope.model_validate_json(body)
                own = getattr(event.payload, "message_id", None) == message_id
                if event.cycle_id == cycle_id or own:
                    found.append(event)
    finally:
        await redis.aclose()
    return found


async def test_a_cycle_returns_its_events_in_order_with_one_trace_id(stack: Stack) -> None:
    async with chat(stack.ws_url("ana")) as client:
        accepted = await client.send("t-trace", "ponder this")
        frames = await client.cycle(accepted["id"])
    cycle_id = frames[-1]["cycle_id"]

    trace = await ended_trace(stack, "ana", cycle_id)

    assert (trace["cycle_id"], trace["thread_id"]) == (cycle_id, "t-trace")
    assert (trace["end_reason"], trace["actions"]) == ("done", ["Ponder", "Finalize"])
    assert trace["truncated"] is False
    events = trace["events"]
    kinds = [(e["stream"], e["type"]) for e in events]
    assert kinds[0] == ("chat.in", "user.message")
    assert events[0]["message"]["content"] == "ponder this"
    assert events[0]["message"]["id"] == accepted["id"]
    assert kinds[-1] == ("chat.out", "cycle.ended")
    assert not any(e["type"] == "chat.delta" for e in events)
    steps = [(e["type"], e["step"], e["action"]) for e in events if e["type"].startswith("action.")]
    assert steps == [
        ("action.requested", 1, "Ponder"),
        ("action.completed", 1, "Ponder"),
        ("action.requested", 2, "Finalize"),
        ("action.completed", 2, "Finalize"),
    ]
    answer_at = next(
        i
        for i, e in enumerate(events)
        if e["type"] == "chat.message" and e["message"]["content"] == "Pondered and done."
    )
    assert kinds.index(("actions", "action.requested")) < answer_at < len(events) - 1
    # Every message the socket showed, once each (the deltas made the answer), and the
    # Ponder step's tool call and result, which sockets are not sent.
    shown = [f["id"] for f in frames if f["type"] == "message"]
    messages = [e["message"] for e in events if e["type"] == "chat.message"]
    tools = [m for m in messages if m["role"] == "tool" or m.get("tool_calls")]
    assert [m["id"] for m in messages if m not in tools] == list(dict.fromkeys(shown))
    assert [(m["role"], m.get("name")) for m in tools] == [("assistant", None), ("tool", "Ponder")]
    assert tools[0]["tool_calls"][0]["name"] == "Ponder"
    assert tools[1]["tool_call_id"] == tools[0]["tool_calls"][0]["id"]
    # The order is the broker's (entry ids), not ``at`` (when each service made the event):
    # decision makes a step's tool call and its request a moment apart and they can reach
    # the broker in either order. The trace's bounds are its first and last events.
    assert trace["started_at"] == events[0]["at"]
    assert trace["ended_at"] == events[-1]["at"]

    # One trace id: the trace's, each event's, and that of every envelope on the streams.
    assert trace["trace_id"] is not None
    assert {e["trace_id"] for e in events} == {trace["trace_id"]}
    envelopes = await envelopes_of(stack, cycle_id, accepted["id"])
    assert len(envelopes) > len(events)  # the deltas are on the streams, not in the trace
    assert {trace_id_of(e.trace) for e in envelopes} == {trace["trace_id"]}
    assert {e["event_id"] for e in events} <= {e.event_id for e in envelopes}


async def test_another_users_unknown_and_malformed_cycles_are_refused(stack: Stack) -> None:
    async with chat(stack.ws_url("ana")) as client:
        accepted = await client.send("t-private", "hi")
        frames = await client.cycle(accepted["id"])
    cycle_id = frames[-1]["cycle_id"]
    await ended_trace(stack, "ana", cycle_id)

    stranger = await trace_of(stack, "bob", cycle_id)
    unknown = await trace_of(stack, "ana", "cyc_doesnotexist")
    assert (stranger.status_code, unknown.status_code) == (404, 404)
    assert stranger.json() == unknown.json()  # nothing tells the two apart
    assert (await trace_of(stack, "ana", "not-a-cycle")).status_code == 422
    async with httpx.AsyncClient(base_url=stack.base_url) as http:
        assert (await http.get(f"/api/cycles/{cycle_id}")).status_code == 401


def test_the_cli_shows_the_trace_of_the_last_reply(stack: Stack) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORIA_")}
    env["COLUMNS"] = "200"
    argv = [str(MEMORIA), "chat", "--url", stack.base_url, "--user", "carol"]
    # Without a terminal the chat reads the next line once the reply has ended.
    done = subprocess.run(
        argv,
        input="ponder this\n/trace\n",
        capture_output=True,
        text=True,
        env=env,
        timeout=CLI_WAIT_S,
        check=False,
    )
    assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    reply, _, trace = done.stdout.partition("/trace")
    assert "Pondered and done." in reply
    assert "user.message" in trace and "user/text: ponder this" in trace
    assert "action.requested" in trace and "step 1 Ponder" in trace
    assert re.search(r"trace id [0-9a-f]{32}", trace), trace

"""The Python client (``memoria_client``) against the four services as processes (offline
planner, no key): a memory's round trip, search, pagination, chat frames, the long-lived chat
connection, and export/import."""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from stack import Stack, running_stack

from memoria_client import (
    AcceptedFrame,
    AsyncMemoria,
    ChatClosed,
    Conversation,
    CycleEndFrame,
    Disconnected,
    Incoming,
    Memoria,
    Message,
    NotFound,
    Reconnected,
    ResumedFrame,
)

pytestmark = pytest.mark.integration

MAX_SOCKETS = 3
"""Sockets one user may hold on one gateway in this stack (few, to reach the limit)."""
WAIT_S = 60.0  # a deadline against hanging, not a measurement


@pytest.fixture(scope="module")
def stack(
    valkey_server: Any, milvus_server: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    redis_url = f"redis://127.0.0.1:{valkey_server.port}/7"
    data_dir: Path = tmp_path_factory.mktemp("client-stack")
    with running_stack(
        redis_url,
        milvus_server.uri,
        data_dir,
        {"rules": []},
        llm_provider="offline",
        ws_max_sockets_per_user=str(MAX_SOCKETS),
    ) as running:
        running.wait_ready(actions=6)
        yield running


def client(stack: Stack, user: str) -> Memoria:
    memoria = Memoria(stack.base_url)
    memoria.login(user)
    return memoria


def test_memory_round_trip_and_search(stack: Stack) -> None:
    with client(stack, "pc-ana") as memoria:
        created = memoria.add(
            "Prefers window seats", ["seat preference on planes"], memory_type="preference"
        )
        assert created.created is True
        again = memoria.add("Likes quiet hotels", idempotency_key="hotel-1")
        repeated = memoria.add("Likes quiet hotels", idempotency_key="hotel-1")
        assert (repeated.memory_id, repeated.created) == (again.memory_id, False)
        assert memoria.get(created.memory_id).content == "Prefers window seats"

        changed = memoria.update(created.memory_id, content="Prefers aisle seats")
        assert (changed.old_content, changed.new_content) == (
            "Prefers window seats",
            "Prefers aisle seats",
        )
        found = memoria.search("which seat do I like on a plane?", min_relevance=0.0)
        assert created.memory_id in [m.memory_id for m in found]
        assert all(m.relevance_score is not None for m in found)
        newest = memoria.search(mode="chronological", limit=1)
        assert [m.memory_id for m in newest] == [again.memory_id]

        removed = memoria.delete(created.memory_id)
        assert removed.deleted_content == "Prefers aisle seats"
        kinds = [c.kind for c in memoria.history(created.memory_id).changes]
        assert kinds == ["created", "updated", "deleted"]
        with pytest.raises(NotFound):
            memoria.get(created.memory_id)

    with client(stack, "pc-bob") as other, pytest.raises(NotFound):
        other.get(again.memory_id)


def test_pagination_reaches_every_memory(stack: Stack) -> None:
    with client(stack, "pc-pages") as memoria:
        made = [memoria.add(f"fact number {n}").memory_id for n in range(7)]
        listed = [m.memory_id for m in memoria.list_memories(page_size=3)]
    assert sorted(listed) == sorted(made)
    assert len(listed) == len(set(listed))


async def test_chat_frames_end_at_cycle_end_and_show_in_the_thread(stack: Stack) -> None:
    async with AsyncMemoria(stack.base_url) as memoria:
        await memoria.login("pc-chat")
        frames = [
            f async for f in memoria.chat("Remember that I am allergic to peanuts", thread="pc")
        ]
        assert isinstance(frames[0], AcceptedFrame)
        assert isinstance(frames[-1], CycleEndFrame)
        assert frames[-1].actions == ["MemorySave", "Finalize"]
        echo = frames[1]
        assert isinstance(echo, Message)
        assert (echo.id, echo.role) == (frames[0].id, "user")
        assert all(getattr(f, "thread_id", None) == "pc" for f in frames)

        reply = await memoria.ask("What am I allergic to?", thread="pc")
        assert reply.actions == ["MemorySearch", "Finalize"]
        assert [getattr(m, "content", None) for m in reply.memories] == ["I am allergic to peanuts"]
        assert reply.answer

        stored = [m async for m in memoria.iter_messages("pc", page_size=2)]
        assert stored[-1].content == "Remember that I am allergic to peanuts"
        threads = await memoria.threads()
        assert "pc" in [t.thread_id for t in threads]
        trace = await memoria.cycle(reply.cycle_id or "")
        assert trace.actions == ["MemorySearch", "Finalize"]


def test_export_then_import_into_another_account(stack: Stack) -> None:
    with client(stack, "pc-export") as source:
        source.add("Lives in Lisbon")
        source.add({"city": "Lisbon"}, ["home city"], memory_type="user_profile")
        exported = io.StringIO()
        assert source.export(exported) == 2
    lines = exported.getvalue().splitlines()

    with client(stack, "pc-import") as target:
        first = target.import_lines(lines)
        assert (first.created, first.present, first.failed) == (2, 0, 0)
        again = target.import_lines([*lines, "not json"])
        assert (again.created, again.present, again.failed) == (0, 2, 1)
        contents = sorted(str(m.content) for m in target.list_memories())
    assert contents == ["Lives in Lisbon", "{'city': 'Lisbon'}"]


EXAMPLES = Path(__file__).resolve().parents[2] / "clients" / "python" / "examples"


def run_example(stack: Stack, user: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORIA_")}
    env |= {"MEMORIA_URL": stack.base_url, "MEMORIA_USER": user}
    return subprocess.run(
        [sys.executable, *args], env=env, capture_output=True, text=True, timeout=120, check=True
    )


def test_the_examples_run(stack: Stack, tmp_path: Path) -> None:
    quick = run_example(stack, "pc-examples", str(EXAMPLES / "quickstart.py"))
    assert "history: ['created', 'updated', 'deleted']" in quick.stdout
    chat = run_example(
        stack, "pc-examples", str(EXAMPLES / "chat.py"), "Remember that I like green tea"
    )
    assert "MemorySave → Finalize (done)" in chat.stdout
    backup = tmp_path / "memories.jsonl"
    exported = run_example(stack, "pc-examples", str(EXAMPLES / "backup.py"), "export", str(backup))
    assert "exported 1 memories" in exported.stdout
    restored = run_example(stack, "pc-restored", str(EXAMPLES / "backup.py"), "import", str(backup))
    assert "created 1, already present 0, failed 0" in restored.stdout


# -- the long-lived chat connection ------------------------------------------------------------


async def receive_until(
    conversation: Conversation, done: Callable[[list[Incoming]], bool]
) -> list[Incoming]:
    """What the conversation yields until ``done`` holds for it."""
    seen: list[Incoming] = []
    async with asyncio.timeout(WAIT_S):
        while not done(seen):
            seen.append(await conversation.receive())
    return seen


def cycle_ends(seen: list[Incoming]) -> list[CycleEndFrame]:
    return [item for item in seen if isinstance(item, CycleEndFrame)]


def event_ids(seen: list[Incoming]) -> list[tuple[int, int]]:
    """The frames' event ids as numbers (``<ms>-<n>``), in the order received."""
    ids = [getattr(item, "event_id", None) for item in seen]
    return [(int(ms), int(n)) for ms, n in (i.split("-") for i in ids if i)]


async def test_one_connection_carries_the_frames_of_every_thread(stack: Stack) -> None:
    async with AsyncMemoria(stack.base_url) as memoria:
        await memoria.login("pc-listen")
        async with memoria.connect() as conversation:
            first = await conversation.send("pc-a", "Remember that I am allergic to peanuts")
            second = await conversation.send("pc-b", "Remember that my cat is called Tom")
            seen = await receive_until(conversation, lambda seen: len(cycle_ends(seen)) == 2)

    assert isinstance(first, AcceptedFrame)
    assert isinstance(second, AcceptedFrame)
    assert [item for item in seen if isinstance(item, AcceptedFrame)] == [first, second]
    echoes = {
        item.thread_id: item.id
        for item in seen
        if isinstance(item, Message) and item.role == "user"
    }
    assert echoes == {"pc-a": first.id, "pc-b": second.id}
    assert {end.thread_id for end in cycle_ends(seen)} == {"pc-a", "pc-b"}
    assert event_ids(seen) == sorted(set(event_ids(seen)))  # in order, none twice


async def test_a_dropped_socket_is_resumed_with_the_frames_it_missed(stack: Stack) -> None:
    """The gateway restarts under the connection; meanwhile a cycle of the user runs (sent
    through another gateway). Reconnected with ``since``, the connection gets that cycle's
    frames from the replay, none twice, and says nothing was lost."""
    token = stack.token("pc-resume")
    replica = stack.add_gateway("gateway-resume")
    async with (
        AsyncMemoria(stack.base_url, token) as memoria,
        AsyncMemoria(f"http://127.0.0.1:{replica}", token) as elsewhere,
        memoria.connect(reconnect_delays=[0.5] * int(WAIT_S * 2)) as conversation,
    ):
        await conversation.send("pc-r", "Remember that I like green tea")
        before = await receive_until(conversation, lambda seen: bool(cycle_ends(seen)))
        last_seen = conversation.last_event_id
        await asyncio.to_thread(stack.stop, "gateway")
        dropped = await receive_until(conversation, lambda seen: Disconnected() in seen)
        missed = await elsewhere.ask("What do I like to drink?", thread="pc-r")
        await asyncio.to_thread(stack.start, "gateway")
        after = await receive_until(
            conversation, lambda seen: any(isinstance(item, Reconnected) for item in seen)
        )

    assert last_seen is not None
    reconnected = after[-1]
    assert reconnected == Reconnected(since=last_seen, complete=True)
    resumed = [item for item in after if isinstance(item, ResumedFrame)]
    assert len(resumed) == 1
    assert resumed[0].complete
    assert resumed[0].replayed > 0
    replayed = [item for item in after if getattr(item, "cycle_id", None) == missed.cycle_id]
    assert [end.actions for end in cycle_ends(replayed)] == [missed.actions]
    assert any(isinstance(item, Message) and item.role == "user" for item in replayed)
    everything = [*before, *dropped, *after]
    assert event_ids(everything) == sorted(set(event_ids(everything)))  # in order, none twice


async def test_a_refused_token_ends_the_conversation_with_its_code(stack: Stack) -> None:
    async with (
        AsyncMemoria(stack.base_url, "not-a-token") as stranger,
        stranger.connect() as conversation,
    ):
        with pytest.raises(ChatClosed) as refused:
            await receive_until(conversation, lambda seen: False)
    assert refused.value.code == "unauthorized"


async def test_one_socket_too_many_ends_the_conversation_with_its_code(stack: Stack) -> None:
    async with AsyncMemoria(stack.base_url) as memoria:
        await memoria.login("pc-many")
        async with contextlib.AsyncExitStack() as opened:
            for _ in range(MAX_SOCKETS):
                await opened.enter_async_context(memoria.connect())
            one_too_many = await opened.enter_async_context(memoria.connect())
            with pytest.raises(ChatClosed) as refused:
                await receive_until(one_too_many, lambda seen: False)
            with pytest.raises(ChatClosed):  # ended for good: nothing more is sent on it
                await one_too_many.send("pc-many", "hello")
    assert refused.value.code == "too_many_connections"
    assert f"at most {MAX_SOCKETS} connections" in refused.value.message

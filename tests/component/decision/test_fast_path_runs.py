"""Fast paths and the pending action through the cycle engine: on a real Redis, with a
memory service answered in process and a scripted model with no rules, so that any LLM call
would fail the cycle ("llm_error") instead of ending it "done"."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from in_process_bus import FINALIZE, RecordingPublisher, scripted_engine
from redis.asyncio import Redis

from memoria_contracts.cycles import cycle_id_for
from memoria_contracts.events import (
    ActionRequested,
    Envelope,
    HistoryPage,
    HistoryQuery,
    Payload,
    UserMessageReceived,
)
from memoria_contracts.memory import (
    Memory,
    MemoryDelete,
    MemoryDeleted,
    MemoryFailure,
    MemoryList,
    MemoryPage,
)
from memoria_contracts.streams import Stream
from memoria_decision.core.fast_paths import LIST_SHOWN
from memoria_llm.scripted import ScriptRule
from memoria_runtime import catalog, keys
from memoria_runtime.bus.memory_requests import MemoryClient
from memoria_runtime.bus.request_reply import RpcError
from memoria_runtime.partitions import Partitions

PARTITIONS = Partitions()
ONE = PARTITIONS.all[0]  # the embedded default: one partition, keys untagged

NOW = datetime(2026, 11, 23, tzinfo=UTC)


def memory(memory_id: str) -> Memory:
    return Memory(
        memory_id=memory_id,
        memory_type="user_profile",
        content=f"fact {memory_id}",
        bindings=["fact"],
        creation_datetime=NOW,
        last_accessed=NOW,
        updated_at=NOW,
    )


class InProcessMemories(MemoryClient):
    """Each user's memories, newest first; answers only for the envelope's user, as the
    memory service does. ``crash_after`` deletions, it raises once (the process dying)."""

    def __init__(self, owned: dict[str, list[str]]) -> None:  # no broker
        self.owned = {user: [memory(i) for i in ids] for user, ids in owned.items()}
        self.deletes: list[tuple[str, str]] = []
        self.deleted: list[str] = []
        self.crash_after: int | None = None
        self.refuse: set[str] = set()

    async def _call(
        self, user_id: str, thread_id: str, cycle_id: str | None, payload: Payload
    ) -> Payload:
        mine = self.owned.setdefault(user_id, [])
        if isinstance(payload, HistoryQuery):
            return HistoryPage(messages=[])
        if isinstance(payload, MemoryList):
            start = int(payload.cursor or 0)
            end = start + payload.limit
            return MemoryPage(
                memories=mine[start:end], next_cursor=str(end) if end < len(mine) else None
            )
        if isinstance(payload, MemoryDelete):
            if self.crash_after is not None and len(self.deletes) >= self.crash_after:
                self.crash_after = None
                raise RuntimeError("decision died")
            self.deletes.append((user_id, payload.memory_id))
            if payload.memory_id in self.refuse:
                return MemoryFailure(code="invalid", error_message="refused")
            for m in mine:
                if m.memory_id == payload.memory_id:
                    mine.remove(m)
                    self.deleted.append(m.memory_id)
                    return MemoryDeleted(memory_id=m.memory_id, deleted_content=m.content, memory=m)
            return MemoryFailure(code="not_found", error_message="no such memory")
        raise RpcError("unexpected_reply", f"not served here: {payload.type}")

    def ids(self, user_id: str) -> list[str]:
        return [m.memory_id for m in self.owned.get(user_id, [])]


class Chat:
    def __init__(self, redis: Redis, memories: InProcessMemories, rules: list[ScriptRule]) -> None:
        self.publisher = RecordingPublisher()
        self.engine = scripted_engine(redis, self.publisher, rules=rules, memory=memories)
        self.count = 0

    async def say(self, text: str, *, user: str = "ana", thread: str = "t1") -> str:
        self.count += 1
        message_id = f"msg_{user}{thread}{self.count}"
        await self.deliver(message_id, text, user=user, thread=thread)
        return message_id

    async def deliver(
        self, message_id: str, text: str, *, user: str = "ana", thread: str = "t1"
    ) -> None:
        message = UserMessageReceived(message_id=message_id, content=text)
        event = Envelope(user_id=user, thread_id=thread, payload=message)
        await self.engine.on_user_message(event, message, b"framed")

    def replies(self) -> list[str]:
        return [str(r.content) for r in self.publisher.chat() if r.role == "assistant"]


async def a_chat(
    redis: Redis, owned: dict[str, list[str]], rules: list[ScriptRule] | None = None
) -> tuple[Chat, InProcessMemories]:
    """A worker advertises Finalize, so a message that is no fast path reaches the model."""
    await catalog.advertise(redis, "worker-1", [FINALIZE], ttl_s=60)
    memories = InProcessMemories(owned)
    return Chat(redis, memories, rules or []), memories


async def test_delete_all_asks_then_sim_deletes_only_that_users_memories(redis: Redis) -> None:
    chat, memories = await a_chat(redis, {"ana": ["mem_a1", "mem_a2", "mem_a3"], "bob": ["mem_b1"]})

    await chat.say("Apague todas as minhas memórias")
    (asked,) = chat.publisher.ends()
    assert (asked.actions, asked.reason, asked.usage) == (["ConfirmDeleteAll"], "done", None)
    assert chat.replies()[-1].startswith("Apagar cada memória que tenho de você?")
    assert memories.deletes == []  # never on the request itself
    assert await redis.ttl(keys.pending_action(ONE, "ana", "t1")) > 0  # it expires
    assert not chat.publisher.on(Stream.ACTIONS)  # no action worker, no model

    chat.publisher.clear()
    await chat.say("sim")
    (done,) = chat.publisher.ends()
    assert (done.actions, done.reason, done.usage) == (["DeleteAllMemories"], "done", None)
    assert chat.replies() == ["Pronto: apaguei todas as suas memórias (3)."]
    assert memories.ids("ana") == []
    assert memories.ids("bob") == ["mem_b1"]
    assert {user for user, _ in memories.deletes} == {"ana"}
    assert not await redis.exists(keys.pending_action(ONE, "ana", "t1"))
    assert not await redis.exists(keys.thread_lock(ONE, "ana", "t1"))  # the thread is released

    chat.publisher.clear()
    await chat.say("sim")  # a second yes confirms nothing: an ordinary message (model)
    assert chat.publisher.ends()[-1].reason == "llm_error"


async def test_a_redelivered_confirmation_deletes_once_and_reports_the_same_count(
    redis: Redis,
) -> None:
    chat, memories = await a_chat(redis, {"ana": [f"mem_a{i}" for i in range(20)]})
    await chat.say("delete all my memories")
    memories.crash_after = 5  # the process dies after five deletions

    with pytest.raises(RuntimeError):
        await chat.deliver("msg_confirm", "yes")
    assert 0 < len(memories.ids("ana")) < 20  # some were deleted, some were not
    await chat.deliver("msg_confirm", "yes")  # redelivered: the route and targets are kept
    await chat.deliver("msg_confirm", "yes")  # and again, after the cycle ended

    assert memories.ids("ana") == []
    assert chat.replies()[-1] == "Done: I deleted all your memories (20)."
    ends = chat.publisher.ends()
    assert [e.actions for e in ends[1:]] == [["DeleteAllMemories"]]  # announced once
    assert sorted(memories.deleted) == sorted(f"mem_a{i}" for i in range(20))  # each once
    replies = [r for r in chat.publisher.chat() if r.id == f"{cycle_id_for('msg_confirm')}.1.reply"]
    assert {str(r.content) for r in replies} == {"Done: I deleted all your memories (20)."}


async def test_no_or_cancel_keeps_everything(redis: Redis) -> None:
    chat, memories = await a_chat(redis, {"ana": ["mem_a1"]})
    await chat.say("delete all my memories")
    chat.publisher.clear()

    await chat.say("no")
    (ended,) = chat.publisher.ends()
    assert (ended.actions, ended.reason) == (["Cancel"], "done")
    assert chat.replies() == ["Okay, cancelled: I did not delete anything."]
    assert memories.ids("ana") == ["mem_a1"]
    assert not await redis.exists(keys.pending_action(ONE, "ana", "t1"))

    chat.publisher.clear()
    await chat.say("cancelar")
    assert chat.replies() == ["Não há nada para cancelar."]
    assert chat.publisher.ends()[0].actions == ["Cancel"]


async def test_another_message_drops_the_pending_action_and_goes_to_the_model(
    redis: Redis,
) -> None:
    chat, memories = await a_chat(redis, {"ana": ["mem_a1"]}, [ScriptRule(decide=["Finalize"])])
    await chat.say("delete all my memories")
    chat.publisher.clear()

    await chat.say("ok")  # not a clear yes
    notices = [r for r in chat.publisher.chat() if r.id.endswith(".pending")]
    assert [str(n.content) for n in notices] == [
        'I did not delete your memories: your reply was not a "yes", so I dropped that request.'
    ]
    (request,) = chat.publisher.on(Stream.ACTIONS)
    assert isinstance(request.payload, ActionRequested)
    assert request.payload.action == "Finalize"
    assert memories.ids("ana") == ["mem_a1"]
    assert not await redis.exists(keys.pending_action(ONE, "ana", "t1"))


async def test_a_yes_in_another_thread_confirms_nothing(redis: Redis) -> None:
    chat, memories = await a_chat(redis, {"ana": ["mem_a1"]})
    await chat.say("delete all my memories", thread="t1")
    await chat.say("yes", thread="t2")
    assert chat.publisher.ends()[-1].reason == "llm_error"  # the model's (here: none)
    assert memories.ids("ana") == ["mem_a1"]
    assert await redis.exists(keys.pending_action(ONE, "ana", "t1"))


async def test_list_all_shows_the_newest_memories_as_cards(redis: Redis) -> None:
    chat, _ = await a_chat(redis, {"ana": ["mem_a1", "mem_a2"], "bob": ["mem_b1"]})
    await chat.say("list all my memories")

    cards = [r for r in chat.publisher.chat() if r.modal == "memory"]
    assert [c.content["memory_id"] for c in cards] == ["mem_a1", "mem_a2"]
    assert all(c.chat_history for c in cards)
    assert chat.replies() == ["These are all your memories (2)."]
    (ended,) = chat.publisher.ends()
    assert (ended.actions, ended.reason, ended.usage) == (["ListMemories"], "done", None)
    statuses = [r.content for r in chat.publisher.chat() if r.modal == "textForReplace"]
    assert statuses == ["Listing your memories..."]


async def test_list_all_says_when_there_are_more(redis: Redis) -> None:
    many = [f"mem_a{i}" for i in range(LIST_SHOWN + 5)]
    chat, _ = await a_chat(redis, {"ana": many})
    await chat.say("liste minhas memórias")
    cards = [r for r in chat.publisher.chat() if r.modal == "memory"]
    assert len(cards) == LIST_SHOWN
    assert chat.replies()[0].startswith(f"Estas são as suas {LIST_SHOWN} memórias mais recentes")


async def test_without_memories(redis: Redis) -> None:
    chat, _ = await a_chat(redis, {})
    await chat.say("list all my memories")
    await chat.say("delete all my memories")
    await chat.say("yes")
    replies = chat.replies()
    assert replies[0] == "You have no memories saved yet."
    assert replies[-1] == "You have no memories, so there was nothing to delete."


def test_redis_keys_are_per_thread() -> None:
    assert keys.pending_action(ONE, "ana", "t1") != keys.pending_action(ONE, "ana", "t2")
    assert keys.pending_action(ONE, "ana", "t1") != keys.pending_action(ONE, "bob", "t1")


async def test_a_partial_delete_all_says_so_and_ends_failed(redis: Redis) -> None:
    chat, memories = await a_chat(redis, {"ana": ["mem_a1", "mem_a2", "mem_a3"]})
    memories.refuse = {"mem_a2"}
    await chat.say("delete all my memories")
    chat.publisher.clear()
    await chat.say("yes")

    (ended,) = chat.publisher.ends()
    assert (ended.actions, ended.reason) == (["DeleteAllMemories"], "action_failed")
    notices = [str(r.content) for r in chat.publisher.chat() if r.role == "system"]
    assert notices[-1].startswith("I deleted 2 of your 3 memories; 1 could not be deleted.")
    assert memories.ids("ana") == ["mem_a2"]


async def test_an_unreadable_pending_action_is_dropped_not_guessed(redis: Redis) -> None:
    chat, memories = await a_chat(redis, {"ana": ["mem_a1"]})
    await redis.set(keys.pending_action(ONE, "ana", "t1"), b'{"kind": "delete_everything"}')
    await chat.say("yes")
    assert chat.publisher.ends()[-1].reason == "llm_error"  # an ordinary message
    assert memories.ids("ana") == ["mem_a1"]
    assert not await redis.exists(keys.pending_action(ONE, "ana", "t1"))

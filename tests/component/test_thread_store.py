"""Threads in the memory service's document store, on both adapters: SQLite and the MongoDB
adapter (on tinymongo's in-process emulation; the docstore contract suite covers a real
MongoDB). Messages are stored the way the chat.out handler stores them — history first, then
the thread — with no broker and no processes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import tool_history
from document_stores import BOTH, opened_store

from memoria_contracts.chat import ChatRecord, Role
from memoria_contracts.threads import DEFAULT_THREAD_TITLE, Thread
from memoria_memory.docstore import DocumentStore
from memoria_memory.history import COLLECTION as MESSAGES
from memoria_memory.history import HistoryRepository
from memoria_memory.threads import ThreadRepository

START = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
LONG_QUESTION = (
    "Could you help me plan a ten day trip through the north of Italy in December please"
)


@pytest.fixture(params=BOTH)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[DocumentStore]:
    async with opened_store(request.param, tmp_path, "memoria_threads") as opened:
        yield opened


class Chat:
    """Stores messages as the memory service's chat.out handler does."""

    def __init__(self, store: DocumentStore) -> None:
        self.history = HistoryRepository(store.collection(MESSAGES))
        self.threads = ThreadRepository(store)
        self._seq = 0

    async def setup(self) -> None:
        await self.history.setup()
        await self.threads.setup()

    def record(self, content: str, role: Role = "user", minutes: int = 0) -> ChatRecord:
        self._seq += 1
        return ChatRecord(
            id=f"m{self._seq}",
            chat_history=True,
            modal="text",
            role=role,
            content=content,
            created_at=START + timedelta(minutes=minutes),
        )

    async def store(self, user: str, thread: str, record: ChatRecord, seq: int) -> bool:
        new = await self.history.save(user, thread, record, seq)
        await self.threads.record_message(
            user, thread, record.created_at, shown=not record.tool_record
        )
        return new

    async def say(
        self, user: str, thread: str, content: str, role: Role = "user", minutes: int = 0
    ) -> ChatRecord:
        record = self.record(content, role, minutes)
        await self.store(user, thread, record, self._seq)
        return record

    async def thread(self, user: str, thread_id: str) -> Thread:
        found = await self.threads.get(user, thread_id)
        assert found is not None
        return found


@pytest.fixture
async def chat(store: DocumentStore) -> Chat:
    prepared = Chat(store)
    await prepared.setup()
    return prepared


async def test_a_thread_that_receives_messages_appears_with_a_title_from_its_first_message(
    chat: Chat,
) -> None:
    await chat.say("ana", "t1", LONG_QUESTION, minutes=1)
    await chat.say("ana", "t1", "Gladly! Which cities?", role="assistant", minutes=2)

    [thread] = await chat.threads.list("ana", limit=50)
    assert thread.thread_id == "t1"
    assert thread.title == "Could you help me plan a ten day trip through the north of…"
    assert len(thread.title) <= 60
    assert thread.message_count == 2
    assert thread.last_message == "Gladly! Which cities?"
    assert thread.created_at == START + timedelta(minutes=1)
    assert thread.updated_at == START + timedelta(minutes=2)


async def test_a_redelivered_message_counts_once(chat: Chat) -> None:
    first = await chat.say("ana", "t1", "hello")
    await chat.say("ana", "t1", "hi there", role="assistant")
    await chat.store("ana", "t1", first, 1)  # the same entry, handled again
    thread = await chat.thread("ana", "t1")
    assert thread.message_count == 2
    assert thread.last_message == "hi there"


async def test_a_message_stored_again_keeps_its_first_position_and_takes_its_new_words(
    chat: Chat,
) -> None:
    first = chat.record("draft answer", role="assistant")
    assert await chat.store("ana", "t1", first, 1)  # new
    await chat.say("ana", "t1", "and then?")
    rerun = first.model_copy(update={"content": "final answer"})  # a step re-run after a crash
    assert not await chat.store("ana", "t1", rerun, 9)  # stored before

    history = await chat.history.recent(
        "ana", "t1", limit=10, exclude_cycle_id=None, only_chat_history=False
    )
    assert [m.content for m in history] == ["final answer", "and then?"]
    thread = await chat.thread("ana", "t1")
    assert (thread.message_count, thread.last_message) == (2, "and then?")


async def test_the_title_comes_from_the_first_user_message_whatever_is_stored_first(
    chat: Chat,
) -> None:
    question = chat.record("What is my budget?")
    answer = chat.record("R$ 5,000.", role="assistant")
    # Handlers run concurrently: the answer may be stored before the question.
    await chat.store("ana", "t1", answer, 2)
    await chat.store("ana", "t1", question, 1)
    thread = await chat.thread("ana", "t1")
    assert (thread.title, thread.last_message) == ("What is my budget?", "R$ 5,000.")


async def test_concurrently_stored_messages_all_count(chat: Chat) -> None:
    records = [chat.record(f"message {n}", minutes=n) for n in range(1, 21)]
    await asyncio.gather(
        *(chat.store("ana", "t1", record, n) for n, record in enumerate(records, start=1))
    )
    thread = await chat.thread("ana", "t1")
    assert thread.message_count == 20
    assert thread.last_message == "message 20"
    assert thread.updated_at == START + timedelta(minutes=20)


async def test_a_recount_that_read_before_a_newer_message_does_not_undo_it(
    chat: Chat, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One handler counts the thread, is held up, and reads on only after a second handler
    stored and counted a newer message: its older count must not be written over."""
    messages = chat.threads._messages
    real_find = messages.find
    held_up, go_on = asyncio.Event(), asyncio.Event()

    async def slow_first_find(*args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        if not held_up.is_set():
            held_up.set()
            await go_on.wait()
        return await real_find(*args, **kwargs)

    monkeypatch.setattr(messages, "find", slow_first_find)
    first = asyncio.create_task(chat.say("ana", "t1", "first", minutes=1))
    await held_up.wait()  # it counted one message and waits to read the newest
    await chat.say("ana", "t1", "second", role="assistant", minutes=2)
    go_on.set()
    await first

    thread = await chat.thread("ana", "t1")
    assert (thread.message_count, thread.last_message) == (2, "second")


async def test_a_renamed_title_is_kept_when_messages_follow(chat: Chat) -> None:
    await chat.say("ana", "t1", "first words")
    renamed = await chat.threads.rename("ana", "t1", "Italy trip")
    assert renamed is not None
    assert renamed.title == "Italy trip"
    await chat.say("ana", "t1", "more words")
    assert (await chat.thread("ana", "t1")).title == "Italy trip"


async def test_a_created_thread_is_named_after_its_first_message_unless_titled(
    chat: Chat,
) -> None:
    untitled, created = await chat.threads.create("ana", "t_new", None)
    assert created
    assert (untitled.title, untitled.message_count, untitled.last_message) == (
        DEFAULT_THREAD_TITLE,
        0,
        None,
    )
    titled, _ = await chat.threads.create("ana", "t_titled", "Budget")
    # Messages are written after the threads were created.
    await chat.say("ana", "t_new", "Remember my passport number", minutes=60 * 24 * 365)
    await chat.say("ana", "t_titled", "How much is left?", minutes=60 * 24 * 365)
    assert (await chat.thread("ana", "t_new")).title == "Remember my passport number"
    assert (await chat.thread("ana", "t_titled")).title == "Budget"
    assert titled.title == "Budget"


async def test_creating_the_same_thread_again_changes_nothing(chat: Chat) -> None:
    first, created = await chat.threads.create("ana", "t_once", "One")
    again, created_again = await chat.threads.create("ana", "t_once", "Two")
    assert (created, created_again) == (True, False)
    assert again == first
    assert [t.thread_id for t in await chat.threads.list("ana", limit=50)] == ["t_once"]


async def test_threads_list_most_recently_updated_first_up_to_the_limit(chat: Chat) -> None:
    await chat.say("ana", "old", "a", minutes=1)
    await chat.say("ana", "newest", "b", minutes=3)
    await chat.say("ana", "middle", "c", minutes=2)
    listed = await chat.threads.list("ana", limit=50)
    assert [t.thread_id for t in listed] == ["newest", "middle", "old"]
    await chat.say("ana", "old", "d", minutes=4)  # new activity moves it up
    assert [t.thread_id for t in await chat.threads.list("ana", limit=2)] == ["old", "newest"]


async def test_users_never_see_or_rename_each_others_threads(chat: Chat) -> None:
    await chat.say("ana", "shared-name", "ana's secret plan")
    await chat.say("bob", "shared-name", "bob's shopping list")

    assert await chat.threads.rename("bob", "only-ana-has-this", "x") is None
    await chat.say("ana", "only-ana-has-this", "hi")
    assert await chat.threads.rename("bob", "only-ana-has-this", "mine now") is None
    renamed = await chat.threads.rename("bob", "shared-name", "Shopping")
    assert renamed is not None

    ana = {t.thread_id: t for t in await chat.threads.list("ana", limit=50)}
    bob = {t.thread_id: t for t in await chat.threads.list("bob", limit=50)}
    assert set(ana) == {"shared-name", "only-ana-has-this"}
    assert set(bob) == {"shared-name"}
    assert ana["shared-name"].title == "ana's secret plan"
    assert ana["only-ana-has-this"].title == "hi"
    assert (bob["shared-name"].title, bob["shared-name"].last_message) == (
        "Shopping",
        "bob's shopping list",
    )


async def test_history_stored_before_threads_existed_gets_its_threads(
    store: DocumentStore,
) -> None:
    history = HistoryRepository(store.collection(MESSAGES))
    await history.setup()
    older = Chat(store)
    await history.save("ana", "before", older.record("kept from last year", minutes=5), 1)
    await history.save("ana", "before", older.record("and answered", "assistant", 6), 2)

    upgraded = Chat(store)
    await upgraded.setup()
    await upgraded.setup()  # a restart: nothing is made twice
    [thread] = await upgraded.threads.list("ana", limit=50)
    assert (thread.thread_id, thread.title, thread.message_count) == (
        "before",
        "kept from last year",
        2,
    )
    assert thread.created_at == START + timedelta(minutes=5)
    assert thread.updated_at == START + timedelta(minutes=6)


async def test_a_steps_tool_call_and_result_are_not_counted_nor_listed(chat: Chat) -> None:
    """R-6: they are history for the LLM, not messages of the thread people see."""
    await chat.say("ana", "t1", "what is my colour?", minutes=1)
    call = tool_history.call("c", 1, "MemorySearch")
    result = tool_history.result("c", 1, "MemorySearch", "found 0 memories")
    await chat.store("ana", "t1", call, 100)
    await chat.store("ana", "t1", result, 101)

    thread = await chat.thread("ana", "t1")
    assert (thread.message_count, thread.last_message) == (1, "what is my colour?")
    shown = await chat.history.recent(
        "ana", "t1", limit=10, exclude_cycle_id=None, only_chat_history=False, tool_records=False
    )
    assert [m.id for m in shown] == ["m1"]
    everything = await chat.history.recent(
        "ana", "t1", limit=10, exclude_cycle_id=None, only_chat_history=True
    )
    assert [m.id for m in everything] == ["m1", "c.1.call", "c.1.result"]

"""Threads in the memory service's document store, on both adapters: SQLite and the MongoDB
adapter (on tinymongo's in-process emulation; the docstore contract suite covers a real
MongoDB). Messages are stored the way the chat.out handler stores them — history first, then
the thread — with no broker and no processes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
import tool_history
from document_stores import BOTH, opened_store

from memoria_contracts.chat import ChatRecord, Role
from memoria_contracts.events import ChatPosted, Envelope
from memoria_contracts.streams import Stream
from memoria_contracts.threads import DEFAULT_THREAD_TITLE, Thread
from memoria_memory.cycle_log import CycleLog
from memoria_memory.docstore import DocumentStore
from memoria_memory.handlers import MemoryHandlers
from memoria_memory.history import COLLECTION as MESSAGES
from memoria_memory.history import HistoryRepository
from memoria_memory.storage import MemoryStorage
from memoria_memory.threads import ThreadRepository
from memoria_runtime.bus import Delivery
from memoria_runtime.settings import Settings

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

    async def store(
        self, user: str, thread: str, record: ChatRecord, seq: int, *, redelivered: bool = False
    ) -> bool:
        new = await self.history.save(user, thread, record, seq)
        await self.threads.record_message(user, thread, record, seq, fresh=new and not redelivered)
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
    """A redelivery recounts the thread, is held up, and reads on only after a second
    handler stored and counted a newer message: its older count must not be written over."""
    first = await chat.say("ana", "t1", "first", minutes=1)
    messages = chat.threads._messages
    real_find = messages.find
    held_up, go_on = asyncio.Event(), asyncio.Event()

    async def slow_first_find(*args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        if not held_up.is_set():
            held_up.set()
            await go_on.wait()
        return await real_find(*args, **kwargs)

    monkeypatch.setattr(messages, "find", slow_first_find)
    recount = asyncio.create_task(chat.store("ana", "t1", first, 1, redelivered=True))
    await held_up.wait()  # it counted one message and waits to read the newest
    await chat.say("ana", "t1", "second", role="assistant", minutes=2)
    go_on.set()
    await recount

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
    """Tool calls and results are history for the LLM, not messages of the thread people see."""
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


# -- counted up: each message once, recounted whenever that is in doubt ----------------------

STATS = ("message_count", "last_seq", "last_message", "auto_title", "auto_title_seq", "updated_at")
MANY = 60


async def stats(chat: Chat, user: str, thread_id: str) -> dict[str, Any]:
    found = await chat.threads._find(user, thread_id)
    assert found is not None
    return {name: found.get(name) for name in STATS}


async def recounted(chat: Chat, user: str, thread_id: str, record: ChatRecord) -> dict[str, Any]:
    """The statistics once recounted from the history, as a redelivery of ``record`` does."""
    await chat.store(user, thread_id, record, 0, redelivered=True)
    return await stats(chat, user, thread_id)


async def test_counts_stay_right_over_many_messages_whatever_order_they_are_handled_in(
    chat: Chat,
) -> None:
    """Users, answers and tool records, handled in bursts out of publication order: what was
    counted up is exactly what a recount of the history makes of it."""
    records: list[tuple[int, ChatRecord]] = []
    for n in range(1, MANY + 1):
        if n % 5 == 0:
            record = tool_history.call(f"c{n}", 1, "MemorySearch")
        elif n % 5 == 1:
            record = chat.record(f"question {n}", role="user", minutes=n)
        else:
            record = chat.record(f"answer {n}", role="assistant", minutes=n)
        records.append((n, record))
    bursts = [records[start : start + 6] for start in range(0, MANY, 6)]
    for burst in bursts:
        await asyncio.gather(
            *(chat.store("ana", "t1", record, seq) for seq, record in reversed(burst))
        )

    counted = await stats(chat, "ana", "t1")
    assert counted["message_count"] == MANY - MANY // 5
    assert (counted["last_seq"], counted["last_message"]) == (MANY - 1, f"answer {MANY - 1}")
    assert (counted["auto_title"], counted["auto_title_seq"]) == ("question 1", 1)
    assert counted == await recounted(chat, "ana", "t1", records[0][1])


async def test_a_redelivered_entry_is_never_counted_twice(chat: Chat) -> None:
    question = await chat.say("ana", "t1", "hello")
    answer = chat.record("hi there", role="assistant")
    # The first delivery died before it stored the answer: the redelivery stores it new.
    assert await chat.store("ana", "t1", answer, 2, redelivered=True)
    # And one that died after storing and counting the question is handled again.
    assert not await chat.store("ana", "t1", question, 1, redelivered=True)

    thread = await chat.thread("ana", "t1")
    assert (thread.message_count, thread.last_message) == (2, "hi there")


async def test_a_message_posted_again_under_a_new_entry_is_not_counted_twice(chat: Chat) -> None:
    answer = chat.record("draft", role="assistant", minutes=1)
    assert await chat.store("ana", "t1", answer, 1)
    rerun = answer.model_copy(update={"content": "final"})
    for seq in (7, 8):  # posted again after a crash, each a new entry delivered once
        assert not await chat.store("ana", "t1", rerun, seq)

    thread = await chat.thread("ana", "t1")
    assert (thread.message_count, thread.last_message) == (1, "final")


async def test_a_tool_record_counts_in_nothing_however_it_is_delivered(chat: Chat) -> None:
    await chat.say("ana", "t1", "what is my colour?", minutes=1)
    before = await stats(chat, "ana", "t1")
    call = tool_history.call("c", 1, "MemorySearch")
    result = tool_history.result("c", 1, "MemorySearch", "found 0 memories")
    await chat.store("ana", "t1", call, 100)
    await chat.store("ana", "t1", result, 101, redelivered=True)
    await chat.store("ana", "t1", result, 101)

    assert await stats(chat, "ana", "t1") == before


async def test_a_crash_between_storing_and_counting_is_healed_by_the_redelivery(
    chat: Chat,
) -> None:
    await chat.say("ana", "t1", "first question", minutes=1)
    lost = chat.record("an answer whose handler died", role="assistant", minutes=2)
    await chat.history.save("ana", "t1", lost, 2)  # stored; the process died before counting
    await chat.say("ana", "t1", "and meanwhile another", minutes=3)
    assert (await chat.thread("ana", "t1")).message_count == 2  # one short, for now

    await chat.store("ana", "t1", lost, 2, redelivered=True)  # the entry was left pending

    thread = await chat.thread("ana", "t1")
    assert (thread.message_count, thread.last_message) == (3, "and meanwhile another")


async def test_a_recount_also_lowers_a_count_that_is_too_high(chat: Chat) -> None:
    """A recount that saw a message its handler had not counted up yet makes that handler's
    increment count it twice; the next recount of the thread must be free to lower it."""
    first = await chat.say("ana", "t1", "hello", minutes=1)
    await chat.say("ana", "t1", "hi there", role="assistant", minutes=2)
    await chat.threads._threads.update_one({"_id": "ana/t1"}, inc={"message_count": 1})

    await chat.store("ana", "t1", first, 1, redelivered=True)

    thread = await chat.thread("ana", "t1")
    assert (thread.message_count, thread.last_message) == (2, "hi there")


async def test_the_handler_recounts_a_redelivered_entry_after_a_crash(
    store: DocumentStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the chat.out handler: its first delivery stores the message and dies before
    counting it; the consumer hands the entry over again, marked as a redelivery."""
    chat = Chat(store)
    await chat.setup()
    handlers = MemoryHandlers(Settings.load(_env_file=None))
    summarizer = SimpleNamespace(schedule=lambda *_: None)
    storage = SimpleNamespace(history=chat.history, summarizer=summarizer)
    handlers.attach(cast(MemoryStorage, storage), chat.threads)
    handlers.attach_cycle_log(cast(CycleLog, SimpleNamespace(record=_nothing)))
    record = chat.record("remember my passport number")
    event = Envelope(user_id="ana", thread_id="t1", payload=ChatPosted(message=record))

    def delivery(redelivered: bool) -> Delivery:
        return Delivery(
            Stream.CHAT_OUT.value, "memory-history", "1700000000000-0", b"", redelivered
        )

    async def crash(*_: object) -> None:
        raise RuntimeError("the process died")

    with monkeypatch.context() as patched:
        patched.setattr(chat.threads, "_count", crash)
        with pytest.raises(RuntimeError):
            await handlers.on_chat_out(event, delivery(False))
    assert (await chat.thread("ana", "t1")).message_count == 0

    await handlers.on_chat_out(event, delivery(True))
    await handlers.on_chat_out(event, delivery(True))  # and once more: still one

    thread = await chat.thread("ana", "t1")
    assert (thread.message_count, thread.title) == (1, "remember my passport number")
    assert thread.last_message == "remember my passport number"


async def test_a_message_handled_late_never_moves_the_newest_backwards(chat: Chat) -> None:
    newer = chat.record("newer answer", role="assistant", minutes=5)
    older = chat.record("older answer", role="assistant", minutes=4)
    await chat.store("ana", "t1", newer, 5)
    await chat.store("ana", "t1", older, 4)  # published first, handled second
    counted = await chat.thread("ana", "t1")
    await chat.store("ana", "t1", older, 4, redelivered=True)  # and recounted

    for thread in (counted, await chat.thread("ana", "t1")):
        assert (thread.message_count, thread.last_message) == (2, "newer answer")
        assert thread.updated_at == START + timedelta(minutes=5)


async def test_the_title_moves_to_a_first_user_message_handled_late(chat: Chat) -> None:
    second = chat.record("the second question")
    first = chat.record("the first question")
    await chat.store("ana", "t1", second, 2)
    assert (await chat.thread("ana", "t1")).title == "the second question"
    await chat.store("ana", "t1", first, 1)  # published first, handled second
    await chat.say("ana", "t1", "a third question")  # comes after: changes nothing

    assert (await chat.thread("ana", "t1")).title == "the first question"


async def test_a_title_made_before_title_positions_were_kept_stays(chat: Chat) -> None:
    await chat.say("ana", "t1", "the first question")
    # A thread document written by the version that kept no title position.
    await chat.threads._threads.update_one({"_id": "ana/t1"}, unset=["auto_title_seq"])
    await chat.say("ana", "t1", "a later question")

    assert (await chat.thread("ana", "t1")).title == "the first question"


async def _nothing(*_: object) -> None:
    return None

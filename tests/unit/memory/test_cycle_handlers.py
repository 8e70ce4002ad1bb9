"""The memory service's handlers for cycle traces: events in from chat.in, actions,
actions.done and chat.out (at-least-once: a redelivery changes nothing), and the
``cycle.get`` request answered for the envelope's user only; each cycle's end kept with the
history and returned with it. SQLite documents, no broker."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest

from memoria_contracts.chat import ChatRecord
from memoria_contracts.cycles import CycleFailure, CycleFound, CycleGet, cycle_id_for
from memoria_contracts.events import (
    ActionCompleted,
    ActionOutcome,
    ActionRequested,
    ChatDelta,
    ChatPosted,
    CycleContext,
    CycleEnded,
    CycleUsage,
    Envelope,
    HistoryPage,
    HistoryQuery,
    Payload,
    UserMessageReceived,
)
from memoria_contracts.streams import Group, Stream
from memoria_memory.cycle_log import CycleLog
from memoria_memory.cycle_summaries import COLLECTION as CYCLE_SUMMARIES
from memoria_memory.cycle_summaries import CycleSummaries
from memoria_memory.docstore.sqlite import SqliteDocumentStore
from memoria_memory.handlers import MemoryHandlers
from memoria_memory.history import COLLECTION as MESSAGES
from memoria_memory.history import HistoryRepository
from memoria_memory.storage import MemoryStorage
from memoria_memory.summarizer import COLLECTION as SUMMARIES
from memoria_memory.summarizer import HistorySummarizer, SummaryBounds, SummaryStore
from memoria_memory.threads import ThreadRepository
from memoria_runtime.bus import Delivery
from memoria_runtime.settings import Settings

START = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
MESSAGE_ID = "msg_01hzy3k2v7q9r8s6t5u4w3x2y1"
CYCLE_ID = cycle_id_for(MESSAGE_ID)
USAGE = CycleUsage(input_tokens=120, output_tokens=30, cost_usd=0.0042)
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


@pytest.fixture
async def handlers(tmp_path: Path) -> AsyncIterator[MemoryHandlers]:
    store = await SqliteDocumentStore.open(tmp_path / "docs.db")
    history = HistoryRepository(store.collection(MESSAGES))
    await history.setup()
    threads = ThreadRepository(store)
    await threads.setup()
    cycles = CycleLog(store)
    await cycles.setup()
    handlers = MemoryHandlers(Settings.load(_env_file=None))
    # The chat.out handler needs only the history and its summarizer of what storage holds.
    summarizer = HistorySummarizer(
        history,
        SummaryStore(store.collection(SUMMARIES)),
        SummaryBounds(verbatim=20, structured=80, archive_chars=4000),
        delay_s=0.0,
    )
    cycle_summaries = CycleSummaries(store.collection(CYCLE_SUMMARIES), store.collection(MESSAGES))
    await cycle_summaries.setup()
    storage = SimpleNamespace(
        history=history, summarizer=summarizer, cycle_summaries=cycle_summaries
    )
    handlers.attach(cast(MemoryStorage, storage), threads)
    handlers.attach_cycle_log(cycles)
    try:
        yield handlers
    finally:
        await summarizer.aclose()
        await store.close()


class Bus:
    """Hands envelopes to the handlers as the consumer would, one stream entry each."""

    def __init__(self, handlers: MemoryHandlers) -> None:
        self.handlers = handlers
        self.deliveries: list[tuple[Envelope, Delivery]] = []
        self.tick = 0

    async def deliver(self, event: Envelope, delivery: Delivery) -> None:
        if delivery.stream == Stream.CHAT_OUT.value:
            await self.handlers.on_chat_out(event, delivery)
        else:
            await self.handlers.on_cycle_event(event, delivery)

    async def publish(self, stream: Stream, payload: Payload, user_id: str = "ana") -> None:
        self.tick += 1
        event = Envelope(
            user_id=user_id,
            thread_id="t-1",
            cycle_id=None if isinstance(payload, UserMessageReceived) else CYCLE_ID,
            time=START + timedelta(milliseconds=self.tick),
            trace={"traceparent": TRACEPARENT},
            payload=payload,
        )
        group = Group.MEMORY_HISTORY if stream is Stream.CHAT_OUT else Group.MEMORY_TRACE
        delivery = Delivery(
            stream=stream.value,
            group=group.value,
            entry_id=f"{1_700_000_000_000 + self.tick}-0",
            data=event.model_dump_json().encode(),
            redelivered=False,
        )
        self.deliveries.append((event, delivery))
        await self.deliver(event, delivery)

    async def run_cycle(self, user_id: str = "ana") -> None:
        original = ChatRecord(
            id=MESSAGE_ID,
            cycle_id=CYCLE_ID,
            chat_history=True,
            modal="text",
            role="user",
            content="hi",
            created_at=START,
        )
        answer = ChatRecord(
            id=f"{CYCLE_ID}.1.answer",
            cycle_id=CYCLE_ID,
            chat_history=False,
            modal="text",
            role="assistant",
            content="Hello there",
        )
        outcome = ActionOutcome(status="ok", ends_cycle=True, summary="answered")
        entries: list[tuple[Stream, Payload]] = [
            (Stream.CHAT_IN, UserMessageReceived(message_id=MESSAGE_ID, content="hi")),
            (Stream.CHAT_OUT, ChatPosted(message=original)),
            (
                Stream.ACTIONS,
                ActionRequested(
                    step=1, action="Finalize", context=CycleContext(original_message=original)
                ),
            ),
            (Stream.CHAT_OUT, ChatDelta(message_id=answer.id, content="Hello ")),
            (Stream.CHAT_OUT, ChatDelta(message_id=answer.id, content="there")),
            (Stream.CHAT_OUT, ChatPosted(message=answer)),
            (
                Stream.ACTIONS_DONE,
                ActionCompleted(step=1, action="Finalize", outcome=outcome, worker="w1"),
            ),
            (Stream.CHAT_OUT, CycleEnded(actions=["Finalize"], reason="done", usage=USAGE)),
        ]
        for stream, payload in entries:
            await self.publish(stream, payload, user_id)


async def ask(handlers: MemoryHandlers, user_id: str, cycle_id: str) -> Payload:
    request = Envelope(user_id=user_id, thread_id="api", payload=CycleGet(cycle_id=cycle_id))
    delivery = Delivery(Stream.MEMORY_RPC.value, Group.MEMORY.value, "1-0", b"", False)
    reply = await handlers.on_request(request, delivery)
    assert reply.user_id == user_id
    return reply.payload


async def test_every_stream_of_a_cycle_lands_in_its_trace(handlers: MemoryHandlers) -> None:
    await Bus(handlers).run_cycle()

    reply = await ask(handlers, "ana", CYCLE_ID)

    assert isinstance(reply, CycleFound)
    assert [(e.stream, e.type) for e in reply.cycle.events] == [
        ("chat.in", "user.message"),
        ("chat.out", "chat.message"),
        ("actions", "action.requested"),
        ("chat.out", "chat.message"),
        ("actions.done", "action.completed"),
        ("chat.out", "cycle.ended"),
    ]
    assert reply.cycle.end_reason == "done"


async def test_redelivered_entries_change_nothing(handlers: MemoryHandlers) -> None:
    bus = Bus(handlers)
    await bus.run_cycle()
    before = await ask(handlers, "ana", CYCLE_ID)

    for event, delivery in bus.deliveries:  # every entry again, as a reclaimer would
        redelivery = Delivery(
            delivery.stream, delivery.group, delivery.entry_id, delivery.data, True
        )
        await bus.deliver(event, redelivery)

    assert await ask(handlers, "ana", CYCLE_ID) == before
    history = await handlers.storage.history.recent(
        "ana", "t-1", limit=50, exclude_cycle_id=None, only_chat_history=False
    )
    assert [m.content for m in history] == ["hi", "Hello there"]  # the history is unchanged


async def test_another_users_cycle_and_an_unknown_one_are_not_found(
    handlers: MemoryHandlers,
) -> None:
    await Bus(handlers).run_cycle(user_id="ana")

    for user_id, cycle_id in (("bob", CYCLE_ID), ("ana", "cyc_nothing")):
        reply = await ask(handlers, user_id, cycle_id)
        assert isinstance(reply, CycleFailure)
        assert (reply.code, reply.cycle_id) == ("not_found", cycle_id)


async def shown_page(
    handlers: MemoryHandlers, user_id: str = "ana", before_id: str | None = None
) -> HistoryPage:
    query = HistoryQuery(
        only_chat_history=False, tool_records=False, cycles=True, before_id=before_id
    )
    request = Envelope(user_id=user_id, thread_id="t-1", payload=query)
    delivery = Delivery(Stream.MEMORY_RPC.value, Group.MEMORY.value, "1-0", b"", False)
    reply = (await handlers.on_request(request, delivery)).payload
    assert isinstance(reply, HistoryPage)
    return reply


async def test_a_cycles_end_is_kept_with_the_history(handlers: MemoryHandlers) -> None:
    await Bus(handlers).run_cycle()

    page = await shown_page(handlers)

    assert [m.content for m in page.messages] == ["hi", "Hello there"]
    [summary] = page.cycles
    assert (summary.cycle_id, summary.actions, summary.reason) == (CYCLE_ID, ["Finalize"], "done")
    assert summary.usage == USAGE
    # From the user's message (START) to the end: the run's eighth event, a millisecond each.
    assert summary.duration_ms == 8
    assert (await shown_page(handlers, "bob")).cycles == []  # another user's is not theirs


async def test_an_end_announced_again_keeps_the_first(handlers: MemoryHandlers) -> None:
    bus = Bus(handlers)
    await bus.run_cycle()
    first = (await shown_page(handlers)).cycles

    await bus.publish(Stream.CHAT_OUT, CycleEnded(actions=["Other"], reason="llm_error"))

    assert (await shown_page(handlers)).cycles == first


async def test_the_history_without_asking_has_no_cycles(handlers: MemoryHandlers) -> None:
    await Bus(handlers).run_cycle()
    request = Envelope(user_id="ana", thread_id="t-1", payload=HistoryQuery())
    delivery = Delivery(Stream.MEMORY_RPC.value, Group.MEMORY.value, "1-0", b"", False)
    reply = (await handlers.on_request(request, delivery)).payload
    assert isinstance(reply, HistoryPage) and reply.cycles == []


async def test_a_cycle_cut_by_the_pages_edge_has_its_end_on_the_newer_page(
    handlers: MemoryHandlers,
) -> None:
    await Bus(handlers).run_cycle()

    older = await shown_page(handlers, before_id=f"{CYCLE_ID}.1.answer")

    assert [m.content for m in older.messages] == ["hi"]
    assert older.cycles == []  # the cycle goes on past this page: its end is not here

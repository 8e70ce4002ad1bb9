"""Progressive summaries of a thread's history in the memory service, on SQLite:
computed in the background after messages are stored, only read by ``history.query``."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest

from memoria_contracts.chat import ChatRecord, ToolCall
from memoria_contracts.events import ChatPosted, Envelope, HistoryPage, HistoryQuery
from memoria_contracts.session import SessionConfigOverrides, SessionConfigPatch
from memoria_contracts.streams import Stream
from memoria_memory.cycle_log import CycleLog
from memoria_memory.docstore import DocumentStore
from memoria_memory.docstore.sqlite import SqliteDocumentStore
from memoria_memory.handlers import MemoryHandlers
from memoria_memory.history import COLLECTION as MESSAGES
from memoria_memory.history import HistoryRepository, stream_sequence
from memoria_memory.storage import MemoryStorage
from memoria_memory.summarizer import COLLECTION as SUMMARIES
from memoria_memory.summarizer import HistorySummarizer, SummaryBounds, SummaryStore
from memoria_memory.threads import ThreadRepository
from memoria_runtime.bus import Delivery
from memoria_runtime.settings import Settings

USER, THREAD = "ana", "t1"
BOUNDS = SummaryBounds(verbatim=20, structured=80, archive_chars=4000)
MESSAGES_PER_TURN = 5  # user, call, memory card, result, answer
BACKGROUND_POLLS = 200
QUERY_BUDGET_S = 0.5  # a query reads; on these tiny stores it takes milliseconds


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[DocumentStore]:
    # SQLite only: the queries used are in the docstore contract suite, which runs them on
    # MongoDB too; on tinymongo's emulation these hundreds of messages take a minute.
    sqlite = await SqliteDocumentStore.open(tmp_path / "docs.db")
    try:
        yield sqlite
    finally:
        await sqlite.close()


class Service:
    """The memory service's history part: repository, summaries, handlers, no broker."""

    def __init__(self, store: DocumentStore, bounds: SummaryBounds, delay_s: float) -> None:
        self.history = HistoryRepository(store.collection(MESSAGES))
        self.summaries = SummaryStore(store.collection(SUMMARIES))
        self.summarizer = HistorySummarizer(self.history, self.summaries, bounds, delay_s)
        self.threads = ThreadRepository(store)
        self.handlers = MemoryHandlers(Settings.load(_env_file=None))
        storage = SimpleNamespace(
            history=self.history, summaries=self.summaries, summarizer=self.summarizer
        )
        self.handlers.attach(cast(MemoryStorage, storage), self.threads)
        self.entry = 0

    async def setup(self) -> None:
        await self.history.setup()
        await self.threads.setup()

    async def post(self, record: ChatRecord) -> None:
        """Stored as chat.out's handler stores it (no summary scheduled)."""
        self.entry += 1
        seq = stream_sequence(f"{1_700_000_000_000 + self.entry}-0")
        new = await self.history.save(USER, THREAD, record, seq)
        await self.threads.record_message(USER, THREAD, record, seq, fresh=new)

    async def page(
        self, limit: int = 50, *, session: bool = False, thread_id: str = THREAD
    ) -> HistoryPage:
        query = HistoryQuery(limit=limit, summary=True, session=session)
        request = Envelope(user_id=USER, thread_id=thread_id, payload=query)
        reply = await self.handlers.on_request(request, cast(Delivery, None))
        assert isinstance(reply.payload, HistoryPage)
        return reply.payload


def turn(n: int) -> list[ChatRecord]:
    cycle = f"c{n:03d}"
    payload = {"memory_id": f"mem_{n}", "content": f"fact {n} " + "x" * 400}

    def rec(suffix: str, role: str, content: object, **extra: object) -> ChatRecord:
        return ChatRecord.model_validate(
            {
                "id": f"{cycle}.{suffix}",
                "cycle_id": cycle,
                "chat-history": True,
                "modal": "text",
                "role": role,
                "content": content,
                **extra,
            }
        )

    return [
        rec("user", "user", f"Question number {n}. With a second sentence that is dropped."),
        rec("call", "assistant", "", tool_calls=[ToolCall(id=f"call_{n}", name="MemorySearch")]),
        rec("card", "system", payload, modal="memory"),
        rec("result", "tool", "found 3 memories", tool_call_id=f"call_{n}", name="MemorySearch"),
        rec("answer", "assistant", f"Answer {n}. " + "long " * 100),
    ]


@pytest.fixture
async def service(store: DocumentStore) -> AsyncIterator[Service]:
    prepared = Service(store, BOUNDS, delay_s=0.0)
    await prepared.setup()
    try:
        yield prepared
    finally:
        await prepared.summarizer.aclose()


async def post_turns(service: Service, numbers: range) -> None:
    for n in numbers:
        for record in turn(n):
            await service.post(record)


async def test_newest_20_verbatim_then_structured_turns_then_the_archive(service: Service) -> None:
    await post_turns(service, range(40))  # 200 messages
    await service.summarizer.update(USER, THREAD)

    page = await service.page()

    assert [m.id for m in page.messages] == [r.id for n in range(36, 40) for r in turn(n)]
    assert page.summary is not None
    turns = page.summary.turns
    assert [t.cycle_id for t in turns] == [f"c{n:03d}" for n in range(20, 36)]  # 80 messages
    first = turns[0].lines
    assert first[0] == "user: Question number 20. With a second sentence that is dropped."
    assert first[1] == f"memories shown (1): fact 20 {'x' * 31}…"  # a big payload, one line
    assert first[2] == "MemorySearch: found 3 memories"  # the call itself has no line
    assert first[3].startswith("assistant: Answer 20. long long")
    assert len(first) == 4
    assert all(len(line) <= 160 for t in turns for line in t.lines)
    archive = page.summary.archive.splitlines()
    assert archive[0] == (
        "- user: Question number 0. | actions: MemorySearch | assistant: Answer 0."
    )
    assert len(archive) == 20  # the 100 oldest messages, one line per turn


async def test_the_archive_grows_incrementally_and_matches_a_full_recount(
    service: Service, store: DocumentStore
) -> None:
    await post_turns(service, range(30))
    await service.summarizer.update(USER, THREAD)
    await post_turns(service, range(30, 45))
    await service.summarizer.update(USER, THREAD)
    await service.summarizer.update(USER, THREAD)  # a re-run changes nothing
    incremental = await service.page()

    again = Service(store, BOUNDS, delay_s=0.0)
    await again.summaries.put(USER, THREAD, {"turns": [], "archive": "", "until_seq": 0})
    await again.summarizer.update(USER, THREAD)
    assert (await again.page()) == incremental
    assert incremental.summary is not None
    assert len(incremental.summary.archive.splitlines()) == 25


async def test_the_archive_keeps_its_newest_lines_within_its_bound(store: DocumentStore) -> None:
    service = Service(store, SummaryBounds(verbatim=20, structured=80, archive_chars=300), 0.0)
    await service.setup()
    await post_turns(service, range(60))
    await service.summarizer.update(USER, THREAD)
    page = await service.page()
    assert page.summary is not None
    assert 0 < len(page.summary.archive) <= 300
    assert page.summary.archive.splitlines()[-1].startswith("- user: Question number 39.")


async def test_a_query_reads_the_summary_and_never_computes_it(service: Service) -> None:
    await post_turns(service, range(40))
    started = time.perf_counter()
    page = await service.page(limit=50)
    assert time.perf_counter() - started < QUERY_BUDGET_S
    # No summary was computed: the newest ``limit`` messages, bounded, and no summary.
    assert page.summary is None
    assert len(page.messages) == 50
    assert await service.summaries.get(USER, THREAD) is None


async def test_messages_newer_than_the_summary_are_all_verbatim_up_to_the_limit(
    service: Service,
) -> None:
    await post_turns(service, range(40))
    await service.summarizer.update(USER, THREAD)
    await post_turns(service, range(40, 42))  # the summarizer has not caught up yet

    page = await service.page(limit=50)
    assert len(page.messages) == 20 + 2 * MESSAGES_PER_TURN  # nothing falls in a gap
    assert len((await service.page(limit=25)).messages) == 25  # and never beyond the limit


async def test_storing_a_message_updates_the_summary_later_in_the_background(
    store: DocumentStore,
) -> None:
    service = Service(store, BOUNDS, delay_s=0.5)
    await service.setup()
    service.handlers.attach_cycle_log(cast(CycleLog, SimpleNamespace(record=_ignore)))
    await post_turns(service, range(29))
    for record in turn(29):
        service.entry += 1
        delivery = Delivery(
            stream=Stream.CHAT_OUT.value,
            group="memory-history",
            entry_id=f"{1_700_000_000_000 + service.entry}-0",
            data=b"",
            redelivered=False,
        )
        event = Envelope(user_id=USER, thread_id=THREAD, payload=ChatPosted(message=record))
        await service.handlers.on_chat_out(event, delivery)
        if record.role == "user":  # the handler returned; the update waits in the background
            assert await service.summaries.get(USER, THREAD) is None
    stored = None
    for _ in range(BACKGROUND_POLLS):
        await asyncio.sleep(0.05)
        stored = await service.summaries.get(USER, THREAD)
        if stored is not None:
            break
    assert stored is not None
    assert [t.cycle_id for t in stored.summary.turns][-1] == "c025"
    await service.summarizer.aclose()


async def _ignore(*_: object) -> None:
    return None


async def test_a_short_thread_has_no_summary(service: Service) -> None:
    await post_turns(service, range(4))  # 20 messages: all verbatim
    await service.summarizer.update(USER, THREAD)
    page = await service.page()
    assert page.summary is None
    assert len(page.messages) == 20


async def test_a_cycle_gets_its_history_and_its_session_config_in_one_request(
    service: Service,
) -> None:
    await post_turns(service, range(2))
    await service.threads.update_session_config(
        USER,
        SessionConfigPatch.model_validate({"memory_limit": 3}).as_update(THREAD),
        default_persona=Settings.load(_env_file=None).cycle.default_persona,
    )

    page = await service.page(session=True)
    assert len(page.messages) == 10
    assert page.session is not None
    assert page.session.config.memory_limit == 3
    assert page.session.overrides.memory_limit == 3
    # A thread not stored yet (a cycle's first message) has the defaults.
    fresh = await service.page(session=True, thread_id="new-thread")
    assert fresh.messages == []
    assert fresh.session is not None
    assert fresh.session.overrides == SessionConfigOverrides()
    assert fresh.session.config.memory_limit == Settings.load(_env_file=None).memory.memory_limit
    # Not asked, not read.
    assert (await service.page()).session is None


class CountingSummarizer(HistorySummarizer):
    def __init__(self, service: Service, delay_s: float) -> None:
        super().__init__(service.history, service.summaries, BOUNDS, delay_s)
        self.updates = 0
        self.release = asyncio.Event()

    async def update(self, user_id: str, thread_id: str) -> None:
        self.updates += 1
        await self.release.wait()


async def test_a_burst_of_messages_makes_one_update_and_one_during_it_another(
    service: Service,
) -> None:
    summarizer = CountingSummarizer(service, delay_s=0.05)
    for _ in range(5):
        summarizer.schedule(USER, THREAD)
    await asyncio.sleep(0.2)
    assert summarizer.updates == 1  # debounced; this update is still running
    summarizer.schedule(USER, THREAD)  # a message stored during it: one more update later
    summarizer.release.set()
    await asyncio.sleep(0.2)
    assert summarizer.updates == 2
    await summarizer.aclose()


async def test_layers_meet_at_turn_boundaries(service: Service) -> None:
    """Turns of 3 messages: 20 and 100 fall inside turns, which are not split."""
    for n in range(40):
        user, call, _card, result, _answer = turn(n)
        for record in (user, call, result):
            await service.post(record)
        if n in (30, 39):
            await service.summarizer.update(USER, THREAD)

    page = await service.page()

    assert page.summary is not None
    assert page.messages[0].role == "user"  # the verbatim part starts with its turn
    assert len(page.messages) == 21
    assert all(t.lines[0].startswith("user: ") for t in page.summary.turns)
    assert [t.cycle_id for t in page.summary.turns] == [f"c{n:03d}" for n in range(7, 33)]
    archive = page.summary.archive.splitlines()
    assert all(line.startswith("- user: ") for line in archive)  # whole turns, even added
    assert len(archive) == 7  # turns 0-6: turn 6 began before the window, archived whole

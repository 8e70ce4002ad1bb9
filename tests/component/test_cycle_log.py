"""Cycle traces in the memory service's document store, on both adapters: SQLite and the
MongoDB adapter — on tinymongo's in-process emulation everywhere, and on a real MongoDB
(``MONGODB_URL``, or testcontainers where a Docker engine runs; skipped otherwise). Events
are recorded the way the memory service's handlers record them — one envelope and its
stream entry at a time — with no broker and no processes."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memoria_contracts.chat import ChatRecord
from memoria_contracts.cycles import cycle_id_for
from memoria_contracts.events import (
    ActionCompleted,
    ActionOutcome,
    ActionRequested,
    ChatDelta,
    ChatPosted,
    CycleContext,
    CycleEnded,
    Envelope,
    Payload,
    UserMessageReceived,
)
from memoria_contracts.streams import Stream
from memoria_memory import cycle_log
from memoria_memory.cycle_log import CycleLog, purge_forever, trace_id_of
from memoria_memory.docstore import DocumentStore

sys.path.insert(0, str(Path(__file__).parent.parent / "support"))
from document_stores import ALL, opened_store

START = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
START_MS = int(START.timestamp() * 1000)
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"
MESSAGE_ID = "msg_01hzy3k2v7q9r8s6t5u4w3x2y1"
CYCLE_ID = cycle_id_for(MESSAGE_ID)


@pytest.fixture(params=ALL)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[DocumentStore]:
    async with opened_store(request.param, tmp_path, "memoria_cycles", request) as opened:
        yield opened


@pytest.fixture
async def log(store: DocumentStore) -> CycleLog:
    cycles = CycleLog(store)
    await cycles.setup()
    await cycles.setup()  # idempotent, as on every start
    return cycles


class Cycle:
    """Publishes one scripted cycle's envelopes with increasing stream entry ids."""

    def __init__(self, log: CycleLog, user_id: str = "ana", cycle_id: str = CYCLE_ID) -> None:
        self.log = log
        self.user_id = user_id
        self.cycle_id = cycle_id
        self.tick = 0

    def envelope(self, payload: Payload, *, cycle_id: str | None = "") -> Envelope:
        self.tick += 1
        return Envelope(
            user_id=self.user_id,
            thread_id="t-1",
            cycle_id=self.cycle_id if cycle_id == "" else cycle_id,
            time=START + timedelta(milliseconds=self.tick),
            trace={"traceparent": TRACEPARENT},
            payload=payload,
        )

    async def publish(
        self, stream: Stream, payload: Payload, *, cycle_id: str | None = ""
    ) -> tuple[Envelope, str]:
        event = self.envelope(payload, cycle_id=cycle_id)
        entry_id = f"{START_MS + self.tick}-0"
        await self.log.record(event, stream.value, entry_id)
        return event, entry_id

    def message(self, suffix: str, content: str, **fields: Any) -> ChatRecord:
        values: dict[str, Any] = {
            "chat_history": True,
            "modal": "text",
            "role": "assistant",
            **fields,
        }
        return ChatRecord(
            id=f"{self.cycle_id}.{suffix}", cycle_id=self.cycle_id, content=content, **values
        )

    async def run(self, answer: str = "Hello!") -> None:
        original = ChatRecord(
            id=MESSAGE_ID, chat_history=True, modal="text", role="user", content="hi"
        )
        await self.publish(
            Stream.CHAT_IN, UserMessageReceived(message_id=MESSAGE_ID, content="hi"), cycle_id=None
        )
        await self.publish(Stream.CHAT_OUT, ChatPosted(message=original))
        thinking = self.message("1.status", "Thinking...", modal="textForReplace", role="system")
        await self.publish(Stream.CHAT_OUT, ChatPosted(message=thinking))
        context = CycleContext(original_message=original, transcript=[original])
        await self.publish(
            Stream.ACTIONS, ActionRequested(step=1, action="Finalize", context=context)
        )
        final = self.message("1.answer", answer, chat_history=False)
        for piece in answer.split():
            await self.publish(Stream.CHAT_OUT, ChatDelta(message_id=final.id, content=piece))
        await self.publish(Stream.CHAT_OUT, ChatPosted(message=final))
        outcome = ActionOutcome(status="ok", ends_cycle=True, summary="answered", messages=[final])
        await self.publish(
            Stream.ACTIONS_DONE,
            ActionCompleted(step=1, action="Finalize", outcome=outcome, worker="w1"),
        )
        await self.publish(Stream.CHAT_OUT, CycleEnded(actions=["Finalize"], reason="done"))


async def test_a_cycle_is_returned_in_order_with_its_trace_id(log: CycleLog) -> None:
    await Cycle(log).run()

    cycle = await log.cycle("ana", CYCLE_ID)

    assert cycle is not None
    assert (cycle.cycle_id, cycle.thread_id, cycle.trace_id) == (CYCLE_ID, "t-1", TRACE_ID)
    assert [(e.stream, e.type) for e in cycle.events] == [
        ("chat.in", "user.message"),
        ("chat.out", "chat.message"),
        ("chat.out", "chat.message"),
        ("actions", "action.requested"),
        ("chat.out", "chat.message"),  # the answer: its deltas are not kept
        ("actions.done", "action.completed"),
        ("chat.out", "cycle.ended"),
    ]
    user, echo, thinking, requested, answer, completed, ended = cycle.events
    assert user.message is not None and user.message.content == "hi"
    assert user.message.id == MESSAGE_ID and user.message.role == "user"
    assert echo.message is not None and echo.message.id == MESSAGE_ID
    assert thinking.message is not None and thinking.message.modal == "textForReplace"
    assert (requested.step, requested.action) == (1, "Finalize")
    assert answer.message is not None and answer.message.content == "Hello!"
    assert (completed.step, completed.status, completed.ends_cycle) == (1, "ok", True)
    assert (completed.summary, completed.worker, completed.error) == ("answered", "w1", None)
    assert (ended.actions, ended.reason) == (["Finalize"], "done")
    assert {e.trace_id for e in cycle.events} == {TRACE_ID}
    assert [e.at for e in cycle.events] == sorted(e.at for e in cycle.events)
    assert cycle.started_at == user.at
    assert (cycle.ended_at, cycle.end_reason) == (ended.at, "done")
    assert cycle.actions == ["Finalize"]
    assert cycle.truncated is False


async def test_a_running_cycle_lists_the_actions_requested_so_far(log: CycleLog) -> None:
    cycle = Cycle(log)
    original = ChatRecord(id=MESSAGE_ID, chat_history=True, modal="text", role="user", content="x")
    context = CycleContext(original_message=original)
    await cycle.publish(
        Stream.ACTIONS, ActionRequested(step=1, action="MemorySearch", context=context)
    )

    found = await log.cycle("ana", CYCLE_ID)

    assert found is not None
    assert (found.ended_at, found.end_reason, found.actions) == (None, None, ["MemorySearch"])


async def test_a_redelivered_or_republished_event_is_kept_once(log: CycleLog) -> None:
    cycle = Cycle(log)
    original = ChatRecord(id=MESSAGE_ID, chat_history=True, modal="text", role="user", content="x")
    request = ActionRequested(
        step=1, action="Finalize", context=CycleContext(original_message=original)
    )
    event, entry_id = await cycle.publish(Stream.ACTIONS, request)

    # Redelivered: the same entry, the same event.
    assert await log.record(event, Stream.ACTIONS.value, entry_id) is False
    # Republished after a crash: a new envelope (new event id) for the same step.
    again, _ = await cycle.publish(Stream.ACTIONS, request)
    assert again.event_id != event.event_id
    # Announced twice: the end of a cycle.
    await cycle.publish(Stream.CHAT_OUT, CycleEnded(actions=["Finalize"], reason="done"))
    await cycle.publish(Stream.CHAT_OUT, CycleEnded(actions=["Finalize"], reason="done"))

    found = await log.cycle("ana", CYCLE_ID)

    assert found is not None
    assert [e.type for e in found.events] == ["action.requested", "cycle.ended"]
    assert found.events[0].event_id == event.event_id  # the first one is kept


async def test_a_message_posted_again_keeps_its_place_and_takes_the_new_content(
    log: CycleLog,
) -> None:
    cycle = Cycle(log)
    first = cycle.message("1.answer", "Half an ans")
    await cycle.publish(Stream.CHAT_OUT, ChatPosted(message=first))
    await cycle.publish(Stream.CHAT_OUT, CycleEnded(actions=["Finalize"], reason="done"))
    await cycle.publish(Stream.CHAT_OUT, ChatPosted(message=cycle.message("1.answer", "Whole")))

    found = await log.cycle("ana", CYCLE_ID)

    assert found is not None
    assert [e.type for e in found.events] == ["chat.message", "cycle.ended"]
    assert found.events[0].message is not None
    assert found.events[0].message.content == "Whole"


async def test_events_of_no_cycle_and_deltas_are_not_kept(log: CycleLog) -> None:
    cycle = Cycle(log)
    await cycle.publish(Stream.CHAT_OUT, ChatDelta(message_id="m", content="tok"))
    await cycle.publish(
        Stream.CHAT_OUT, ChatPosted(message=cycle.message("x", "no cycle")), cycle_id=None
    )

    assert await log.cycle("ana", CYCLE_ID) is None


async def test_another_users_cycle_is_not_found(log: CycleLog) -> None:
    await Cycle(log, user_id="ana").run()

    assert await log.cycle("bob", CYCLE_ID) is None
    assert await log.cycle("ana", "cyc_unknown") is None


async def test_two_users_with_the_same_cycle_id_do_not_mix(log: CycleLog) -> None:
    await Cycle(log, user_id="ana").run(answer="For Ana")
    await Cycle(log, user_id="bob").run(answer="For Bob")

    for user, answer in (("ana", "For Ana"), ("bob", "For Bob")):
        found = await log.cycle(user, CYCLE_ID)
        assert found is not None
        messages = [e.message.content for e in found.events if e.message is not None]
        assert answer in messages and len(found.events) == 7


async def test_events_of_one_millisecond_keep_the_order_they_were_made_in(
    log: CycleLog,
) -> None:
    cycle = Cycle(log)
    status = cycle.message("1.status", "Thinking...", modal="textForReplace", role="system")
    original = ChatRecord(id=MESSAGE_ID, chat_history=True, modal="text", role="user", content="x")
    request = ActionRequested(
        step=1, action="Finalize", context=CycleContext(original_message=original)
    )
    # Two streams, one broker millisecond: both entries are "<ms>-0".
    await log.record(cycle.envelope(ChatPosted(message=status)), Stream.CHAT_OUT.value, "5-0")
    await log.record(cycle.envelope(request), Stream.ACTIONS.value, "5-0")

    found = await log.cycle("ana", CYCLE_ID)

    assert found is not None
    assert [e.type for e in found.events] == ["chat.message", "action.requested"]


async def test_a_trace_is_bounded(log: CycleLog, monkeypatch: pytest.MonkeyPatch) -> None:
    limit = 5  # MAX_TRACE_EVENTS, made small: the emulated adapter inserts slowly
    monkeypatch.setattr(cycle_log, "MAX_TRACE_EVENTS", limit)
    cycle = Cycle(log)
    for n in range(limit + 1):
        await cycle.publish(Stream.CHAT_OUT, ChatPosted(message=cycle.message(f"m{n}", "x")))
    await cycle.publish(Stream.CHAT_OUT, CycleEnded(actions=["Finalize"], reason="max_steps"))

    found = await log.cycle("ana", CYCLE_ID)

    assert found is not None
    assert found.truncated is True and len(found.events) == limit
    assert found.end_reason == "max_steps"  # read beyond the page


async def test_purge_deletes_only_older_events(log: CycleLog) -> None:
    await Cycle(log).run()
    other = Cycle(log, cycle_id="cyc_later")
    other.tick = 10_000  # ten seconds later
    await other.publish(Stream.CHAT_OUT, CycleEnded(actions=[], reason="done"))

    removed = await log.purge(START + timedelta(seconds=5))

    assert removed == 7
    assert await log.cycle("ana", CYCLE_ID) is None
    assert await log.cycle("ana", "cyc_later") is not None


@pytest.mark.parametrize(
    ("carrier", "expected"),
    [
        ({"traceparent": TRACEPARENT}, TRACE_ID),
        ({"traceparent": TRACEPARENT.upper()}, TRACE_ID),
        ({"traceparent": f"00-{'0' * 32}-00f067aa0ba902b7-01"}, None),
        ({"traceparent": "garbage"}, None),
        ({}, None),
    ],
)
def test_the_trace_id_comes_from_the_traceparent(
    carrier: dict[str, str], expected: str | None
) -> None:
    assert trace_id_of(carrier) == expected


async def test_the_memory_service_purges_expired_traces_when_it_starts(log: CycleLog) -> None:
    await Cycle(log).run()  # made in 2025: long past 30 days
    await log.record(
        Envelope(
            user_id="ana",
            thread_id="t-1",
            cycle_id="cyc_fresh",
            payload=CycleEnded(actions=[], reason="done"),
        ),
        Stream.CHAT_OUT.value,
        "1-0",
    )
    task = asyncio.create_task(purge_forever(log, retention_days=30))
    try:
        async with asyncio.timeout(5):
            while await log.cycle("ana", CYCLE_ID) is not None:
                await asyncio.sleep(0.01)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert await log.cycle("ana", "cyc_fresh") is not None

"""Crash windows too narrow for a kill -9 to hit reliably, opened on purpose: decision's code
on a real Redis, its publisher made to fail at one exact publish (as a process killed, or a
broker lost, right there), then the event delivered again as the reclaimer would."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any, cast

import pytest
from in_process_bus import FINALIZE, scripted_engine
from redis.asyncio import Redis

from memoria_contracts.chat import ChatRecord
from memoria_contracts.events import (
    ActionCompleted,
    ActionOutcome,
    ActionRequested,
    ChatPosted,
    CycleEnded,
    Envelope,
    UserMessageReceived,
)
from memoria_contracts.streams import Stream
from memoria_decision import deadlines
from memoria_runtime import catalog, keys
from memoria_runtime.bus import EventPublisher
from memoria_runtime.partitions import Partitions

PARTITIONS = Partitions()
ONE = PARTITIONS.all[0]  # the embedded default: one partition, keys untagged

pytestmark = pytest.mark.chaos

MESSAGE_ID = "msg_crashwindow1"
LATER_S = 600.0  # "a while later": past any claim on a deadline


class Died(Exception):
    """Stands for the process dying (or the broker going away) at this publish."""


class FailingOnce(EventPublisher):
    """Records what is published; the ``fail_at``-th publish to chat.out raises instead."""

    def __init__(self, fail_at: int | None) -> None:  # no broker: nothing leaves the process
        self.sent: list[tuple[Stream, Envelope]] = []
        self._fail_at = fail_at
        self._chat_out = 0

    async def publish(self, stream: Stream, event: Envelope) -> None:
        self._count(stream)
        self.sent.append((stream, event))

    async def queue(self, pipe: Any, stream: Stream, event: Envelope) -> None:
        """Queued on a pipeline: failing there is the worst case, the commands queued before
        it reaching the broker and the append not (the connection lost mid-pipeline)."""
        try:
            self._count(stream)
        except Died:
            await pipe.execute()
            raise
        self.sent.append((stream, event))

    async def execute(self, pipe: Any, *, raise_on_error: bool = True) -> list[Any]:
        return list(await pipe.execute(raise_on_error=raise_on_error))

    def _count(self, stream: Stream) -> None:
        if stream is Stream.CHAT_OUT:
            self._chat_out += 1
            if self._chat_out == self._fail_at:
                raise Died(f"died at chat.out publish #{self._fail_at}")

    def posted(self) -> list[ChatRecord]:
        return [
            e.payload.message
            for s, e in self.sent
            if s is Stream.CHAT_OUT and isinstance(e.payload, ChatPosted)
        ]


async def deliver(redis: Redis, publisher: EventPublisher) -> None:
    message = UserMessageReceived(message_id=MESSAGE_ID, content="hi there")
    event = Envelope(user_id="ana", thread_id="t1", payload=message)
    await scripted_engine(redis, publisher).on_user_message(event, message, b"framed")


async def test_a_user_message_is_echoed_even_when_decision_died_right_after_starting_its_cycle(
    redis: Redis,
) -> None:
    """The echo of the user's message on chat.out is what shows it on every socket and what
    the memory service stores in the thread's history. Decision saves the new cycle's state
    and publishes the echo in one pipeline: should only the save reach the broker, the
    message must not be lost when the entry is delivered again."""
    await catalog.advertise(redis, "worker-1", [FINALIZE], ttl_s=60)
    first = FailingOnce(fail_at=1)  # the first chat.out publish of the cycle: the echo
    with pytest.raises(Died):
        await deliver(redis, first)

    again = FailingOnce(fail_at=None)  # the reclaimed entry, handled by a new process
    await deliver(redis, again)

    users = [m for m in again.posted() if m.role == "user"]
    assert [(m.id, m.content) for m in users] == [(MESSAGE_ID, "hi there")], (
        "the redelivered message was never echoed: it is missing from every socket and from "
        f"the stored history; published: {[m.id for m in again.posted()]}"
    )
    assert [e.payload.action for s, e in again.sent if isinstance(e.payload, ActionRequested)] == [
        "Finalize"
    ]


class DiesAtCycleEndMark:
    """Redis, except that the process dies when it marks a cycle as ended: before any of
    the commands sent with the mark (in one pipeline) reaches the broker."""

    def __init__(self, redis: Redis) -> None:
        self._redis = redis
        self.armed = True

    def __getattr__(self, name: str) -> Any:
        return getattr(self._redis, name)

    def _die_at(self, key: str) -> None:
        if self.armed and key.endswith(":ended"):
            self.armed = False
            raise Died(f"died marking {key}")

    async def set(self, key: str, *args: Any, **kwargs: Any) -> Any:
        self._die_at(key)
        return await self._redis.set(key, *args, **kwargs)

    def pipeline(self, *args: Any, **kwargs: Any) -> Any:
        return _DyingPipeline(self._redis.pipeline(*args, **kwargs), self)


class _DyingPipeline:
    def __init__(self, pipe: Any, owner: DiesAtCycleEndMark) -> None:
        self._pipe = pipe
        self._owner = owner
        self._keys: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pipe, name)

    async def __aenter__(self) -> _DyingPipeline:
        await self._pipe.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._pipe.__aexit__(*exc)

    def set(self, key: str, *args: Any, **kwargs: Any) -> Any:
        self._keys.append(key)
        return self._pipe.set(key, *args, **kwargs)

    async def execute(self, *args: Any, **kwargs: Any) -> Any:
        for key in self._keys:
            self._owner._die_at(key)
        return await self._pipe.execute(*args, **kwargs)


async def test_a_step_timeout_is_not_lost_when_decision_dies_while_ending_the_cycle(
    redis: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The deadline sweeper takes an overdue step's deadline (ZREM: one replica acts), then
    ends the cycle. Dying in between must not leave the cycle waiting forever on a step that
    never finishes (a hung model): another sweep still times it out."""
    await catalog.advertise(redis, "worker-1", [FINALIZE], ttl_s=60)
    publisher = FailingOnce(fail_at=None)
    await deliver(redis, publisher)  # the cycle asked for step 1, which will never finish
    cycle_id = f"cyc_{MESSAGE_ID.removeprefix('msg_')}"
    await redis.zadd(keys.step_deadlines(ONE), {f"{cycle_id}|1": 0})  # and it is overdue now

    dying = DiesAtCycleEndMark(redis)
    with pytest.raises(Died):
        await scripted_engine(cast(Redis, dying), publisher).sweep_deadlines()

    # Another replica (or the restarted one) sweeps a while later, past any claim a dead
    # sweeper may have held on the deadline.
    later = SimpleNamespace(time=lambda: time.time() + LATER_S)
    monkeypatch.setattr(deadlines, "time", later)
    survivor = FailingOnce(fail_at=None)
    await scripted_engine(redis, survivor).sweep_deadlines()
    ended = [e.payload for _, e in survivor.sent if isinstance(e.payload, CycleEnded)]
    assert [e.reason for e in ended] == ["step_timeout"], (
        "the overdue step's deadline died with the sweeper: the cycle waits for a step that "
        "never finishes, and no other sweep ends it"
    )


async def test_a_final_step_ends_its_cycle_once_when_decision_died_after_recording_it(
    redis: Redis,
) -> None:
    """Decision records a finished step, then ends the cycle when the step ends it (Finalize).
    Dying between the two must not make the redelivered completion decide again: that ran a
    second Finalize, a second answer to one message (found by test_kill_services.py)."""
    await catalog.advertise(redis, "worker-1", [FINALIZE], ttl_s=60)
    publisher = FailingOnce(fail_at=None)
    await deliver(redis, publisher)  # the cycle asked for step 1: Finalize
    requested = [e for s, e in publisher.sent if isinstance(e.payload, ActionRequested)]
    assert len(requested) == 1
    done = ActionCompleted(
        step=1,
        action="Finalize",
        outcome=ActionOutcome(status="ok", ends_cycle=True, summary="answered the user"),
        worker="worker-1",
    )
    completion = requested[0].model_copy(update={"payload": done})

    dying = DiesAtCycleEndMark(redis)  # recorded the step, died marking the cycle ended
    with pytest.raises(Died):
        await scripted_engine(cast(Redis, dying), publisher).on_action_completed(completion, done)

    survivor = FailingOnce(fail_at=None)  # the reclaimed completion, in a new process
    await scripted_engine(redis, survivor).on_action_completed(completion, done)
    asked = [e.payload.action for _, e in survivor.sent if isinstance(e.payload, ActionRequested)]
    ended = [e.payload for _, e in survivor.sent if isinstance(e.payload, CycleEnded)]
    assert asked == [], f"the redelivery decided again after the final step: {asked}"
    assert [(e.reason, e.actions) for e in ended] == [("done", ["Finalize"])]

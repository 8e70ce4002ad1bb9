"""How many times a worker waits for Redis in a step (see ``round_trips``), on a real Redis
with the scripted LLM and memory answered in process (its round trips are the memory
service's): a step's closing message goes with its completion, its memory cards together,
and its stored plan is read with its lease."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis
from round_trips import WritingPublisher, round_trips

from memoria_action_worker.registry import load_actions
from memoria_action_worker.runner import StepRunner
from memoria_contracts.events import (
    ActionCompleted,
    ChatDelta,
    ChatPosted,
)
from memoria_contracts.llm_settings import DEFAULT_LLM_PRICES
from memoria_contracts.memory import MemorySearch
from memoria_contracts.streams import Stream
from memoria_llm.scripted import Script, ScriptedModel, ScriptRule
from memoria_runtime import keys
from memoria_runtime.partitions import Partitions
from memoria_runtime.settings import Settings

from .harness import CYCLE_ID, FakeMemoryService, memory, step_delivery, step_requested
from .plans import SEARCH_PLAN

PARTITIONS = Partitions()
ONE = PARTITIONS.all[0]  # the embedded default: one partition, keys untagged

WORKER_STREAMS = (Stream.CHAT_OUT, Stream.ACTIONS_DONE)
# lease, done mark and plan read together · the answer's one piece · its complete message
# with the step's completion
FINALIZE_ROUND_TRIPS = 3
# lease · 3 status lines · the plan stored · both memory cards · the explanation's piece ·
# its complete message with the step's completion
SEARCH_ROUND_TRIPS = 8


async def ready_worker(
    redis: Redis, redis_url: str, memory_service: FakeMemoryService
) -> tuple[StepRunner, WritingPublisher]:
    """A worker whose connections are open (a first command also says hello): one step of
    another cycle run, and what it sent forgotten."""
    rule = ScriptRule(
        reasoning={"MemorySearch": SEARCH_PLAN},
        chat={"Finalize": "Done.", "MemorySearch": "Found."},
    )
    publisher = WritingPublisher(redis_url, WORKER_STREAMS)
    worker = StepRunner(
        settings=Settings.load(_env_file=None),
        worker="worker-under-test",
        llm_prices=DEFAULT_LLM_PRICES,
        redis=redis,
        publisher=publisher,
        llm=ScriptedModel(Script(rules=[rule])),
        memory=memory_service,
        actions=load_actions().enabled(()),
    )
    warm_up = step_requested("Finalize", 1).model_copy(update={"cycle_id": "cyc_warmup"})
    await worker.on_action_requested(warm_up, step_delivery(1))
    publisher.clear()
    for stream in WORKER_STREAMS:  # emptied, not deleted: a stream's creation is not a step's
        await redis.xtrim(stream.value, maxlen=0, approximate=False)
    return worker, publisher


async def appended(redis: Redis, stream: Stream) -> int:
    return int(await redis.xlen(stream.value))


async def test_a_finalize_step_sends_its_answer_with_its_completion(
    redis: Redis, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker, publisher = await ready_worker(redis, redis_url, FakeMemoryService())

    with round_trips(monkeypatch) as sent:
        await worker.on_action_requested(step_requested("Finalize", 1), step_delivery(1))

    assert sent[0] == FINALIZE_ROUND_TRIPS
    kinds = [(stream, type(e.payload)) for stream, e in publisher.sent]
    # Nothing lost on the way: the piece, the complete message, then the outcome.
    assert kinds == [
        (Stream.CHAT_OUT, ChatDelta),
        (Stream.CHAT_OUT, ChatPosted),
        (Stream.ACTIONS_DONE, ActionCompleted),
    ]
    assert await appended(redis, Stream.CHAT_OUT) == 2
    assert await appended(redis, Stream.ACTIONS_DONE) == 1
    [answer] = publisher.chat()
    assert answer.content == "Done." and answer.id == f"{CYCLE_ID}.1.1"


async def test_a_search_step_posts_its_cards_together_and_reads_its_plan_with_its_lease(
    redis: Redis, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    memories = FakeMemoryService([memory("mem_a", "likes tea"), memory("mem_b", "lives in Rio")])
    worker, publisher = await ready_worker(redis, redis_url, memories)

    with round_trips(monkeypatch) as sent:
        await worker.on_action_requested(step_requested("MemorySearch", 2), step_delivery(2))

    assert sent[0] == SEARCH_ROUND_TRIPS
    posted = publisher.chat()
    assert [m.modal for m in posted] == [
        "textForReplace",
        "textForReplace",
        "textForReplace",
        "memory",
        "memory",
        "text",
    ]
    assert [m.content["memory_id"] for m in posted if m.modal == "memory"] == ["mem_a", "mem_b"]
    assert posted[-1].content == "Found."
    assert await appended(redis, Stream.CHAT_OUT) == len(publisher.on(Stream.CHAT_OUT))
    [done] = publisher.on(Stream.ACTIONS_DONE)
    assert isinstance(done.payload, ActionCompleted) and done.payload.outcome.status == "ok"
    # The plan was stored, so that a re-run looks for the same things.
    assert await redis.get(keys.step_plan(ONE, CYCLE_ID, 2)) is not None


async def test_a_re_run_step_uses_the_plan_read_with_its_lease(
    redis: Redis, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A step run again after a crash (its entry reclaimed) finds the first run's plan in
    the round trip of its lease and asks the model for none."""
    stored = '{"queries": ["where the user lives"], "mode": "semantic"}'
    await redis.set(keys.step_plan(ONE, CYCLE_ID, 3), stored)
    memories = FakeMemoryService([memory("mem_b", "lives in Rio")])
    worker, publisher = await ready_worker(redis, redis_url, memories)

    with round_trips(monkeypatch) as sent:
        await worker.on_action_requested(step_requested("MemorySearch", 3), step_delivery(3))

    # lease · 3 status lines · the card · the explanation's piece · the completion
    assert sent[0] == 7
    [search] = memories.requests(MemorySearch)
    assert search.queries == ["where the user lives"]  # the first run's, not the script's
    assert [m.content["memory_id"] for m in publisher.chat() if m.modal == "memory"] == ["mem_b"]


async def test_a_step_of_an_ended_cycle_is_not_run_and_its_records_expire_with_the_cycle(
    redis: Redis, redis_url: str
) -> None:
    """A request redelivered after its cycle ended (a step timeout, say) runs nothing and
    says nothing; a step that runs keeps its completion only while its cycle may still run
    or its request come again."""
    worker, publisher = await ready_worker(redis, redis_url, FakeMemoryService())
    await redis.set(keys.cycle_ended(ONE, CYCLE_ID), "step_timeout")
    await worker.on_action_requested(step_requested("Finalize", 1), step_delivery(1))
    assert publisher.sent == []

    await redis.delete(keys.cycle_ended(ONE, CYCLE_ID))
    await worker.on_action_requested(step_requested("MemorySearch", 2), step_delivery(2))
    settings = Settings.load(_env_file=None)
    kept_for = (
        settings.cycle.cycle_max_steps * settings.cycle.step_timeout_seconds
        + 60
        + keys.REDELIVERY_SLACK_S
    )
    for key in (keys.step_done(ONE, CYCLE_ID, 2), keys.step_plan(ONE, CYCLE_ID, 2)):
        assert 0 < await redis.ttl(key) <= kept_for

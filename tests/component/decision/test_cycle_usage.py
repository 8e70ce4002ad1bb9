"""Decision counts its own LLM calls, adds what the steps report, and announces the cycle's
usage and cost when it ends; on a real Redis, with the scripted provider."""

from __future__ import annotations

import pytest
from in_process_bus import FINALIZE, RecordingPublisher, scripted_engine
from redis.asyncio import Redis

from memoria_contracts.events import (
    ActionCompleted,
    ActionOutcome,
    ActionRequested,
    CycleEnded,
    Envelope,
    UserMessageReceived,
)
from memoria_contracts.streams import Stream
from memoria_decision import SERVICE_NAME
from memoria_decision.core.state import CycleState
from memoria_decision.executor import CycleExecutor
from memoria_llm.scripted import ScriptRule
from memoria_runtime import catalog, metrics
from memoria_runtime.envelopes import follow
from memoria_runtime.partitions import Partitions
from memoria_runtime.settings import Settings

PARTITIONS = Partitions()
ONE = PARTITIONS.all[0]  # the embedded default: one partition, keys untagged

SCRIPTED_PRICE = (1000.0, 2000.0)  # USD per million words: visible costs for tiny prompts
WORKER_MODEL = "gemini-2.5-flash"
MESSAGE_ID = "msg_usage1"


def engine_for(
    redis: Redis, publisher: RecordingPublisher, decide: list[str | list[str]] | None = None
) -> CycleExecutor:
    return scripted_engine(
        redis,
        publisher,
        rules=[ScriptRule(decide=decide or ["Finalize"])],
        # A test without workers here is about usage, not about waiting for them.
        settings=Settings.load(
            _env_file=None, llm_prices={"scripted": SCRIPTED_PRICE}, no_workers_wait_seconds=0
        ),
    )


def cycles_ended(reason: str) -> float:
    value = metrics.REGISTRY.get_sample_value(metrics.CYCLES_TOTAL, {metrics.LABEL_REASON: reason})
    return value or 0.0


def decision_tokens(direction: str) -> float:
    labels = {
        metrics.LABEL_MODEL: "scripted",
        metrics.LABEL_DIRECTION: direction,
        metrics.LABEL_SERVICE: SERVICE_NAME,
    }
    return metrics.REGISTRY.get_sample_value(metrics.LLM_TOKENS_TOTAL, labels) or 0.0


async def start_cycle(engine: CycleExecutor) -> None:
    message = UserMessageReceived(message_id=MESSAGE_ID, content="hi there")
    event = Envelope(user_id="ana", thread_id="t1", payload=message)
    await engine.on_user_message(event, message, b"framed")


async def test_the_cycle_end_carries_decisions_and_steps_usage(redis: Redis) -> None:
    await catalog.advertise(redis, "worker-1", [FINALIZE], ttl_s=60)
    publisher = RecordingPublisher()
    engine = engine_for(redis, publisher)
    cycles_before = cycles_ended("done")
    output_before = decision_tokens(metrics.OUTPUT)

    await start_cycle(engine)
    (request,) = publisher.on(Stream.ACTIONS)
    assert isinstance(request.payload, ActionRequested)
    assert request.cycle_id is not None
    # The worker's step reports what it spent with its completion.
    outcome = ActionOutcome(status="ok", ends_cycle=True, summary="answered the user")
    done = ActionCompleted(
        step=1,
        action="Finalize",
        outcome=outcome,
        worker="worker-1",
        tokens={WORKER_MODEL: (2000, 400)},
    )
    completed = follow(request, done)
    assert isinstance(completed.payload, ActionCompleted)
    await engine.on_action_completed(completed, completed.payload)

    ended = publisher.on(Stream.CHAT_OUT)[-1].payload
    assert isinstance(ended, CycleEnded)
    assert ended.usage is not None
    decided = ended.usage.by_model["scripted"]
    assert decided.output_tokens == 1  # "Finalize": one word
    assert decided.input_tokens > 0  # the decision prompt's words
    assert decided.cost_usd == pytest.approx(
        (decided.input_tokens * SCRIPTED_PRICE[0] + SCRIPTED_PRICE[1]) / 1e6
    )
    worked = ended.usage.by_model[WORKER_MODEL]
    assert (worked.input_tokens, worked.output_tokens) == (2000, 400)
    assert worked.cost_usd == pytest.approx((2000 * 0.30 + 400 * 2.50) / 1e6)  # default prices
    assert ended.usage.input_tokens == decided.input_tokens + 2000
    assert ended.usage.output_tokens == 1 + 400
    assert ended.usage.cost_usd == pytest.approx(decided.cost_usd + worked.cost_usd)

    assert cycles_ended("done") - cycles_before == 1
    assert decision_tokens(metrics.OUTPUT) - output_before == 1


async def test_re_asks_of_the_decision_are_counted(redis: Redis) -> None:
    await catalog.advertise(redis, "worker-1", [FINALIZE], ttl_s=60)
    publisher = RecordingPublisher()
    engine = engine_for(redis, publisher, decide=[["Bogus thing", "Finalize"]])

    await start_cycle(engine)
    (request,) = publisher.on(Stream.ACTIONS)
    assert request.cycle_id is not None
    state = await engine.store.load(ONE, request.cycle_id)
    assert isinstance(state, CycleState)
    assert state.tokens["scripted"][1] == 2 + 1  # "Bogus thing", then "Finalize"


async def test_a_cycle_without_llm_calls_announces_no_usage(redis: Redis) -> None:
    publisher = RecordingPublisher()  # and no worker advertises anything
    engine = engine_for(redis, publisher)
    cycles_before = cycles_ended("no_workers")

    await start_cycle(engine)

    ended = publisher.on(Stream.CHAT_OUT)[-1].payload
    assert isinstance(ended, CycleEnded)
    assert (ended.reason, ended.usage) == ("no_workers", None)
    assert cycles_ended("no_workers") - cycles_before == 1

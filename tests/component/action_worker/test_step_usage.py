"""The worker reports the tokens of each step's LLM calls with its completion, a failed step's
too."""

from __future__ import annotations

from redis.asyncio import Redis

from memoria_action_worker import SERVICE_NAME
from memoria_action_worker.context import ActionContext
from memoria_action_worker.registry import RegisteredAction
from memoria_action_worker.runner import StepRunner
from memoria_contracts.events import (
    ActionCompleted,
    ActionOutcome,
    ActionRequested,
    ActionSpec,
    Envelope,
)
from memoria_contracts.llm_settings import DEFAULT_LLM_PRICES
from memoria_contracts.streams import Stream
from memoria_llm.port import LLMRequest, Prompt, PromptMessage
from memoria_llm.scripted import Script, ScriptedModel, ScriptRule
from memoria_runtime import metrics
from memoria_runtime.partitions import Partitions
from memoria_runtime.settings import Settings

from .harness import (
    FakeMemoryService,
    RecordingPublisher,
    step_delivery,
    step_requested,
)

PARTITIONS = Partitions()
ONE = PARTITIONS.all[0]  # the embedded default: one partition, keys untagged

ANSWER = "Hello there, friend!"
PROMPT = Prompt(system="Be brief.", messages=[PromptMessage("user", "hi there")])  # 4 words in
# The scripted model streams through pydantic-ai's FunctionModel, which counts a streamed
# prompt as 50 and the answer's pieces by words and punctuation: "Hello", "there", ",", "friend!".
STREAMED_IN, STREAMED_OUT = 50, 4


class Plan(ActionOutcome):
    """Any schema will do: the scripted reasoning output is validated into it."""


def request_for(ctx: ActionContext, task: str) -> LLMRequest:
    return LLMRequest(task=task, prompt=PROMPT, input_json=ctx.cycle.model_dump_json())


async def chatty(ctx: ActionContext) -> ActionOutcome:
    await ctx.chat.stream(
        ctx.llm.chat(request_for(ctx, "Chatty")), chat_history=False, role="assistant", model="x"
    )
    return ActionOutcome(status="ok", ends_cycle=True, summary="answered")


async def broken(ctx: ActionContext) -> ActionOutcome:
    await ctx.llm.reasoning(request_for(ctx, "Broken"), Plan)
    raise RuntimeError("a bug after the model answered")


ACTIONS = {
    "Chatty": RegisteredAction(ActionSpec(name="Chatty", description="-", ends_cycle=True), chatty),
    "Broken": RegisteredAction(ActionSpec(name="Broken", description="-", ends_cycle=True), broken),
}
SCRIPT = Script(
    rules=[
        ScriptRule(
            chat={"Chatty": ANSWER},
            reasoning={"Broken": {"status": "ok", "ends_cycle": True, "summary": "planned"}},
        )
    ]
)


def runner(redis: Redis, publisher: RecordingPublisher) -> StepRunner:
    return StepRunner(
        settings=Settings.load(_env_file=None),
        worker="worker-under-test",
        llm_prices=DEFAULT_LLM_PRICES,
        redis=redis,
        publisher=publisher,
        llm=ScriptedModel(SCRIPT),
        memory=FakeMemoryService(),
        actions=ACTIONS,
    )


def scripted_output_tokens() -> float:
    labels = {
        metrics.LABEL_MODEL: "scripted",
        metrics.LABEL_DIRECTION: metrics.OUTPUT,
        metrics.LABEL_SERVICE: SERVICE_NAME,
    }
    return metrics.REGISTRY.get_sample_value(metrics.LLM_TOKENS_TOTAL, labels) or 0.0


async def test_a_steps_streamed_answer_is_added_to_its_cycle(redis: Redis) -> None:
    publisher = RecordingPublisher()
    before = scripted_output_tokens()

    await runner(redis, publisher).on_action_requested(
        step_requested("Chatty", 1), step_delivery(1)
    )

    assert scripted_output_tokens() - before == STREAMED_OUT
    (done,) = [e for stream, e in publisher.sent if stream is Stream.ACTIONS_DONE]
    assert isinstance(done.payload, ActionCompleted)
    assert done.payload.outcome.status == "ok"
    assert done.payload.tokens == {"scripted": (STREAMED_IN, STREAMED_OUT)}


async def test_a_failed_step_still_counts_what_it_spent(redis: Redis) -> None:
    publisher = RecordingPublisher()
    worker = runner(redis, publisher)

    await worker.on_action_requested(step_requested("Chatty", 1), step_delivery(1))
    await worker.on_action_requested(step_requested("Broken", 2), step_delivery(2))

    chatty_done, broken_done = [e for s, e in publisher.sent if s is Stream.ACTIONS_DONE]
    assert isinstance(chatty_done.payload, ActionCompleted)
    assert chatty_done.payload.tokens == {"scripted": (STREAMED_IN, STREAMED_OUT)}
    assert isinstance(broken_done.payload, ActionCompleted)
    assert broken_done.payload.outcome.status == "failed"
    # The failed step's plan: 4 words in, 6 "words" of JSON out.
    assert broken_done.payload.tokens == {"scripted": (4, 6)}


def in_portuguese(envelope: Envelope) -> Envelope:
    request = envelope.payload
    assert isinstance(request, ActionRequested)
    context = request.context.model_copy(update={"language": "pt"})
    return envelope.model_copy(update={"payload": request.model_copy(update={"context": context})})


async def test_a_steps_error_is_in_the_conversations_language(redis: Redis) -> None:
    """Decision shows a cycle-ending step's error to the user ("O passo 'X' falhou: ...")."""
    publisher = RecordingPublisher()
    worker = runner(redis, publisher)

    await worker.on_action_requested(in_portuguese(step_requested("Broken", 1)), step_delivery(1))
    await worker.on_action_requested(in_portuguese(step_requested("Absent", 2)), step_delivery(2))

    broken, absent = [e.payload for s, e in publisher.sent if s is Stream.ACTIONS_DONE]
    assert isinstance(broken, ActionCompleted) and isinstance(absent, ActionCompleted)
    assert broken.outcome.error == "erro interno (RuntimeError)"
    assert absent.outcome.error == "este worker não oferece esse passo"

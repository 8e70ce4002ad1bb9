"""Actions use the thread's session config sent with the step: memory limits and type
descriptions in MemorySearch, the system prompt and chat model in the answering steps."""

from __future__ import annotations

import dataclasses

from memoria_action_worker.actions.finalize import finalize
from memoria_action_worker.actions.question import question
from memoria_action_worker.context import ActionContext
from memoria_contracts.memory import MemorySearch
from memoria_contracts.personas import ActivePersona, PersonaReset
from memoria_contracts.session import SessionConfig
from memoria_runtime.personas import load_personas
from memoria_runtime.session_defaults import session_defaults

from .harness import THREAD_ID, Harness, memory
from .plans import ACTIONS, SEARCH_PLAN

PIRATE = "Always answer like a pirate."


def with_session(ctx: ActionContext, session: SessionConfig) -> ActionContext:
    context = ctx.request.context.model_copy(update={"session": session})
    request = ctx.request.model_copy(update={"context": context})
    return dataclasses.replace(ctx, request=request)


def a_session(harness: Harness) -> SessionConfig:
    defaults = session_defaults(harness.settings, THREAD_ID)
    descriptions = {**defaults.memory_type_descriptions, "constraint": "Things never to do."}
    return defaults.model_copy(
        update={
            "memory_limit": 3,
            "memory_min_relevance": 0.2,
            "system_prompt": PIRATE,
            "chat_model": "pirate-model-1",
            "memory_type_descriptions": descriptions,
        }
    )


async def test_memory_search_uses_the_sessions_limits_and_descriptions(harness: Harness) -> None:
    harness.memory.memories["mem_nuts1"] = memory("mem_nuts1", "Is allergic to peanuts")
    ctx, llm = harness.context("MemorySearch", SEARCH_PLAN, message="what can't I eat?")
    ctx = with_session(ctx, a_session(harness))

    outcome = await ACTIONS["MemorySearch"](ctx)

    assert outcome.status == "ok"
    [search] = harness.memory.requests(MemorySearch)
    assert (search.limit, search.min_relevance) == (3, 0.2)
    # Between the two, the model is asked to rerank what was found (no answer scripted here).
    plan_request, rerank_request, explain_request = llm.requests
    assert rerank_request.task == "MemoryRerank"
    assert "Things never to do." in plan_request.prompt.messages[-1].content
    identity = "You are Memoria, an assistant with long-term memory."  # the persona
    assert explain_request.prompt.system.startswith(f"{identity}\n\n{PIRATE}")
    assert explain_request.model == "pirate-model-1"


async def test_finalize_answers_with_the_system_prompt_and_chat_model(harness: Harness) -> None:
    ctx, llm = harness.context("Finalize", {}, chat="Arr, done.")
    ctx = with_session(ctx, a_session(harness))

    outcome = await finalize(ctx)

    assert outcome.status == "ok" and outcome.ends_cycle
    [request] = llm.requests
    # The persona's identity comes first, then the thread's system prompt.
    identity = "You are Memoria, an assistant with long-term memory."
    assert request.prompt.system.startswith(identity)
    assert request.prompt.system.removeprefix(identity).lstrip().startswith(PIRATE)
    assert request.model == "pirate-model-1"


async def test_without_a_session_the_settings_apply(harness: Harness) -> None:
    ctx, llm = harness.context("Question", {}, chat="Which city?")
    assert ctx.session == session_defaults(harness.settings, THREAD_ID)

    await question(ctx)

    [request] = llm.requests
    identity = "You are Memoria, an assistant with long-term memory."
    rest = request.prompt.system.removeprefix(identity).lstrip()
    assert rest.startswith(harness.settings.cycle.system_prompt)
    assert request.model is None


async def test_answers_speak_as_the_cycles_persona_and_reset_after_a_switch(
    harness: Harness,
) -> None:
    """Personas: the persona decision sends is the identity of Finalize (and the other answers),
    worded for the thread's chat model; in the cycle after a switch, the hard reset."""
    tutor = load_personas(harness.settings.cycle).get("tutor")
    assert tutor is not None
    reset = PersonaReset(seq=1, previous_id="memoria", previous_name="Memoria", turn=0)
    for persona, expected in (
        (ActivePersona(persona=tutor, reset=reset), "<system_reset>"),
        (ActivePersona(persona=tutor), '<identity name="Ada the Tutor">'),
    ):
        ctx, llm = harness.context("Finalize", {}, chat="Hello.")
        session = a_session(harness).model_copy(update={"chat_model": "claude-sonnet-4-5"})
        ctx = with_session(ctx, session)
        context = ctx.request.context.model_copy(update={"persona": persona})
        ctx = dataclasses.replace(ctx, request=ctx.request.model_copy(update={"context": context}))
        await finalize(ctx)
        [request] = llm.requests
        assert request.prompt.system.startswith(expected)
        assert "You are Ada, a patient tutor." in request.prompt.system
        assert PIRATE in request.prompt.system  # the thread's system prompt still applies
        assert "You are Memoria" not in request.prompt.system

"""Prompt pieces shared by actions."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from memoria_contracts.events import CycleContext, Language
from memoria_contracts.session import SessionConfig
from memoria_llm.conversation import conversation, summary_text
from memoria_llm.persona_prompt import with_persona
from memoria_llm.port import LLMRequest, Prompt, PromptMessage

if TYPE_CHECKING:
    from memoria_action_worker.context import ActionContext
    from memoria_contracts.chat import ChatRecord

LANGUAGE_NAMES: dict[Language, str] = {"en": "English", "pt": "Brazilian Portuguese"}


def steps_summary(context: CycleContext) -> str:
    if not context.steps:
        return "(no steps yet)"
    return "\n".join(f"{s.step}. {s.action} ({s.status}): {s.summary}" for s in context.steps)


def chat_prompt(system: str, context: CycleContext, ask: str) -> Prompt:
    """The summary of the thread's older part, the conversation so far (earlier cycles and
    this one), then the action's ask."""
    summary = summary_text(context.history_summary)  # bounded by decision
    if summary:
        system = f"{system}\n\n{summary}"
    messages = conversation([*context.history, *context.transcript])
    if messages and messages[-1].role == "user":
        last = messages.pop()
        ask = f"{last.content}\n\n{ask}"
    messages.append(PromptMessage(role="user", content=ask))
    return Prompt(system=system, messages=messages)


def with_system_prompt(system: str, session: SessionConfig) -> str:
    """An answering step's instructions under the thread's system prompt: the system
    prompt says who the assistant is and how it behaves, the step what to write now."""
    return f"{session.system_prompt}\n\n{system}"


def agent_request(
    ctx: ActionContext,
    task: str,
    system: str,
    ask: str,
    metadata: dict[str, str] | None = None,
) -> LLMRequest:
    """A chat request of a step that speaks as the assistant (Finalize, Question, the memory
    actions' explanations): the
    persona's identity — or, in the cycles right after a switch, its hard reset — worded for
    the model that answers, then the thread's system prompt, then the step's
    ``system``. The model is the thread's ``chat_model`` when it sets one (the provider
    answers with it), else the provider's own."""
    prompt = chat_prompt(with_system_prompt(system, ctx.session), ctx.cycle, ask)
    request = LLMRequest(
        task=task,
        prompt=prompt,
        input_json=ctx.cycle.model_dump_json(),
        metadata=metadata or {},
        model=ctx.session.chat_model,
    )
    model = request.model or ctx.llm.chat_model(request)
    spoken = with_persona(prompt, ctx.persona, model=model, provider=ctx.llm.name)
    return replace(request, prompt=spoken)


async def spoken(
    ctx: ActionContext, request: LLMRequest, *, chat_history: bool
) -> ChatRecord | None:
    """Stream the model's answer to ``request`` as the assistant's closing message (kept back
    until the step ends)."""
    return await ctx.chat.stream(
        ctx.llm.chat(request),
        chat_history=chat_history,
        role="assistant",
        model=ctx.llm.chat_model(request),
        closing=True,
    )


async def closing_reply(
    ctx: ActionContext, task: str, system: str, ask: str, *, chat_history: bool
) -> ChatRecord | None:
    """The turn's last word (Finalize, Question): ``system`` worded for the user's language
    (its ``{language}``), then the cycle's steps and ``ask``."""
    request = agent_request(
        ctx,
        task,
        system.format(language=LANGUAGE_NAMES[ctx.language]),
        f"Steps taken in this cycle:\n{steps_summary(ctx.cycle)}\n\n{ask}",
    )
    return await spoken(ctx, request, chat_history=chat_history)

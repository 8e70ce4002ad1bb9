"""Prompt pieces shared by actions."""

from __future__ import annotations

from memoria_contracts.events import CycleContext, Language
from memoria_contracts.session import SessionConfig
from memoria_llm.conversation import conversation, summary_text
from memoria_llm.port import Prompt, PromptMessage

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
    """An answering step's instructions under the thread's system prompt (R-5): the system
    prompt says who the assistant is and how it behaves, the step what to write now."""
    return f"{session.system_prompt}\n\n{system}"

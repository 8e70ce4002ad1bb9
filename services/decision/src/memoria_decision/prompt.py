"""The reasoningHeavy prompt: pick the next action's name and nothing else."""

from __future__ import annotations

from collections.abc import Sequence

from memoria_contracts.events import ActionSpec, PendingQuestion, StepRecord
from memoria_contracts.memory import MEMORY_TYPES
from memoria_contracts.session import SessionConfig
from memoria_decision.core.state import CycleState
from memoria_llm.conversation import conversation, summary_text
from memoria_llm.persona_prompt import with_persona
from memoria_llm.port import Prompt, PromptMessage

SYSTEM = (
    "This step decides what the assistant does next; it does not write to the user. "
    "You see the conversation, the user's original message, the actions already taken in "
    "this cycle and the actions available. Choose the ONE next action that moves toward what "
    "the user asked for. Reply with the action's exact name only: no punctuation, no "
    "explanation. Other steps will work out the details."
)


def _steps(steps: Sequence[StepRecord]) -> str:
    if not steps:
        return "(none yet)"
    return "\n".join(f"{s.step}. {s.action} ({s.status}): {s.summary}" for s in steps)


def _actions(catalog: Sequence[ActionSpec]) -> str:
    return "\n".join(f"- {spec.name}: {spec.description}" for spec in catalog)


def decision_prompt(
    state: CycleState,
    catalog: Sequence[ActionSpec],
    rejected: Sequence[str] = (),
    *,
    model: str = "",
    provider: str = "",
) -> Prompt:
    """``model`` (and ``provider``) pick how the persona's identity is worded: the
    model that reads the prompt."""
    names = ", ".join(spec.name for spec in catalog)
    ask = (
        f"Original message from the user:\n<<<\n{state.original.content}\n>>>\n\n"
        f"Actions already taken in this cycle:\n{_steps(state.steps)}\n\n"
        f"Available actions (name: when to use):\n{_actions(catalog)}\n\n"
    )
    if state.route is not None and state.route.question is not None:
        ask += _question_note(state.route.question)
    if rejected:
        ask += f"Your previous answer {', '.join(map(repr, rejected))} is not an action name.\n"
    ask += f"Reply with exactly one of: {names}"
    messages = [*conversation([*state.history, *state.transcript])]
    messages.append(PromptMessage(role="user", content=ask))
    system = SYSTEM + session_instructions(state.session)
    summary = summary_text(state.history_summary)  # bounded when the cycle started
    if summary:
        system = f"{system}\n\n{summary}"
    prompt = Prompt(system=system, messages=_alternate(messages))
    # The identity (or the reset) in the system text only: the ask wants an action name.
    return with_persona(prompt, state.persona, model=model, provider=provider, user_turn=False)


def _question_note(question: PendingQuestion) -> str:
    """The question the assistant ended the last cycle with, and whether this message
    answers it (the runtime's reading): a reply that does not is a new message."""
    said = "answers it" if question.answered else "does not answer it: treat it as a new message"
    return (
        f"The assistant last asked the user:\n<<<\n{question.assistant_question}\n>>>\n"
        f"By the runtime's reading, the user's message {said}.\n\n"
    )


def session_instructions(session: SessionConfig | None) -> str:
    """What the decision prompt adds to its system text: the thread's system prompt and the
    memory types with their descriptions; nothing without a session."""
    if session is None:
        return ""
    types = "\n".join(
        f"- {name}: {session.memory_type_descriptions[name]}" for name in MEMORY_TYPES
    )
    recall_note = (
        "\n\nMemories marked [memory found] right after the user's message were retrieved "
        "for it before this decision; do not search for them again."
        if session.proactive_retrieval
        else ""
    )
    return (
        f"\n\nInstructions for this conversation (the assistant's system prompt):\n<<<\n"
        f"{session.system_prompt}\n>>>\n\nMemory types:\n{types}{recall_note}"
    )


def _alternate(messages: list[PromptMessage]) -> list[PromptMessage]:
    """The ask is a user turn; merge it into a trailing user turn so roles still alternate."""
    merged: list[PromptMessage] = []
    for message in messages:
        if merged and merged[-1].role == message.role and merged[-1].plain and message.plain:
            merged[-1] = PromptMessage(
                role=message.role, content=f"{merged[-1].content}\n\n{message.content}"
            )
        else:
            merged.append(message)
    return merged

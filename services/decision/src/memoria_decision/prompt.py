"""The reasoningHeavy prompt: pick the next action's name and nothing else."""

from __future__ import annotations

from collections.abc import Sequence

from memoria_contracts.events import ActionSpec, StepRecord
from memoria_decision.session import session_instructions
from memoria_decision.state import CycleState
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

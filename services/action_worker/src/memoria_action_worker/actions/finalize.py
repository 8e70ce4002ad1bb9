"""Finalize: nothing else is valid; stream a short summary and end the cycle."""

from __future__ import annotations

from memoria_action_worker.context import ActionContext
from memoria_action_worker.prompts import LANGUAGE_NAMES, agent_request, steps_summary
from memoria_action_worker.registry import action
from memoria_contracts.events import ActionOutcome

WHEN_TO_USE = (
    "After reviewing the whole history (the original message, answers, questions and actions "
    "taken), none of the other available actions is valid: reply to the user and end."
)

SYSTEM = (
    "Write the final reply of this turn "
    "in {language}: briefly say what was done for the user in this cycle, or answer directly "
    "when nothing needed doing. Two or three short sentences. Never invent facts or memories."
)


@action("Finalize", when_to_use=WHEN_TO_USE, ends_cycle=True)
async def finalize(ctx: ActionContext) -> ActionOutcome:
    request = agent_request(
        ctx,
        "Finalize",
        SYSTEM.format(language=LANGUAGE_NAMES[ctx.language]),
        f"Steps taken in this cycle:\n{steps_summary(ctx.cycle)}\n\nWrite the reply now.",
    )
    # The closing summary is not part of the chat history (chat-history: false).
    await ctx.chat.stream(
        ctx.llm.chat(request),
        chat_history=False,
        role="assistant",
        model=ctx.llm.chat_model(request),
        closing=True,
    )
    return ActionOutcome(status="ok", ends_cycle=True, summary="replied to the user")

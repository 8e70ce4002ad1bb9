"""Finalize: nothing else is valid; stream a short summary and end the cycle."""

from __future__ import annotations

from memoria_action_worker.context import ActionContext
from memoria_action_worker.prompts import closing_reply
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
    # The closing summary is not part of the chat history (chat-history: false).
    await closing_reply(ctx, "Finalize", SYSTEM, "Write the reply now.", chat_history=False)
    return ActionOutcome(status="ok", ends_cycle=True, summary="replied to the user")

"""Question: information is missing and memory did not have it; ask, end the cycle."""

from __future__ import annotations

from memoria_action_worker.context import ActionContext
from memoria_action_worker.prompts import closing_reply
from memoria_action_worker.registry import action
from memoria_contracts.events import ActionOutcome

WHEN_TO_USE = (
    "After reviewing the whole history, and after trying to find the information in memory "
    "(or with a tool) without success, the best choice is to ask the user for what is missing."
)

SYSTEM = (
    "Something the user asked for needs "
    "information you do not have and could not find in memory. Ask ONE short, specific "
    "question in {language} to get it. Only the question."
)


@action("Question", when_to_use=WHEN_TO_USE, ends_cycle=True)
async def question(ctx: ActionContext) -> ActionOutcome:
    record = await closing_reply(
        ctx, "Question", SYSTEM, "Ask your question now.", chat_history=True
    )
    return ActionOutcome(
        status="ok",
        ends_cycle=True,
        summary="asked the user a question",
        messages=[record] if record else [],
    )

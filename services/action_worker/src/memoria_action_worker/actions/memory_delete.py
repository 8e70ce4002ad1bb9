"""MemoryDelete: delete the memories the user explicitly asks to forget."""

from __future__ import annotations

from typing import Annotated, Any, Final

from pydantic import BaseModel, Field, StringConstraints, model_validator

from memoria_action_worker.context import ActionContext
from memoria_action_worker.memory_steps import (
    MemoryCalls,
    Tally,
    bare_list_as,
    describe,
    explain,
    guarded,
    make_plan,
    memories_block,
    memories_in,
    status,
    succeeded,
)
from memoria_action_worker.prompts import chat_prompt
from memoria_action_worker.registry import action
from memoria_contracts.events import ActionOutcome
from memoria_contracts.memory import MemoryDeleted
from memoria_llm.port import Prompt

TASK: Final = "MemoryDelete"
MAX_DELETES: Final = 50  # "forget everything about my trip" may cover many memories

# When to use it, written out in full (not "as for Finalize"): Finalize may be disabled.
WHEN_TO_USE = (
    "After reviewing the whole history (the original message, answers, questions and actions "
    "taken), it is explicitly clear that the user is asking to delete some memory."
)

PLAN_SYSTEM = (
    "You delete long-term memories of Memoria, an assistant. From the conversation, list the "
    "ids of the memories loaded earlier that the user explicitly asked to delete or forget, "
    "and nothing else: when in doubt, leave a memory out. Only use ids from the list. At most "
    '{max_deletes}. Answer with JSON only: {{"memory_ids": ["mem_..."]}}'
)

EXPLAIN_SYSTEM = (
    "In {language}, tell the user in one "
    "or two short sentences what you just deleted from memory, and what could not be found. "
    "Use only the results given; never invent memories."
)

PlannedId = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]


class DeletePlan(BaseModel):
    memory_ids: list[PlannedId] = Field(min_length=1, max_length=MAX_DELETES)

    @model_validator(mode="before")
    @classmethod
    def _seed_shape(cls, data: Any) -> Any:
        return bare_list_as(data, "memory_ids")  # a model may answer with a bare list of ids


def _plan_prompt(ctx: ActionContext) -> Prompt:
    loaded = memories_in([*ctx.cycle.history, *ctx.cycle.transcript])
    system = PLAN_SYSTEM.format(max_deletes=MAX_DELETES)
    ask = f"Memories loaded earlier:\n{memories_block(loaded)}\n\nList the ids to delete now."
    return chat_prompt(system, ctx.cycle, ask)


async def _delete(ctx: ActionContext) -> ActionOutcome:
    await status(ctx, "memory_delete_started")
    # ctx.plan: a re-run of the step deletes the same ids (already gone ones show as not found).
    plan = await make_plan(
        ctx,
        task=TASK,
        schema=DeletePlan,
        prompt=_plan_prompt(ctx),
        invalid_notice="memory_delete_invalid_plan",
    )
    calls = MemoryCalls(ctx)
    await status(ctx, "memory_delete_deleting")
    tally: Tally[MemoryDeleted] = Tally(
        "deleted", lambda d: describe(d.memory_id, d.deleted_content)
    )
    for memory_id in dict.fromkeys(plan.memory_ids):  # deleting twice would report "not found"
        await tally.add(memory_id, calls.delete(memory_id))
    results = {
        "deleted": [
            {"memory_id": d.memory_id, "deleted_content": d.deleted_content} for d in tally.done
        ],
        "not_found": tally.not_found,
        "not_deleted": tally.refused,
    }
    explanation = await explain(
        ctx,
        task=TASK,
        system=EXPLAIN_SYSTEM,
        ask="Explain what you just deleted.",
        results=results,
    )
    arguments = {"memory_ids": list(dict.fromkeys(plan.memory_ids))}
    return succeeded(tally.summary(), [explanation], arguments)


@action("MemoryDelete", when_to_use=WHEN_TO_USE, ends_cycle=False)
async def memory_delete(ctx: ActionContext) -> ActionOutcome:
    return await guarded(ctx, "MemoryDelete", _delete)

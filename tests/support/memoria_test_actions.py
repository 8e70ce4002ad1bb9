"""Actions that exist only in tests (loaded with MEMORIA_ACTION_MODULES), to drive cycles
through more steps than the built-in Finalize and Question allow."""

from __future__ import annotations

import asyncio

from memoria_action_worker.context import ActionContext
from memoria_action_worker.registry import action
from memoria_contracts.events import ActionOutcome

SLOW_STEP_S = 1.5
STALL_S = 3600.0


@action("Ponder", when_to_use="Think once more (test action; does not end the cycle).")
async def ponder(ctx: ActionContext) -> ActionOutcome:
    await ctx.chat.status("Pondering...")
    return ActionOutcome(status="ok", ends_cycle=False, summary="pondered")


@action("Slow", when_to_use="Take a while (test action; does not end the cycle).")
async def slow(ctx: ActionContext) -> ActionOutcome:
    await asyncio.sleep(SLOW_STEP_S)
    return ActionOutcome(status="ok", ends_cycle=False, summary="took a while")


@action("Stall", when_to_use="Never finish in time (test action).")
async def stall(ctx: ActionContext) -> ActionOutcome:
    await asyncio.sleep(STALL_S)
    return ActionOutcome(status="ok", ends_cycle=False, summary="stalled")


@action("Explode", when_to_use="Raise an error (test action).")
async def explode(ctx: ActionContext) -> ActionOutcome:
    raise ValueError("boom")

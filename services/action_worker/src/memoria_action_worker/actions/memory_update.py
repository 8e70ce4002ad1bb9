"""MemoryUpdate: give memories loaded earlier their new content (the memory service
re-embeds the bindings when they change)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

from pydantic import AliasChoices, BaseModel, Field, model_validator

from memoria_action_worker.context import ActionContext
from memoria_action_worker.memory_steps import (
    Content,
    MemoryCalls,
    Tally,
    bare_list_as,
    check_content,
    explain,
    guarded,
    kind_of,
    language_name,
    listing,
    make_plan,
    memories_block,
    memories_in,
    memory_types_block,
    short,
    status,
    succeeded,
)
from memoria_action_worker.prompts import chat_prompt
from memoria_action_worker.registry import action
from memoria_contracts.chat import CardInfo
from memoria_contracts.events import ActionOutcome, ChoiceCandidate, UpdateChoice
from memoria_contracts.memory import (
    MAX_BINDINGS,
    Binding,
    MemoryType,
    MemoryUpdate,
    MemoryUpdated,
)
from memoria_llm.port import Prompt
from memoria_text.relative_dates import resolve_in_bindings, resolve_in_content, said_on

TASK: Final = "MemoryUpdate"
MAX_UPDATES: Final = 10  # a correction touches a few memories; more is likely a runaway plan
MAX_CANDIDATES: Final = 5  # the user picks one by number: a short list

# When to use it, written out in full (not "as for Finalize"): Finalize may be disabled.
WHEN_TO_USE = (
    "After reviewing the whole history (the original message, answers, questions and actions "
    "taken), memories loaded earlier need their content updated."
    # Without this, a correction ("actually, I drink tea") is saved as a second memory that
    # contradicts the first, or updates an id the model never saw.
    " When the user corrects or changes a fact and the memory that holds it is not loaded "
    "yet, use MemorySearch first to find it, then this action."
)

PLAN_SYSTEM = (
    "You update the long-term memories of Memoria, an assistant. From the conversation, decide "
    "which of the memories loaded earlier (listed with their ids) must change, and write each "
    "one's complete new content in {language}, faithful to what the user said: a string, or "
    "an object or a list for structured data. The user's message was sent on {said_on}: where "
    "they name a date relative to it, keep their words and add the date in ISO form in "
    'parentheses after them, as in "last week (week of YYYY-MM-DD)". Only use ids from the '
    "list. Give new bindings (1 to 5 short search keys) or a new memory_type only when they "
    "must change, else null. At most {max_updates} updates. Answer with JSON only: "
    '{{"updates": [{{"_id": "mem_...", "content": "...", "bindings": null, '
    '"memory_type": null}}]}}. '
    "If the user means one memory but several listed ones could be it, do not guess: answer "
    '{{"updates": [], "candidates": ["mem_...", "mem_..."], "content": "<the new content>"}} '
    "and the user will be asked which one."
    " The memory to change is the one holding the fact being corrected (the same subject: "
    '"I drink tea" corrects what the user drinks), even when its words differ.'
)

EXPLAIN_SYSTEM = (
    "In {language}, tell the user in one "
    "or two short sentences which memories you just updated, from what to what, and which "
    "could not be found. Use only the results given; never invent memories."
)


class PlannedUpdate(BaseModel):
    # Models name the id "_id" (the document store's key); "memory_id" is what the model
    # sees on the memory cards, so either is taken.
    memory_id: str = Field(validation_alias=AliasChoices("_id", "memory_id"), min_length=1)
    content: Content
    bindings: list[Binding] | None = Field(default=None, min_length=1, max_length=MAX_BINDINGS)
    memory_type: MemoryType | None = None

    @model_validator(mode="after")
    def _content_fits(self) -> PlannedUpdate:
        check_content(kind_of(self.content), self.content)
        return self


class UpdatePlan(BaseModel):
    updates: list[PlannedUpdate] = Field(default_factory=list, max_length=MAX_UPDATES)
    candidates: list[str] = Field(default_factory=list, max_length=MAX_CANDIDATES)
    """Ambiguous target: the ids of the memories the user may mean; ``content`` is then the
    new content of the one they choose."""
    content: Content | None = None
    question: str | None = None
    """Accepted and ignored: the question is asked by the runtime, in fixed words."""

    @model_validator(mode="after")
    def _something_to_do(self) -> UpdatePlan:
        if self.candidates:
            if self.updates:
                raise ValueError("give either updates or candidates, not both")
            if self.content is None:
                raise ValueError("candidates need the new content")
            check_content(kind_of(self.content), self.content)
        elif not self.updates:
            raise ValueError("give at least one update, or the candidates to ask about")
        return self

    @model_validator(mode="before")
    @classmethod
    def _seed_shape(cls, data: Any) -> Any:
        # A model may answer one {"_id", "content"} object; accept it, or a bare list of them.
        data = bare_list_as(data, "updates", item_key="_id")
        return bare_list_as(data, "updates", item_key="memory_id")


def _plan_prompt(ctx: ActionContext) -> Prompt:
    loaded = memories_in([*ctx.cycle.history, *ctx.cycle.transcript])
    system = PLAN_SYSTEM.format(
        language=language_name(ctx), said_on=said_on(ctx.said_at), max_updates=MAX_UPDATES
    )
    ask = (
        f"Memory types:\n{memory_types_block(ctx)}\n\n"
        f"Memories loaded earlier:\n{memories_block(loaded)}\n\nList the updates now."
    )
    return chat_prompt(system, ctx.cycle, ask)


def _dated(plan: UpdatePlan, said: datetime) -> UpdatePlan:
    updates = [
        planned.model_copy(
            update={
                "content": resolve_in_content(planned.content, said),
                "bindings": None
                if planned.bindings is None
                else resolve_in_bindings(planned.bindings, said),
            }
        )
        for planned in plan.updates
    ]
    content = None if plan.content is None else resolve_in_content(plan.content, said)
    return plan.model_copy(update={"updates": updates, "content": content})


async def _update(ctx: ActionContext) -> ActionOutcome:
    await status(ctx, "memory_update_started")
    # ctx.plan: a re-run of the step applies the same changes instead of asking again.
    plan = await make_plan(
        ctx,
        task=TASK,
        schema=UpdatePlan,
        prompt=_plan_prompt(ctx),
        invalid_notice="memory_update_invalid_plan",
    )
    # What the model left relative ("last week") is dated here, against the message's time.
    plan = _dated(plan, ctx.said_at)
    plan = _unclear_target(ctx, plan)
    if plan.candidates:
        resolved = _resolve_candidates(ctx, plan)
        if isinstance(resolved, ActionOutcome):
            return resolved
        plan = resolved
    calls = MemoryCalls(ctx)
    await status(ctx, "memory_update_recording")
    tally: Tally[MemoryUpdated] = Tally(
        "updated",
        lambda u: f'{u.memory_id} ("{short(u.old_content)}" -> "{short(u.new_content)}")',
    )
    for planned in plan.updates:
        request = MemoryUpdate(
            memory_id=planned.memory_id,
            content=planned.content,
            content_kind=kind_of(planned.content),
            memory_type=planned.memory_type,
            bindings=planned.bindings,
            source="chat",
        )
        await tally.add(planned.memory_id, calls.update(request))
    updated = tally.done
    # What is stored now, as cards, each with what it replaced.
    cards = await ctx.chat.post_all(
        modal="memory",
        role="system",
        chat_history=True,
        contents=[u.memory.model_dump(mode="json") for u in updated],
        cards=[CardInfo(kind="updated", replaced=u.old_content) for u in updated],
    )
    results = {
        "updated": [
            {"memory_id": u.memory_id, "old_content": u.old_content, "new_content": u.new_content}
            for u in updated
        ],
        "not_found": tally.not_found,
        "not_updated": tally.refused,
    }
    explanation = await explain(
        ctx,
        task=TASK,
        system=EXPLAIN_SYSTEM,
        ask="Explain what you just updated.",
        results=results,
    )
    # written_ids: what "forget that" in a later turn of the thread forgets.
    arguments = {
        "memory_ids": [planned.memory_id for planned in plan.updates],
        "written_ids": [u.memory_id for u in updated],
    }
    return succeeded(tally.summary(), [*cards, explanation], arguments)


def _unclear_target(ctx: ActionContext, plan: UpdatePlan) -> UpdatePlan:
    """One update naming an id this thread never showed, while 2 to :data:`MAX_CANDIDATES`
    memories were shown: the loaded memories become the candidates (the user is asked
    which). Any other plan is kept as it is: an unknown id among others, or with fewer or
    more memories shown, goes to the memory service (``not_found`` unless it is the user's).
    An update naming no id at all is an invalid plan, re-asked with the validation error
    (the prompt tells the model to list candidates when unsure)."""
    if len(plan.updates) != 1:
        return plan
    loaded = [m.memory_id for m in memories_in([*ctx.cycle.history, *ctx.cycle.transcript])]
    (only,) = plan.updates
    if only.memory_id in loaded or not 2 <= len(loaded) <= MAX_CANDIDATES:
        return plan
    return UpdatePlan(candidates=loaded, content=only.content)


def _resolve_candidates(ctx: ActionContext, plan: UpdatePlan) -> UpdatePlan | ActionOutcome:
    """An ambiguous target: only memories loaded in this thread (the session user's own, found
    by their searches) can be offered; any other id is left out. Two or more: the cycle ends
    and decision asks the user which (``ActionOutcome.choice``). One: it is updated."""
    loaded = {m.memory_id: m for m in memories_in([*ctx.cycle.history, *ctx.cycle.transcript])}
    offered = [loaded[i] for i in dict.fromkeys(plan.candidates) if i in loaded]
    left_out = [i for i in dict.fromkeys(plan.candidates) if i not in loaded]
    if len(offered) == 1:
        only = PlannedUpdate.model_validate({"_id": offered[0].memory_id, "content": plan.content})
        return UpdatePlan(updates=[only])
    note = f"; not offered (not loaded here): {listing(left_out)}" if left_out else ""
    if not offered:
        return succeeded(f"updated no memory: no candidate is a memory loaded here{note}", [])
    choice = UpdateChoice(
        candidates=[ChoiceCandidate(memory_id=m.memory_id, content=m.content) for m in offered],
        content=plan.content,
        content_kind=kind_of(plan.content) if plan.content is not None else None,
    )
    ids = [m.memory_id for m in offered]
    return ActionOutcome(
        status="ok",
        ends_cycle=True,
        summary=f"asked the user which memory to update: {listing(ids)}{note}",
        arguments={"candidates": ids},
        choice=choice,
    )


@action("MemoryUpdate", when_to_use=WHEN_TO_USE, ends_cycle=False)
async def memory_update(ctx: ActionContext) -> ActionOutcome:
    return await guarded(ctx, "MemoryUpdate", _update)

"""MemorySearch: look up the user's long-term memories the conversation needs, show
each one found as a memory card and explain briefly what was searched."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Final

from pydantic import BaseModel, Field, field_validator, model_validator

from memoria_action_worker.context import ActionContext
from memoria_action_worker.memory_steps import (
    MemoryCalls,
    bare_list_as,
    describe,
    explain,
    guarded,
    language_name,
    listing,
    make_plan,
    memories_block,
    memories_count,
    memories_in,
    memory_result,
    memory_types_block,
    status,
    succeeded,
)
from memoria_action_worker.prompts import chat_prompt
from memoria_action_worker.registry import action
from memoria_action_worker.rerank import enabled as rerank_enabled
from memoria_action_worker.rerank import rerank
from memoria_contracts.chat import CardInfo
from memoria_contracts.events import ActionOutcome
from memoria_contracts.memory import (
    MAX_EXCLUDED,
    MAX_QUERIES,
    MAX_SEARCH_LIMIT,
    SINCE,
    UNTIL,
    Memory,
    MemorySearch,
    MemoryType,
    QueryText,
    SearchMode,
    check_window,
    near_the_best,
)
from memoria_llm.port import Prompt
from memoria_text.relative_dates import said_on

TASK: Final = "MemorySearch"

# When to use it, written out in full (not "as for Finalize"): Finalize may be disabled.
WHEN_TO_USE = (
    "After reviewing the whole history (the original message, answers, questions and actions "
    "taken), you need to look up some information before taking another action: something the "
    "user is asking about, something needed before using a tool, or something you have no "
    "idea about."
)

PLAN_SYSTEM = (
    "You plan lookups in the user's long-term memory for Memoria, an assistant. From the "
    "conversation, list the short, isolated pieces of information to look for, one topic "
    'each, a few words each (for example "user\'s name", "aliexpress password"), at most '
    "{max_queries}, written in {language}. Do not look again for what the memories already "
    'retrieved in this cycle cover. Use mode "chronological" only when the user wants their '
    "latest memories or everything you remember, with no particular topic; otherwise "
    '"semantic". Set memory_type only when the request is clearly about one type, else null. '
    "The user's message was sent on {said_on} ({said_at}). When they ask about what they "
    'told you at some time ("what did I tell you last week?", "o que eu disse ontem?"), '
    "set since and until to that time (ISO 8601 with offset; since inclusive, until "
    'exclusive), with mode "chronological" unless a topic is named too; else null. '
    'Answer with JSON only: {{"queries": ["..."], "mode": "semantic", "memory_type": null, '
    '"since": null, "until": null}}'
    " When the user corrects a fact, look for the fact being corrected by its subject (what "
    'the user drinks, "sister\'s name") and the value they say is wrong, not by the new '
    "value alone: memory does not hold that yet."
)

EXPLAIN_SYSTEM = (
    "In {language}, tell the user in one "
    "or two short sentences what you just looked for in memory and what you found, or that "
    "nothing was found. Use only the results given; never invent memories."
)


class SearchPlan(BaseModel):
    queries: list[QueryText] = Field(
        min_length=1,
        max_length=MAX_QUERIES,
        description="Short isolated contexts to look for, e.g. 'user's name'.",
    )
    mode: SearchMode = "semantic"
    memory_type: MemoryType | None = None
    limit: int | None = Field(
        default=None,
        ge=1,
        le=MAX_SEARCH_LIMIT,
        description="How many memories at most; null for the session's memory_limit.",
    )
    since: datetime | None = Field(default=None, description=SINCE)
    until: datetime | None = Field(default=None, description=UNTIL)

    @model_validator(mode="before")
    @classmethod
    def _seed_shape(cls, data: Any) -> Any:
        return bare_list_as(data, "queries")  # a model may answer with a bare list of strings

    @field_validator("since", "until")
    @classmethod
    def _zoned(cls, moment: datetime | None) -> datetime | None:
        # A model that leaves out the offset means the zone the services write times in.
        if moment is not None and moment.tzinfo is None:
            return moment.replace(tzinfo=UTC)
        return moment

    @model_validator(mode="after")
    def _window(self) -> SearchPlan:
        check_window(self.since, self.until)
        return self


def _plan_prompt(ctx: ActionContext, retrieved: list[Memory]) -> Prompt:
    ask = (
        f"Memory types:\n{memory_types_block(ctx)}\n\n"
        f"Memories already retrieved in this cycle (do not look for these again):\n"
        f"{memories_block(retrieved)}\n\nPlan the lookup now."
    )
    system = PLAN_SYSTEM.format(
        max_queries=MAX_QUERIES,
        language=language_name(ctx),
        said_on=said_on(ctx.said_at),
        said_at=ctx.said_at.isoformat(),
    )
    return chat_prompt(system, ctx.cycle, ask)


async def _search(ctx: ActionContext) -> ActionOutcome:
    await status(ctx, "memory_search_started")
    retrieved = memories_in(ctx.cycle.transcript)
    # Through ctx.plan like the writing actions: a re-run of the step looks for the same
    # things, so its memory cards replace the first run's (same message ids).
    plan = await make_plan(
        ctx,
        task=TASK,
        schema=SearchPlan,
        prompt=_plan_prompt(ctx, retrieved),
        invalid_notice="memory_search_invalid_plan",
    )
    queries = list(dict.fromkeys(plan.queries))
    calls = MemoryCalls(ctx)
    await status(ctx, "memory_search_formatting")
    vectors: list[list[float]] | None = None
    embedder: str | None = None
    if plan.mode == "semantic":  # the latest memories need no query vectors
        embedded = await calls.embed(queries, "query")
        vectors, embedder = embedded.vectors, embedded.embedder
    await status(ctx, "memory_search_searching")
    found = await calls.search(
        MemorySearch(
            mode=plan.mode,
            queries=queries,
            vectors=vectors,
            embedder=embedder,
            memory_type=plan.memory_type,
            limit=plan.limit or ctx.session.memory_limit,
            min_relevance=ctx.session.memory_min_relevance,
            # The newest retrievals matter most if a long cycle has more than the cap.
            exclude_ids=[m.memory_id for m in retrieved][-MAX_EXCLUDED:],
            since=plan.since,
            until=plan.until,
        )
    )
    memories = found.memories
    reranked = plan.mode == "semantic" and rerank_enabled(ctx.settings.memory, ctx.llm)
    if plan.mode == "semantic" and not reranked:
        # With no model to judge them, the cards near the best match are the answer; a
        # model's rerank sees every memory found and narrows them itself.
        memories = near_the_best(memories, ctx.settings.memory.memory_relative_relevance)
    # Chronological results are in the order asked for (newest first), not by relevance.
    if reranked:
        memories = await rerank(
            ctx.llm,
            context=ctx.cycle,
            queries=queries,
            candidates=memories,
            timeout_seconds=ctx.settings.memory.memory_rerank_timeout_seconds,
        )
    cards = await ctx.chat.post_all(
        modal="memory",
        role="system",
        chat_history=True,
        contents=[m.model_dump(mode="json") for m in memories],
        cards=CardInfo.found_in_order(len(memories)) if plan.mode == "semantic" else [],
    )
    window = {
        name: moment.isoformat()
        for name, moment in (("since", plan.since), ("until", plan.until))
        if moment is not None
    }
    results = {
        "looked_for": queries,
        "mode": plan.mode,
        "memory_type": plan.memory_type,
        **window,
        "found": [memory_result(m) for m in memories],
    }
    explanation = await explain(
        ctx,
        task=TASK,
        system=EXPLAIN_SYSTEM,
        ask="Explain the memory lookup you just did.",
        results=results,
        bindings={m.memory_id: m.bindings for m in memories},
    )
    looked_for = ", ".join(f'"{q}"' for q in queries)
    if memories:
        items = listing([describe(m.memory_id, m.content) for m in memories])
        outcome = f"found {memories_count(len(memories))}: {items}"
    else:
        outcome = "found no new memories"
    told = "".join(f", told {name} {moment}" for name, moment in window.items())
    summary = f"searched ({plan.mode}{told}) for {looked_for}: {outcome}"
    arguments: dict[str, object] = {"mode": plan.mode, "queries": queries}
    if plan.memory_type is not None:
        arguments["memory_type"] = plan.memory_type
    arguments.update(window)
    return succeeded(summary, [*cards, explanation], arguments)


@action("MemorySearch", when_to_use=WHEN_TO_USE, ends_cycle=False)
async def memory_search(ctx: ActionContext) -> ActionOutcome:
    return await guarded(ctx, "MemorySearch", _search)

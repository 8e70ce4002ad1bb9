"""MemorySave: store what the user clearly wants remembered, one atomic memory per fact,
each findable through a few short search keys ("bindings")."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

from pydantic import BaseModel, Field, field_validator, model_validator

from memoria_action_worker.context import ActionContext
from memoria_action_worker.memory_steps import (
    Content,
    MemoryCalls,
    bare_list_as,
    check_content,
    describe,
    explain,
    guarded,
    language_name,
    make_plan,
    memory_result,
    memory_types_block,
    outcome_summary,
    short,
    status,
    succeeded,
    with_progress,
)
from memoria_action_worker.prompts import chat_prompt
from memoria_action_worker.registry import action
from memoria_contracts.chat import CardInfo
from memoria_contracts.events import ActionOutcome
from memoria_contracts.memory import (
    MAX_BINDINGS,
    MAX_EMBED_TEXTS,
    Binding,
    ContentKind,
    MemorySave,
    MemorySaved,
    MemoryType,
)
from memoria_llm.port import Prompt
from memoria_text.relative_dates import resolve_in_bindings, resolve_in_content, said_on

TASK: Final = "MemorySave"
MAX_SAVES: Final = 10  # one message rarely holds more facts; more is likely a runaway plan

# When to use it, written out in full (not "as for Finalize"): Finalize may be disabled.
WHEN_TO_USE = (
    "After reviewing the whole history (the original message, answers, questions and actions "
    "taken), it is explicitly clear that there is information that needs to be saved."
)

PLAN_SYSTEM = (
    "You decide what Memoria, an assistant with long-term memory, stores about the user. From "
    "the conversation, extract only facts the user explicitly wants remembered, or facts that "
    "are clearly durable and useful later (who they are, preferences, goals, constraints, "
    "critical details). Never store greetings, questions, or what is only true right now. "
    "Write ONE atomic memory per fact, in {language}, faithful to the user's words. Use type "
    '"text" with a string content, or "json" with an object or a list for structured data. '
    "Give each memory 1 to 5 bindings: short, isolated contexts of a few words that a later "
    'question would search for (for example "user\'s name", "aliexpress password"), written '
    "in {language}{english_variant}. Pick the memory_type whose description fits best. "
    "The user's message was sent on {said_on}: where they name a date relative to it "
    '("yesterday", "last week", "next Friday"), keep their words and add the date in ISO form '
    'in parentheses after them, as in "last week (week of YYYY-MM-DD)" or "yesterday '
    '(YYYY-MM-DD)". At most {max_saves} memories. Answer with JSON only: '
    '{{"memories": [{{"type": "text", "content": "...", "bindings": ["..."], '
    '"memory_type": "..."}}]}}'
)
# A memory is found only through its bindings' vectors. The embedders are multilingual, but a
# same-language match scores clearly higher than a cross-language one, and the same user may
# ask later in English (or a search may be planned in English). One extra English key costs
# one vector and keeps the memory findable either way.
ENGLISH_VARIANT = ", plus one English version of the most important binding"

EXPLAIN_SYSTEM = (
    "In {language}, tell the user in one "
    "or two short sentences what you just saved in memory (what was already there, and what "
    "could not be saved, if anything). Use only the results given; never invent memories."
)


class PlannedMemory(BaseModel):
    type: ContentKind = Field(description='The content kind: "text" or "json".')
    content: Content
    bindings: list[Binding] = Field(min_length=1, max_length=MAX_BINDINGS)
    memory_type: MemoryType

    @field_validator("bindings")
    @classmethod
    def _distinct(cls, bindings: list[str]) -> list[str]:
        return list(dict.fromkeys(bindings))  # a repeated key would only cost a vector

    @model_validator(mode="after")
    def _content_fits(self) -> PlannedMemory:
        check_content(self.type, self.content)
        return self


class SavePlan(BaseModel):
    memories: list[PlannedMemory] = Field(min_length=1, max_length=MAX_SAVES)

    @model_validator(mode="before")
    @classmethod
    def _seed_shape(cls, data: Any) -> Any:
        # A model may answer one {"type", "content", "bindings"} object, or a list of them.
        return bare_list_as(data, "memories", item_key="content")

    @model_validator(mode="after")
    def _one_embedding_call(self) -> SavePlan:
        # All bindings go to the memory service in one embed request, which has a cap.
        total = sum(len(m.bindings) for m in self.memories)
        if total > MAX_EMBED_TEXTS:
            raise ValueError(f"{total} bindings in all; at most {MAX_EMBED_TEXTS}")
        return self


def _plan_prompt(ctx: ActionContext) -> Prompt:
    system = PLAN_SYSTEM.format(
        language=language_name(ctx),
        english_variant="" if ctx.language == "en" else ENGLISH_VARIANT,
        said_on=said_on(ctx.said_at),
        max_saves=MAX_SAVES,
    )
    ask = f"Memory types:\n{memory_types_block(ctx)}\n\nList the memories to save now."
    return chat_prompt(system, ctx.cycle, ask)


def _dated(plan: SavePlan, said: datetime) -> SavePlan:
    memories = [
        planned.model_copy(
            update={
                "content": resolve_in_content(planned.content, said),
                "bindings": resolve_in_bindings(planned.bindings, said),
            }
        )
        for planned in plan.memories
    ]
    return plan.model_copy(update={"memories": memories})


def _summary(saved: list[MemorySaved], refused: list[tuple[PlannedMemory, str]]) -> str:
    done = [
        describe(s.memory_id, s.memory.content) + ("" if s.created else " (already saved)")
        for s in saved
    ]
    return outcome_summary(
        "saved", done, refused=[f'"{short(p.content)}" ({e})' for p, e in refused]
    )


async def _save(ctx: ActionContext) -> ActionOutcome:
    await status(ctx, "memory_save_started")
    # ctx.plan: a re-run of the step reuses this plan, so its saves carry the same
    # idempotency keys and find the memories the first run made instead of duplicating them.
    plan = await make_plan(
        ctx,
        task=TASK,
        schema=SavePlan,
        prompt=_plan_prompt(ctx),
        invalid_notice="memory_save_invalid_plan",
    )
    # What the model left relative ("last week") is dated here, against the message's time.
    plan = _dated(plan, ctx.said_at)
    calls = MemoryCalls(ctx)
    await status(ctx, "memory_save_formatting")
    embedded = await calls.embed([b for m in plan.memories for b in m.bindings], "passage")
    await status(ctx, "memory_save_recording")
    saved: list[MemorySaved] = []
    refused: list[tuple[PlannedMemory, str]] = []
    offset = 0
    for index, planned in enumerate(plan.memories):
        request = MemorySave(
            idempotency_key=f"{ctx.event.cycle_id}:{ctx.request.step}:{index}",
            memory_type=planned.memory_type,
            content_kind=planned.type,
            content=planned.content,
            bindings=planned.bindings,
            vectors=embedded.vectors[offset : offset + len(planned.bindings)],
            embedder=embedded.embedder,
            source="chat",
            # A fact the user already has is not kept twice ("I'm Marco" said in two threads).
            reuse_same_content=True,
            creation_datetime=ctx.said_at,  # when it was told, not when this step ran
        )
        offset += len(planned.bindings)
        reply = await with_progress(calls.save(request), lambda: _summary(saved, refused))
        if isinstance(reply, MemorySaved):
            saved.append(reply)
        else:
            refused.append((planned, reply.error_message))
    # What was stored, as cards: the saved memories (and those that already said it).
    cards = await ctx.chat.post_all(
        modal="memory",
        role="system",
        chat_history=True,
        contents=[s.memory.model_dump(mode="json") for s in saved],
        cards=[CardInfo(kind="saved") for _ in saved],
    )
    results = {
        "saved": [memory_result(s.memory) for s in saved if s.created],
        "already_saved": [memory_result(s.memory) for s in saved if not s.created],
        "not_saved": [{"content": p.content, "reason": e} for p, e in refused],
    }
    explanation = await explain(
        ctx,
        task=TASK,
        system=EXPLAIN_SYSTEM,
        ask="Explain what you just saved.",
        results=results,
    )
    # written_ids: what "forget that" in a later turn of the thread forgets (decision reads
    # them from this step's call in the history).
    arguments = {
        "memory_types": [planned.memory_type for planned in plan.memories],
        "written_ids": [s.memory_id for s in saved],
    }
    return succeeded(_summary(saved, refused), [*cards, explanation], arguments)


@action("MemorySave", when_to_use=WHEN_TO_USE, ends_cycle=False)
async def memory_save(ctx: ActionContext) -> ActionOutcome:
    return await guarded(ctx, "MemorySave", _save)

"""The model's second look at what a memory search found: one batched call that gets the
user's request and every candidate (id and content) and answers the ids that help answer it,
best first. Vector and word scores only say a memory is near the query; a model can tell that
"wife's birthday" does not answer "when is my birthday?".

Reranking only ever narrows and reorders what the search found, and only to ids it was given:
whatever goes wrong (the provider is down or slow, the answer does not fit the schema, it names
no candidate), the search's own order stands and nothing is lost.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any, Final

from pydantic import BaseModel, Field, model_validator

from memoria_action_worker.memory_steps import bare_list_as
from memoria_contracts.events import CycleContext
from memoria_contracts.memory import Memory
from memoria_contracts.text import as_text
from memoria_llm.port import LanguageModel, LLMError, LLMRequest, Prompt, PromptMessage
from memoria_runtime.settings import MemorySettings

log = logging.getLogger("memoria.action_worker.rerank")

TASK: Final = "MemoryRerank"
OFFLINE_PROVIDER: Final = "offline"  # the rule planner: no model to judge relevance

SYSTEM = (
    "You check the results of a lookup in the user's long-term memory for Memoria, an "
    "assistant. Given the user's request, what was looked for, and the memories found (each "
    "with its id), choose the memories that help answer the request, the most useful first. "
    "Leave out memories about something else, even on a nearby topic (the wife's birthday "
    "does not answer the user's own birthday). Use only ids from the list. "
    'Answer with JSON only: {"relevant": ["<memory id>", ...]}; [] when none helps.'
)


class RerankAnswer(BaseModel):
    relevant: list[str] = Field(
        description="Ids of the memories found that help answer the request, most useful "
        "first; empty when none does."
    )

    @model_validator(mode="before")
    @classmethod
    def _bare_list(cls, data: Any) -> Any:
        return bare_list_as(data, "relevant")  # a model may answer with the bare list of ids


def enabled(settings: MemorySettings, llm: LanguageModel) -> bool:
    """Rerank when the setting allows it and a model (not the offline planner) answers."""
    return settings.memory_rerank and llm.name != OFFLINE_PROVIDER


def _prompt(request: str, queries: Sequence[str], candidates: Sequence[Memory]) -> Prompt:
    listed = "\n".join(
        f"- {m.memory_id} [{m.memory_type}] {as_text(m.content)}" for m in candidates
    )
    looked_for = "; ".join(queries)
    ask = (
        f"The user's request:\n{request}\n\nLooked for: {looked_for}\n\n"
        f"Memories found:\n{listed}\n\nWhich of them help answer the request, best first?"
    )
    return Prompt(system=SYSTEM, messages=[PromptMessage(role="user", content=ask)])


def _chosen(answer: RerankAnswer, candidates: Sequence[Memory]) -> list[Memory] | None:
    """The candidates the answer names, in its order, each once; None when it names ids but
    not one of them is a candidate (it did not answer about this list)."""
    by_id = {m.memory_id: m for m in candidates}
    known = [by_id[i] for i in dict.fromkeys(answer.relevant) if i in by_id]
    unknown = [i for i in answer.relevant if i not in by_id]
    if unknown:
        log.debug("%s: ignored ids that were not found: %s", TASK, unknown)
    if answer.relevant and not known:
        return None
    return known


async def rerank(
    llm: LanguageModel,
    *,
    context: CycleContext,
    queries: Sequence[str],
    candidates: Sequence[Memory],
    timeout_seconds: float,
) -> list[Memory]:
    """``candidates`` (in the search's order) narrowed and ordered by the model, or as they
    are when the model cannot say within ``timeout_seconds``."""
    if not candidates:
        return []
    request = as_text(context.original_message.content)
    call = LLMRequest(
        task=TASK,
        prompt=_prompt(request, queries, candidates),
        input_json=context.model_dump_json(),
    )
    try:
        # The provider's own timeout is per attempt; the step needs a bound on the whole.
        async with asyncio.timeout(timeout_seconds):
            answer = await llm.reasoning(call, RerankAnswer)
    except (LLMError, TimeoutError) as exc:
        log.debug("%s: the model could not rerank (%s); the search's order stands", TASK, exc)
        return list(candidates)
    chosen = _chosen(answer, candidates)
    if chosen is None:
        log.debug("%s: the answer named no memory found; the search's order stands", TASK)
        return list(candidates)
    return chosen

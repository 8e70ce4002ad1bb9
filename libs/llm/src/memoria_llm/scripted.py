"""A deterministic provider for tests and benchmarks, driven by a JSON script.

```json
{"rules": [
   {"match": "remember|lembre", "decide": ["MemorySave", "Finalize"],
    "chat": {"Finalize": "Saved it."}, "reasoning": {"MemorySave": {"items": []}}},
   {"match": "", "decide": [["Bogus", "Finalize"]], "chat": {"Finalize": "Hello!"}}
 ],
 "delay_seconds": {"reasoningHeavy": 0.0, "chat": 0.0},
 "chat_chunk_words": 1,
 "embedding_dim": 8}
```

The first rule whose ``match`` (a case-insensitive regex) is found in the cycle's original
message applies (the cycle: the request's ``input_json``, a ``CycleContext``). ``decide[k]``
answers the k-th decision of a cycle (k = steps already taken; the last entry repeats); an
entry may be a list indexed by the re-ask attempt, so a script can answer an unknown name
first and a valid one next. ``chat[task]`` is streamed in chunks of ``chat_chunk_words``
words; ``reasoning[task]`` is validated into the asked schema.
``delay_seconds`` per mode simulates latency (benchmarks) or a hung model (tests).
``prompt_log`` (a file path) appends every prompt the model is given as one JSON line
(``mode``, ``task``, ``model``, ``system``, ``messages``), so tests can check what a step saw.

Strings in ``reasoning`` outputs may refer to the cycle, so a script can act on ids it cannot
know in advance: ``"$1"``…``"$9"`` are the groups of the rule's ``match`` in the message,
``"$found"`` is the list of memory ids shown earlier in the cycle (memory messages) and
``"$found[0]"`` one of them.

Usage is reported like a real provider's, in words rather than tokens so tests can predict
it: the prompt's words (system and messages) in, the answer's words out, under the model
name ``scripted``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import re
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from memoria_contracts.events import CycleContext
from memoria_llm import usage
from memoria_llm.port import (
    EmbedPurpose,
    LanguageModel,
    LLMOutputError,
    LLMRequest,
    Mode,
    Prompt,
    T,
)
from memoria_llm.usage import Usage

LABEL = "scripted"
_WORDS = re.compile(r"\S+\s*|\s+")
_GROUP = re.compile(r"^\$([1-9])$")
_FOUND_ONE = re.compile(r"^\$found\[(\d+)\]$")


def _finalize_only() -> list[str | list[str]]:
    return ["Finalize"]


class ScriptRule(BaseModel):
    match: str = ""
    decide: list[str | list[str]] = Field(default_factory=_finalize_only)
    chat: dict[str, str] = Field(default_factory=dict)
    reasoning: dict[str, object] = Field(default_factory=dict)


class Script(BaseModel):
    rules: list[ScriptRule]
    delay_seconds: dict[Mode, float] = Field(default_factory=dict)
    chat_chunk_words: int = Field(default=1, ge=1)
    embedding_dim: int = Field(default=8, ge=1)
    prompt_log: Path | None = None

    @classmethod
    def load(cls, path: Path) -> Script:
        return cls.model_validate_json(path.read_text())


def _words(text: str) -> int:
    return len(text.split())


def _prompt_words(prompt: Prompt) -> int:
    return _words(prompt.system) + sum(_words(message.content) for message in prompt.messages)


def _report(prompt: Prompt, answer: str) -> None:
    usage.report(Usage(LABEL, _prompt_words(prompt), _words(answer)))


def _pick(entries: Sequence[str | list[str]], index: int) -> str | list[str]:
    return entries[min(index, len(entries) - 1)]


class ScriptedModel(LanguageModel):
    def __init__(self, script: Script) -> None:
        self._script = script

    @property
    def name(self) -> str:
        return "scripted"

    def label(self, mode: Mode) -> str:
        return LABEL

    def _rule(self, request: LLMRequest) -> ScriptRule:
        cycle = _cycle(request)
        text = cycle.original_message.content if cycle else ""
        for rule in self._script.rules:
            if re.search(rule.match, str(text), re.IGNORECASE):
                return rule
        raise LLMOutputError(f"no script rule matches {str(text)[:60]!r}")

    async def _delay(self, mode: Mode) -> None:
        seconds = self._script.delay_seconds.get(mode, 0.0)
        if seconds > 0:
            await asyncio.sleep(seconds)

    def _log_prompt(self, mode: Mode, request: LLMRequest) -> None:
        if self._script.prompt_log is None:
            return
        entry = {
            "mode": mode.value,
            "task": request.task,
            "model": request.model,
            "system": request.prompt.system,
            "messages": [[m.role, m.content] for m in request.prompt.messages],
        }
        with self._script.prompt_log.open("a", encoding="utf-8") as log:
            log.write(json.dumps(entry, ensure_ascii=False) + "\n")

    async def reasoning_heavy(self, request: LLMRequest, choices: Sequence[str]) -> str:
        await self._delay(Mode.REASONING_HEAVY)
        self._log_prompt(Mode.REASONING_HEAVY, request)
        rule = self._rule(request)
        cycle = _cycle(request)
        steps = len(cycle.steps) if cycle else 0
        entry = _pick(rule.decide, steps)
        # An entry that is a list answers each re-ask in turn, its last one repeating.
        answer = entry[min(request.attempt, len(entry) - 1)] if isinstance(entry, list) else entry
        _report(request.prompt, answer)
        return answer

    async def reasoning(self, request: LLMRequest, schema: type[T]) -> T:
        await self._delay(Mode.REASONING)
        self._log_prompt(Mode.REASONING, request)
        rule = self._rule(request)
        if request.task not in rule.reasoning:
            raise LLMOutputError(f"the script has no reasoning output for {request.task}")
        output = _substitute(rule.reasoning[request.task], self._bindings(rule, request))
        _report(request.prompt, json.dumps(output))
        try:
            return schema.model_validate(output)
        except ValidationError as exc:
            raise LLMOutputError(f"scripted output does not fit {schema.__name__}: {exc}") from exc

    @staticmethod
    def _bindings(rule: ScriptRule, request: LLMRequest) -> dict[str, Any]:
        context = _cycle(request)
        text = str(context.original_message.content) if context else ""
        match = re.search(rule.match, text, re.IGNORECASE)
        groups = match.groups() if match else ()
        return {"groups": groups, "found": _found_memory_ids(context)}

    async def chat(self, request: LLMRequest) -> AsyncIterator[str]:
        await self._delay(Mode.CHAT)
        self._log_prompt(Mode.CHAT, request)
        text = self._rule(request).chat.get(request.task, f"(scripted) {request.task}")
        words = _WORDS.findall(text)
        size = self._script.chat_chunk_words
        sent: list[str] = []
        try:
            for start in range(0, len(words), size):
                sent.append("".join(words[start : start + size]))
                yield sent[-1]
        finally:  # once per stream, like a real one, also when the reader stops early
            _report(request.prompt, "".join(sent))

    async def embedding(self, texts: Sequence[str], purpose: EmbedPurpose) -> list[list[float]]:
        await self._delay(Mode.EMBEDDING)
        usage.report(Usage(LABEL, sum(_words(text) for text in texts), 0))
        return [self._vector(text) for text in texts]

    def _vector(self, text: str) -> list[float]:
        dim = self._script.embedding_dim
        digest = hashlib.sha256(text.encode()).digest()
        raw = [digest[i % len(digest)] - 127.5 for i in range(dim)]
        norm = math.sqrt(sum(v * v for v in raw)) or 1.0
        return [v / norm for v in raw]


def _cycle(request: LLMRequest) -> CycleContext | None:
    if request.input_json is None:
        return None
    try:
        return CycleContext.model_validate_json(request.input_json)
    except ValidationError as exc:
        raise LLMOutputError(f"the scripted model reads a cycle, not this input: {exc}") from exc


def _found_memory_ids(context: CycleContext | None) -> list[str]:
    if context is None:
        return []
    ids: list[str] = []
    for record in [*context.history, *context.transcript]:
        content = record.content
        if record.modal == "memory" and isinstance(content, dict):
            memory_id = content.get("memory_id")
            if isinstance(memory_id, str) and memory_id not in ids:
                ids.append(memory_id)
    return ids


def _substitute(value: object, bindings: dict[str, Any]) -> object:
    """Replace ``$1``, ``$found`` and ``$found[i]`` strings anywhere in a JSON value."""
    if isinstance(value, list):
        return [_substitute(item, bindings) for item in value]
    if isinstance(value, dict):
        return {key: _substitute(item, bindings) for key, item in value.items()}
    if not isinstance(value, str):
        return value
    if value == "$found":
        return list(bindings["found"])
    if group := _GROUP.match(value):
        index = int(group.group(1)) - 1
        groups = bindings["groups"]
        return groups[index] if index < len(groups) else value
    if one := _FOUND_ONE.match(value):
        found = bindings["found"]
        index = int(one.group(1))
        return found[index] if index < len(found) else value
    return value

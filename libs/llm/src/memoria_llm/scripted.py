"""A deterministic provider for tests and benchmarks: pydantic-ai's ``FunctionModel`` answering
from a JSON script (docs/testing.md describes it), behind the adapter the remote providers
use, so a scripted run goes through the same structured output, re-asks, streams, spans and
usage. It reads the cycle from the request's ``input_json`` (a ``CycleContext``).

Usage is counted in words so tests can predict it (the prompt's words in, the answer's out),
except for a streamed answer, which counts as ``FunctionModel`` counts it (a fixed 50 in).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import re
from collections.abc import AsyncIterator, Sequence
from functools import partial
from pathlib import Path

from pydantic import BaseModel, Field
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models import Model
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from memoria_llm import usage
from memoria_llm.config import RemoteConfig
from memoria_llm.cycle_input import cycle_input
from memoria_llm.model_messages import ACTION_SCHEMA_NAME
from memoria_llm.port import EmbedPurpose, LLMOutputError, LLMRequest, Mode, Prompt
from memoria_llm.remote import RemoteModel, Retried

LABEL = "scripted"
_WORDS = re.compile(r"\S+\s*|\s+")
_BINDING = re.compile(r"^\$(?:([1-9])|found(?:\[(\d+)\])?)$")


class ScriptRule(BaseModel):
    match: str = ""
    decide: list[str | list[str]] = ["Finalize"]  # pydantic copies it for each rule
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


class ScriptedModel(RemoteModel):
    name = system = LABEL

    def __init__(self, script: Script) -> None:
        super().__init__(RemoteConfig.defaults(embedding_dim=script.embedding_dim))
        self._script = script

    def label(self, mode: Mode) -> str:
        return LABEL

    def _model(self, name: str, request: LLMRequest) -> Model:
        function = FunctionModel(
            partial(self._answer, request),
            stream_function=partial(self._stream, request),
            model_name=LABEL,
        )
        return Retried(function, lambda send: self._call(name, send))

    async def _answer(
        self, request: LLMRequest, messages: list[ModelMessage], info: AgentInfo
    ) -> ModelResponse:
        """The next action (``decide``) or a JSON plan (``reasoning``), by what is asked."""
        asked = info.model_request_parameters.output_object
        deciding = asked is not None and asked.name == ACTION_SCHEMA_NAME
        await self._start(Mode.REASONING_HEAVY if deciding else Mode.REASONING, request)
        rule = self._rule(request)
        if deciding:
            cycle = cycle_input(request, "the scripted model")
            entry = rule.decide[min(len(cycle.steps) if cycle else 0, len(rule.decide) - 1)]
            # An entry that is a list answers each re-ask in turn, its last one repeating.
            answer = (
                entry[min(request.attempt, len(entry) - 1)] if isinstance(entry, list) else entry
            )
        elif request.task in rule.reasoning:
            answer = json.dumps(
                _substitute(rule.reasoning[request.task], *_bindings(rule, request))
            )
        else:
            raise LLMOutputError(f"the script has no reasoning output for {request.task}")
        counts = RequestUsage(
            input_tokens=_prompt_words(request.prompt), output_tokens=_words(answer)
        )
        return ModelResponse(parts=[TextPart(answer)], usage=counts)

    async def chat(self, request: LLMRequest) -> AsyncIterator[str]:
        # A script may have nothing to add, as the offline planner after a step said it all.
        if self._chat_text(request):
            async for piece in super().chat(request):
                yield piece

    async def _stream(
        self, request: LLMRequest, messages: list[ModelMessage], info: AgentInfo
    ) -> AsyncIterator[str]:
        await self._start(Mode.CHAT, request)
        words = _WORDS.findall(self._chat_text(request))
        size = self._script.chat_chunk_words
        for start in range(0, len(words), size):
            yield "".join(words[start : start + size])

    def _chat_text(self, request: LLMRequest) -> str:
        return self._rule(request).chat.get(request.task, f"(scripted) {request.task}")

    async def _start(self, mode: Mode, request: LLMRequest) -> None:
        """The script's delay for ``mode``, then the prompt to ``prompt_log``."""
        if seconds := self._script.delay_seconds.get(mode, 0.0):
            await asyncio.sleep(seconds)
        if self._script.prompt_log is not None:
            entry = {
                "mode": mode.value,
                "task": request.task,
                "model": request.model,
                "system": request.prompt.system,
                "messages": [[m.role, m.content] for m in request.prompt.messages],
            }
            with self._script.prompt_log.open("a", encoding="utf-8") as log:
                log.write(json.dumps(entry, ensure_ascii=False) + "\n")

    def _rule(self, request: LLMRequest) -> ScriptRule:
        """The first rule whose ``match`` is found in the cycle's message."""
        cycle = cycle_input(request, "the scripted model")
        text = str(cycle.original_message.content) if cycle else ""
        for rule in self._script.rules:
            if re.search(rule.match, text, re.IGNORECASE):
                return rule
        raise LLMOutputError(f"no script rule matches {text[:60]!r}")

    async def embedding(self, texts: Sequence[str], purpose: EmbedPurpose) -> list[list[float]]:
        if seconds := self._script.delay_seconds.get(Mode.EMBEDDING, 0.0):
            await asyncio.sleep(seconds)
        usage.report(usage.Usage(LABEL, sum(_words(text) for text in texts), 0))
        return [self._vector(text) for text in texts]

    def _vector(self, text: str) -> list[float]:
        digest = hashlib.sha256(text.encode()).digest()
        raw = [digest[i % len(digest)] - 127.5 for i in range(self._script.embedding_dim)]
        norm = math.sqrt(sum(v * v for v in raw)) or 1.0
        return [v / norm for v in raw]


def _bindings(rule: ScriptRule, request: LLMRequest) -> tuple[Sequence[str], list[str]]:
    """``$1``…``$9``: the groups of the rule's ``match``; ``$found``: the memory ids shown
    earlier in the cycle (memory messages), in order."""
    cycle = cycle_input(request, "the scripted model")
    match = re.search(rule.match, str(cycle.original_message.content) if cycle else "", re.I)
    records = [*cycle.history, *cycle.transcript] if cycle else []
    shown = [r.content for r in records if r.modal == "memory" and isinstance(r.content, dict)]
    ids = [memory_id for c in shown if isinstance(memory_id := c.get("memory_id"), str)]
    return match.groups() if match else (), list(dict.fromkeys(ids))


def _substitute(value: object, groups: Sequence[str], found: list[str]) -> object:
    """Replace ``$1``, ``$found`` and ``$found[i]`` strings anywhere in a JSON value (one
    out of range stays as it is)."""
    if isinstance(value, list):
        return [_substitute(item, groups, found) for item in value]
    if isinstance(value, dict):
        return {key: _substitute(item, groups, found) for key, item in value.items()}
    binding = _BINDING.match(value) if isinstance(value, str) else None
    if binding is None:
        return value
    group, index = binding.groups()
    if group:
        return groups[int(group) - 1] if int(group) <= len(groups) else value
    if index is None:
        return list(found)
    return found[int(index)] if int(index) < len(found) else value

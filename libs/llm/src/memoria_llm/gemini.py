"""The Gemini provider, on pydantic-ai's Google model (which runs on ``google-genai``; its
client is built here, so ``gemini_base_url`` reaches the SDK).

pydantic-ai maps the prompt to Gemini's contents (tool history as function call/response
parts), asks for structured output in Gemini's JSON mode and reads answers, usage and
errors. What stays here is what the port promises beyond one request, the same for every
provider (``retrying.CallPolicy``):

* transport: 429, 5xx, connection errors, timeouts and unreadable bodies are retried with
  exponential backoff and jitter (at least what a 429's ``RetryInfo`` asks); other 4xx fail
  at once with the API's message;
* output: ``reasoning`` re-asks when the answer does not validate against the schema,
  telling the model what was wrong (at most ``llm_retries``² requests per call);
* ``llm_timeout_seconds`` bounds each attempt; for ``chat`` the wait for the first piece and
  then for each next one, and a stream is retried only while nothing was yielded.

Token usage goes on each call's span and to :func:`memoria_llm.usage.report`, once per API
response: every attempt of ``reasoning``, one report per ``chat`` stream, and embeddings
only when the response counts them (``batchEmbedContents`` usually does not).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Sequence
from typing import TypeVar

import httpx
from google import genai
from google.genai import errors, types
from opentelemetry import trace
from pydantic import ValidationError
from pydantic_ai.direct import model_request
from pydantic_ai.exceptions import (
    ModelAPIError,
    ModelConnectionError,
    ModelHTTPError,
    ModelTimeoutError,
)
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
)
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.models.google import GoogleModel
from pydantic_ai.providers.google import GoogleProvider
from pydantic_ai.usage import RequestUsage

from memoria_llm import usage
from memoria_llm.config import GeminiConfig
from memoria_llm.model_messages import (
    action_name,
    action_output,
    json_output,
    model_messages,
    response_text,
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
from memoria_llm.usage import Usage

try:
    import httpx2
except ImportError:  # google-genai before 3.0
    httpx2 = None  # type: ignore[assignment]

R = TypeVar("R")

RETRY_CLIENT_CODES = frozenset({408, 429})  # the only 4xx that asking again can fix
EMBED_BATCH_MAX = 100  # batchEmbedContents takes at most 100 requests
TASK_TYPES: dict[EmbedPurpose, str] = {
    "passage": "RETRIEVAL_DOCUMENT",
    "query": "RETRIEVAL_QUERY",
}

log = logging.getLogger("memoria.llm.gemini")

# Embeddings go through the SDK directly: its failures are not pydantic-ai's. google-genai
# 3.x sends through httpx2, a fork with its own exception classes; older versions through httpx.
_TRANSPORT_ERRORS: tuple[type[Exception], ...] = (httpx.TransportError, ModelConnectionError)
_TIMEOUT_ERRORS: tuple[type[Exception], ...] = (
    TimeoutError,
    ModelTimeoutError,
    httpx.TimeoutException,
)
if httpx2 is not None:
    _TRANSPORT_ERRORS += (httpx2.TransportError,)
    _TIMEOUT_ERRORS += (httpx2.TimeoutException,)
_UNREADABLE = (errors.UnknownApiResponseError, json.JSONDecodeError)


def _is_transient(exc: BaseException) -> bool:
    if isinstance(exc, ModelHTTPError):
        return exc.status_code in RETRY_CLIENT_CODES or exc.status_code >= 500
    if isinstance(exc, errors.APIError):
        return exc.code in RETRY_CLIENT_CODES or exc.code >= 500
    # A stream that failed without a status (a resumed or cut stream) is the server's fault.
    return isinstance(exc, (TimeoutError, ModelAPIError, *_TRANSPORT_ERRORS, *_UNREADABLE))


def _error_body(exc: BaseException | None) -> dict[str, object]:
    body = exc.body if isinstance(exc, ModelHTTPError) else None
    if isinstance(exc, errors.APIError):
        body = exc.details
    error = body.get("error") if isinstance(body, dict) else None
    return error if isinstance(error, dict) else {}


def _server_delay(exc: BaseException | None) -> float:
    """The wait a 429 asks for (``RetryInfo.retryDelay``, e.g. ``"37s"``), else 0."""
    details = _error_body(exc).get("details") or []
    for item in details if isinstance(details, list) else []:
        delay = item.get("retryDelay") if isinstance(item, dict) else None
        if isinstance(delay, str) and delay.endswith("s"):
            try:
                return float(delay[:-1])
            except ValueError:
                return 0.0
    return 0.0


def _why_empty(response: ModelResponse) -> str:
    details = response.provider_details or {}
    if "block_reason" in details:
        return f"prompt blocked: {details['block_reason']}"
    reason = details.get("finish_reason") or response.finish_reason
    return f"finish reason {reason}" if reason else "no candidates"


class GeminiModel(RemoteModel):
    def __init__(
        self,
        settings: GeminiConfig,
        *,
        backoff_base_s: float = BACKOFF_BASE_S,
        backoff_max_s: float = BACKOFF_MAX_S,
        tracer_provider: trace.TracerProvider | None = None,
    ) -> None:
        super().__init__(
            "gemini",
            settings,
            backoff_base_s=backoff_base_s,
            backoff_max_s=backoff_max_s,
            tracer_provider=tracer_provider,
            is_transient=_is_transient,
            server_delay=_server_delay,
        )
        self._settings = settings
        self._client = genai.Client(
            vertexai=False,
            api_key=settings.gemini_api_key.get_secret_value(),
            http_options=types.HttpOptions(
                base_url=settings.gemini_base_url,
                timeout=math.ceil(self._timeout_s * 1000),
            ),
        )
        self._provider = GoogleProvider(client=self._client)
        self._models: dict[str, GoogleModel] = {}

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

    def _model(self, name: str) -> GoogleModel:
        if name not in self._models:
            self._models[name] = GoogleModel(name, provider=self._provider)
        return self._models[name]

    # -- the four modes ------------------------------------------------------------------------

    async def reasoning_heavy(self, request: LLMRequest, choices: Sequence[str]) -> str:
        model = self._settings.model_reasoning_heavy
        with self._tracing.span("llm.reasoning_heavy", model, request) as span:
            messages = model_messages(request.prompt)
            response = await self._request(model, messages, action_output(choices))
            count(span, model, [response.usage])
            text = response_text(response)
            if not text:
                # Callers validate and re-ask; an empty answer is just an unusable one.
                log.warning("%s gave no action name (%s)", model, _why_empty(response))
            return action_name(text)

    async def reasoning(self, request: LLMRequest, schema: type[T]) -> T:
        model = self._settings.model_reasoning
        output = json_output(schema.__name__, schema.model_json_schema())
        messages = model_messages(request.prompt)
        why = ""
        with self._tracing.span("llm.reasoning", model, request) as span:
            counts: list[RequestUsage] = []
            for attempt in range(1, self._attempts + 1):
                response = await self._request(model, messages, output)
                counts.append(response.usage)
                count(span, model, counts)
                text = response_text(response)
                try:
                    return schema.model_validate_json(text)
                except ValidationError as exc:
                    why = problem(exc) if text else _why_empty(response)
                log.warning("%s: invalid %s (attempt %d): %s", model, schema.__name__, attempt, why)
                messages = reasked(messages, text, why)
        raise LLMOutputError(
            f"{model} gave no valid {schema.__name__} in {self._attempts} attempts: {why}"
        )

    def chat_model(self, request: LLMRequest) -> str:
        return request.model or self._settings.model_chat

    async def _open_chat(self, model: str, prompt: Prompt, stream: TextStream) -> str:
        messages = model_messages(prompt)
        return await self._call(model, lambda: stream.open(self._model(model), messages))

    async def embedding(self, texts: Sequence[str], purpose: EmbedPurpose) -> list[list[float]]:
        model = self._settings.model_embedding
        config = types.EmbedContentConfig(
            task_type=TASK_TYPES[purpose], output_dimensionality=self._dim
        )
        vectors: list[list[float]] = []
        with self._tracing.span("llm.embedding", model, None) as span:
            span.set_attribute("memoria.llm.texts", len(texts))
            for start in range(0, len(texts), EMBED_BATCH_MAX):
                batch = list(texts[start : start + EMBED_BATCH_MAX])

                async def embed(batch: list[str] = batch) -> types.EmbedContentResponse:
                    return await self._client.aio.models.embed_content(
                        model=model, contents=batch, config=config
                    )

                response = await self._call(model, embed)
                metadata = response.usage_metadata
                if metadata is not None and metadata.prompt_token_count is not None:
                    usage.report(Usage(model, metadata.prompt_token_count, 0))
                embeddings = response.embeddings or []
                if len(embeddings) != len(batch):
                    raise LLMOutputError(
                        f"{model} returned {len(embeddings)} of {len(batch)} vectors"
                    )
                vectors.extend(self._unit(e.values or [], model) for e in embeddings)
        return vectors

    # -- plumbing -----------------------------------------------------------------------------

    async def _request(
        self, model: str, messages: list[ModelMessage], output: ModelRequestParameters
    ) -> ModelResponse:
        return await self._call(
            model,
            lambda: model_request(self._model(model), messages, model_request_parameters=output),
        )

    def _translate(self, exc: BaseException, model: str, attempts: int) -> LLMError | None:
        tries = f"{attempts} attempt{'s' if attempts != 1 else ''}"
        if isinstance(exc, _TIMEOUT_ERRORS):
            return LLMTimeout(f"{model} did not answer within {self._timeout_s:g}s ({tries})")
        if isinstance(exc, (ModelHTTPError, errors.APIError)):
            code = exc.status_code if isinstance(exc, ModelHTTPError) else exc.code
            error = _error_body(exc)
            detail = f"HTTP {code} {error.get('status') or ''}: {error.get('message') or exc}"
            if _is_transient(exc):
                return LLMUnavailable(f"{model} is unavailable, {detail} ({tries})")
            return LLMUnavailable(f"{model} refused the request, {detail}")
        if isinstance(exc, _TRANSPORT_ERRORS):
            return LLMUnavailable(f"{model} is unreachable: {exc!r} ({tries})")
        if isinstance(exc, (*_UNREADABLE, ModelAPIError)):
            return LLMUnavailable(f"{model} sent an unreadable response ({tries}): {exc}")
        return None

"""The port's modes on a pydantic-ai model: Gemini's, OpenAI's, and the scripted model's.

pydantic-ai maps prompts to each API, asks for structured output and reads answers, usage and
errors; ``reasoning`` is its agent loop, which validates the answer into the schema and
re-asks with the validation errors; its instrumentation adds a span per request and run under
ours. What stays ours (ADR 24): one retry policy for every request, errors in the port's
words, chat streams re-opened until their first piece and then timed per piece, our spans with
the caller's task and the call's usage, usage to the collector, unit-length embeddings.
"""

from __future__ import annotations

import json
import math
from abc import abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import AsyncExitStack, contextmanager
from typing import Any, TypeVar

from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode
from pydantic_ai import Agent, InstrumentationSettings, RetryFeedbackPart, RetryInfo
from pydantic_ai import capture_run_messages as capture
from pydantic_ai import exceptions as ai
from pydantic_ai.capabilities import Instrumentation
from pydantic_ai.direct import model_request, model_request_stream
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    PartDeltaEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
)
from pydantic_ai.models import Model, ModelRequestParameters, StreamedResponse
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.output import NativeOutput, OutputSpec
from pydantic_ai.settings import ModelSettings
from pydantic_ai.usage import RequestUsage

from memoria_llm import usage
from memoria_llm.config import RemoteConfig
from memoria_llm.model_messages import action_name, action_output, model_messages, response_text
from memoria_llm.port import (
    LanguageModel,
    LLMError,
    LLMOutputError,
    LLMRequest,
    LLMTimeout,
    LLMUnavailable,
    Mode,
    T,
)
from memoria_llm.retrying import CallPolicy

R = TypeVar("R")

BACKOFF_BASE_S = 1.0
BACKOFF_MAX_S = 30.0
RETRY_CLIENT_CODES = frozenset({408, 429})  # the only 4xx that asking again can fix
SERVER_MESSAGE_CHARS = 500
NO_CONTENT = "ended without content"  # pydantic-ai's word for a stream that carried no answer
REASK = RetryFeedbackPart(content=[], retry=RetryInfo("validation_error")).model_response()
"""What a re-ask tells the model before the validation errors (pydantic-ai's words)."""


def is_transient(exc: BaseException) -> bool:
    """A failure asking again can fix: 408, 429, 5xx, a timeout, a broken connection or
    stream, an unreadable body."""
    if isinstance(exc, ai.ModelHTTPError):
        return exc.status_code in RETRY_CLIENT_CODES or exc.status_code >= 500
    if isinstance(exc, ai.UnexpectedModelBehavior):
        return NO_CONTENT not in exc.message
    return isinstance(exc, (TimeoutError, ai.ModelAPIError, json.JSONDecodeError))


def server_message(exc: ai.ModelHTTPError) -> str:
    """The server's own words: ``error.message`` (nested under ``error`` by Gemini), a
    top-level ``message`` (vLLM) or ``detail``, or a plain-text body."""
    body: object = exc.body
    for key in ("error", "message", "detail"):
        if isinstance(body, dict) and body.get(key):
            body = body[key]
    text = (json.dumps(body) if isinstance(body, dict) else str(body or "")).strip()
    return (text or exc.message)[:SERVER_MESSAGE_CHARS]


def record(span: Span, model: str, counts: Sequence[RequestUsage]) -> None:
    """Report each response's usage to whoever collects it, and their sum on ``span``. A
    response without counts adds nothing."""
    counts = [c for c in counts if c.input_tokens or c.output_tokens]
    if counts:
        tokens_in, tokens_out = (
            sum(c.input_tokens for c in counts),
            sum(c.output_tokens for c in counts),
        )
        span.set_attribute("gen_ai.usage.input_tokens", tokens_in)
        span.set_attribute("gen_ai.usage.output_tokens", tokens_out)
        span.set_attribute("gen_ai.usage.total_tokens", tokens_in + tokens_out)
    for c in counts:
        usage.report(usage.Usage(model, c.input_tokens, c.output_tokens))


class Retried(WrapperModel):
    """A pydantic-ai model whose every request, the agent loop's too, goes through ``call``
    (:meth:`RemoteModel._call`). Streams are retried by :meth:`RemoteModel.chat`."""

    def __init__(self, wrapped: Model, call: Callable[[Callable[[], Awaitable[Any]]], Any]):
        super().__init__(wrapped)
        self._call = call

    async def request(self, *args: Any, **kwargs: Any) -> ModelResponse:
        response: ModelResponse = await self._call(lambda: self.wrapped.request(*args, **kwargs))
        return response


class TextStream:
    """One chat answer streamed as text. :meth:`open` may be called again (a retry) until it
    returns; the usage of every opened attempt is kept, since each was paid for."""

    def __init__(self) -> None:
        self._exit = AsyncExitStack()
        self._response: StreamedResponse | None = None
        self._events: AsyncIterator[object] | None = None
        self.counts: list[RequestUsage] = []

    async def open(
        self, model: Model, messages: list[ModelMessage], settings: ModelSettings | None = None
    ) -> str:
        """Open the stream and read up to its first piece of text, so failures before
        anything reached the caller can be retried."""
        await self.close()
        opening = model_request_stream(model, messages, model_settings=settings)
        self._response = await self._exit.enter_async_context(opening)
        self._events = aiter(self._response)
        first = await self.next_piece()
        if first is None:
            raise LLMOutputError(f"{model.model_name} streamed no text")
        return first

    async def next_piece(self) -> str | None:
        """The next non-empty piece of the answer's text (not of the model's thinking)."""
        assert self._events is not None
        async for event in self._events:
            if isinstance(event, PartStartEvent) and isinstance(event.part, TextPart):
                text = event.part.content
            elif isinstance(event, PartDeltaEvent) and isinstance(event.delta, TextPartDelta):
                text = event.delta.content_delta
            else:
                continue
            if text:
                return text
        return None

    async def close(self) -> None:
        if self._response is not None:
            self.counts.append(self._response.usage)
            self._response = None
        await self._exit.aclose()
        self._exit = AsyncExitStack()


class RemoteModel(LanguageModel):
    """``llm_retries`` attempts per request with backoff, ``llm_timeout_seconds`` per attempt
    (and per streamed piece), failures in the port's errors. Subclasses build the pydantic-ai
    model answering a request (``_model``) and may say how a refusal reads (``_refused``)."""

    system: str
    """``gen_ai.system`` on our spans."""

    def __init__(
        self,
        config: RemoteConfig,
        *,
        backoff_base_s: float = BACKOFF_BASE_S,
        backoff_max_s: float = BACKOFF_MAX_S,
        tracer_provider: trace.TracerProvider | None = None,
        server_delay: Callable[[BaseException | None], float] = lambda _: 0.0,
        transient: tuple[type[BaseException], ...] = (),
    ) -> None:
        self._timeout_s = config.llm_timeout_seconds
        self._attempts = max(1, config.llm_retries)
        self._dim = config.embedding_dim
        self._policy = CallPolicy(
            attempts=self._attempts,
            timeout_s=self._timeout_s,
            backoff_base_s=backoff_base_s,
            backoff_max_s=backoff_max_s,
            is_transient=lambda exc: is_transient(exc) or isinstance(exc, transient),
            server_delay=server_delay,
        )
        self._tracer = trace.get_tracer("memoria.llm", tracer_provider=tracer_provider)
        # pydantic-ai's spans of each request and agent run, under ours; no prompt text in them.
        self._instrument = InstrumentationSettings(
            tracer_provider=tracer_provider, include_content=False
        )

    @abstractmethod
    def _model(self, name: str, request: LLMRequest) -> Model:
        """The pydantic-ai model answering ``request`` as ``name``, its requests
        :class:`Retried`."""

    def _messages(self, request: LLMRequest, instruction: str = "") -> list[ModelMessage]:
        return model_messages(request.prompt, instruction)

    # -- the text modes ------------------------------------------------------------------------

    async def reasoning_heavy(self, request: LLMRequest, choices: Sequence[str]) -> str:
        model = self.label(Mode.REASONING_HEAVY)
        with self._span("llm.reasoning_heavy", model, request) as span:
            return await self._decide(span, model, request, choices)

    async def _decide(
        self, span: Span, model: str, request: LLMRequest, choices: Sequence[str]
    ) -> str:
        """The answer as it comes, in the API's structured-output mode; no re-ask (callers
        validate the name and re-ask themselves)."""
        chat_model, messages = self._model(model, request), self._messages(request)
        response = await self._request(span, chat_model, messages, action_output(choices))
        return action_name(response_text(response))

    async def reasoning(self, request: LLMRequest, schema: type[T]) -> T:
        model = self.label(Mode.REASONING)
        with self._span("llm.reasoning", model, request) as span:
            # ``strict`` stays off: OpenAI's strict mode rejects optional fields and defaults.
            output = NativeOutput(schema, strict=False)
            chat_model, messages = self._model(model, request), self._messages(request)
            result: T = await self._validated(span, chat_model, messages, output, schema)
            return result

    async def chat(self, request: LLMRequest) -> AsyncIterator[str]:
        model = self.chat_model(request)
        span = self._tracer.start_span("llm.chat", attributes=self._attributes(model, request))
        stream = TextStream()
        try:
            yield await self._open_chat(model, request, stream)
            while (
                piece := await self._policy.piece(stream.next_piece, self._translator(model))
            ) is not None:
                yield piece
        except Exception as exc:
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, str(exc)))
            raise
        finally:
            # Also for a stream that failed or was left early: what it counted was spent.
            await stream.close()
            record(span, model, stream.counts)
            span.end()

    async def _open_chat(self, model: str, request: LLMRequest, stream: TextStream) -> str:
        """Open ``stream`` and return its first piece."""
        chat_model, messages = self._model(model, request), self._messages(request)
        return await self._call(model, lambda: stream.open(chat_model, messages))

    # -- requests ------------------------------------------------------------------------------

    async def _request(
        self,
        span: Span,
        chat_model: Model,
        messages: list[ModelMessage],
        output: ModelRequestParameters,
    ) -> ModelResponse:
        response = await model_request(
            chat_model, messages, model_request_parameters=output, instrument=self._instrument
        )
        record(span, chat_model.model_name, [response.usage])
        return response

    async def _validated(
        self,
        span: Span,
        chat_model: Model,
        messages: list[ModelMessage],
        output: OutputSpec[Any],
        schema: type[Any],
    ) -> Any:
        """An answer validated into ``output`` by pydantic-ai's agent loop, which re-asks with
        the validation errors: at most ``llm_retries`` answers, every one reported."""
        agent = Agent(
            chat_model,
            retries={"output": self._attempts - 1},
            capabilities=[Instrumentation(self._instrument)],
        )
        model = chat_model.model_name
        with capture() as run:
            try:
                return (await agent.run(message_history=messages, output_type=output)).output
            except ai.UnexpectedModelBehavior as exc:
                why = str(exc.__cause__ or exc).replace("\n", " ")
                raise LLMOutputError(
                    f"{model} gave no valid {schema.__name__} in {self._attempts} attempts: {why}"
                ) from exc
            finally:
                answers = [m.usage for m in run[len(messages) :] if isinstance(m, ModelResponse)]
                record(span, model, answers)

    async def _call(self, model: str, send: Callable[[], Awaitable[R]]) -> R:
        """One API request under the retry policy, its failures in the port's errors."""
        return await self._policy.call(send, self._translator(model))

    def _translator(self, model: str) -> Callable[[BaseException, int], LLMError | None]:
        return lambda exc, attempts: self._translate(exc, model, attempts)

    def _translate(self, exc: BaseException, model: str, attempts: int) -> LLMError | None:
        """The port's error for a failure, or None to let it propagate."""
        tries = f"{attempts} attempt{'s' if attempts != 1 else ''}"
        if isinstance(exc, (TimeoutError, ai.ModelTimeoutError)):
            return LLMTimeout(f"{model} did not answer within {self._timeout_s:g}s ({tries})")
        if isinstance(exc, ai.ModelHTTPError):
            detail = f"HTTP {exc.status_code}: {server_message(exc)}"
            if is_transient(exc):
                return LLMUnavailable(f"{model} is unavailable, {detail} ({tries})")
            return self._refused(exc, f"{model} refused the request, {detail}")
        if isinstance(exc, ai.ModelConnectionError):
            return LLMUnavailable(f"{model} is unreachable: {exc.__cause__ or exc!r} ({tries})")
        if isinstance(exc, ai.UnexpectedModelBehavior) and NO_CONTENT in exc.message:
            return LLMOutputError(f"{model} streamed no text")
        if self._policy.is_transient(exc):
            return LLMUnavailable(f"{model} failed while answering ({tries}): {exc}")
        return None

    def _refused(self, exc: ai.ModelHTTPError, message: str) -> LLMError:
        """The error for a request the server refused (a 4xx asking again cannot fix)."""
        return LLMUnavailable(message)

    # -- spans and vectors ---------------------------------------------------------------------

    @contextmanager
    def _span(self, name: str, model: str, request: LLMRequest | None) -> Iterator[Span]:
        attributes = self._attributes(model, request)
        with self._tracer.start_as_current_span(name, attributes=attributes) as span:
            yield span

    def _attributes(self, model: str, request: LLMRequest | None) -> dict[str, str]:
        attributes = {"gen_ai.system": self.system, "gen_ai.request.model": model}
        return attributes | ({"memoria.llm.task": request.task} if request else {})

    def _unit(self, values: object, model: str) -> list[float]:
        """A unit-length copy of one embedding (cosine search expects unit length; providers
        differ on normalising), checked against the dimension the store was made for."""
        if not isinstance(values, list) or not all(isinstance(v, (int, float)) for v in values):
            raise LLMOutputError(f"{model} returned an embedding that is not a list of numbers")
        if len(values) != self._dim:
            raise LLMOutputError(
                f"{model} returns embeddings of {len(values)} dimensions but "
                f"MEMORIA_EMBEDDING_DIM is {self._dim}: set MEMORIA_EMBEDDING_DIM={len(values)}"
            )
        norm = math.sqrt(math.fsum(value * value for value in values))
        if norm == 0.0 or not math.isfinite(norm):
            raise LLMOutputError(f"{model} returned an embedding that cannot be normalised")
        return [value / norm for value in values]

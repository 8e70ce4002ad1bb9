"""The port's modes on a pydantic-ai model: Gemini's, OpenAI's, and the scripted model's.

pydantic-ai maps prompts to each API, asks for structured output, reads answers, usage and
errors, and runs ``reasoning`` as its agent loop (validation, re-asks with the errors); its
instrumentation adds a span per request under ours. Ours (ADR 24): the retry policy, errors
in the port's words, chat streams re-opened until their first piece and timed per piece, our
spans with the task and the call's usage, usage to the collector, unit-length embeddings.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from abc import abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import AsyncExitStack, contextmanager
from functools import partial
from typing import Any, TypedDict, TypeVar

import tenacity
from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode
from pydantic_ai import Agent, InstrumentationSettings, RetryFeedbackPart, RetryInfo
from pydantic_ai import capture_run_messages as capture
from pydantic_ai import exceptions as ai
from pydantic_ai import messages as msg
from pydantic_ai.capabilities import Instrumentation
from pydantic_ai.direct import model_request, model_request_stream
from pydantic_ai.models import Model, ModelRequestParameters, StreamedResponse
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.output import NativeOutput, OutputSpec
from pydantic_ai.settings import ModelSettings
from pydantic_ai.usage import RequestUsage

from memoria_llm import port, usage
from memoria_llm.config import RemoteConfig
from memoria_llm.model_messages import action_name, action_output, model_messages

R = TypeVar("R")
Embed = Callable[[list[str]], Awaitable[tuple[list[Any], int | None]]]
"""One batch of texts → its vectors and the input tokens the API counted, if it did."""

BACKOFF_BASE_S = 1.0
BACKOFF_MAX_S = 30.0
RETRY_CLIENT_CODES = frozenset({408, 429})  # the only 4xx that asking again can fix
SERVER_MESSAGE_CHARS = 500
NO_CONTENT = "ended without content"  # pydantic-ai's word for a stream that carried no answer
REASK = RetryFeedbackPart(content=[], retry=RetryInfo("validation_error")).model_response()
"""What a re-ask tells the model before the validation errors (pydantic-ai's words)."""

log = logging.getLogger("memoria.llm")


def is_transient(exc: BaseException) -> bool:
    """408, 429, 5xx, a timeout, a broken connection or stream, an unreadable body."""
    if isinstance(exc, ai.ModelHTTPError):
        return exc.status_code in RETRY_CLIENT_CODES or exc.status_code >= 500
    if isinstance(exc, ai.UnexpectedModelBehavior):
        return NO_CONTENT not in exc.message
    return isinstance(exc, (TimeoutError, ai.ModelAPIError, json.JSONDecodeError))


def server_message(exc: ai.ModelHTTPError) -> str:
    """The server's own words: ``error.message`` (under ``error`` from Gemini), ``message``
    (vLLM) or ``detail``, or a plain-text body."""
    body: object = exc.body
    for key in ("error", "message", "detail"):
        if isinstance(body, dict) and body.get(key):
            body = body[key]
    text = (json.dumps(body) if isinstance(body, dict) else str(body or "")).strip()
    return (text or exc.message)[:SERVER_MESSAGE_CHARS]


def record(span: Span, model: str, counts: Sequence[RequestUsage]) -> None:
    """Each response's usage to whoever collects it, their sum on ``span``."""
    counts = [c for c in counts if c.input_tokens or c.output_tokens]
    if counts:
        tokens_in = sum(c.input_tokens for c in counts)
        tokens_out = sum(c.output_tokens for c in counts)
        span.set_attribute("gen_ai.usage.input_tokens", tokens_in)
        span.set_attribute("gen_ai.usage.output_tokens", tokens_out)
        span.set_attribute("gen_ai.usage.total_tokens", tokens_in + tokens_out)
    for c in counts:
        usage.report(usage.Usage(model, c.input_tokens, c.output_tokens))


class Retried(WrapperModel):
    """A model whose every request, the agent loop's too, goes through ``call``."""

    def __init__(self, wrapped: Model, call: Callable[[Callable[[], Awaitable[Any]]], Any]):
        super().__init__(wrapped)
        self._call = call

    async def request(self, *args: Any, **kwargs: Any) -> msg.ModelResponse:
        response: msg.ModelResponse = await self._call(
            lambda: self.wrapped.request(*args, **kwargs)
        )
        return response


class TextStream:
    """One chat answer as text. :meth:`open` may be called again (a retry) until it returns;
    every opened attempt's usage is kept, since each was paid for."""

    def __init__(self) -> None:
        self._exit = AsyncExitStack()
        self._response: StreamedResponse | None = None
        self._events: AsyncIterator[msg.ModelResponseStreamEvent] | None = None
        self.counts: list[RequestUsage] = []

    async def open(
        self, model: Model, messages: list[msg.ModelMessage], settings: ModelSettings | None = None
    ) -> str:
        """Open the stream up to its first piece, so a failure before it can be retried."""
        await self.close()
        opening = model_request_stream(model, messages, model_settings=settings)
        self._response = await self._exit.enter_async_context(opening)
        self._events = aiter(self._response)
        if (first := await self.next_piece()) is None:
            raise port.LLMOutputError(f"{model.model_name} streamed no text")
        return first

    async def next_piece(self) -> str | None:
        """The next non-empty piece of the answer's text (not of the model's thinking)."""
        assert self._events is not None
        async for event in self._events:
            text = ""
            if isinstance(event, msg.PartStartEvent) and isinstance(event.part, msg.TextPart):
                text = event.part.content
            elif isinstance(event, msg.PartDeltaEvent) and isinstance(
                event.delta, msg.TextPartDelta
            ):
                text = event.delta.content_delta
            if text:
                return text
        return None

    async def close(self) -> None:
        if self._response is not None:
            self.counts.append(self._response.usage)
            self._response = None
        await self._exit.aclose()
        self._exit = AsyncExitStack()


class Options(TypedDict, total=False):
    """How a provider waits between tries, and where its spans go (tests shorten the waits)."""

    backoff_base_s: float
    backoff_max_s: float
    tracer_provider: trace.TracerProvider | None


class RemoteModel(port.LanguageModel):
    """Each request is tried ``llm_retries`` times, each attempt (and each streamed piece)
    within ``llm_timeout_seconds``: a transient failure is retried after an exponential
    backoff with jitter that never waits less than the server asked (``server_delay``).
    Subclasses build the model answering a request (``_model``)."""

    system: str
    """``gen_ai.system`` on our spans."""
    transient: tuple[type[BaseException], ...] = ()
    """The provider SDK's own errors that are worth retrying, beside :func:`is_transient`."""

    def __init__(
        self,
        config: RemoteConfig,
        *,
        backoff_base_s: float = BACKOFF_BASE_S,
        backoff_max_s: float = BACKOFF_MAX_S,
        tracer_provider: trace.TracerProvider | None = None,
    ) -> None:
        self._timeout_s = config.llm_timeout_seconds
        self._attempts = max(1, config.llm_retries)
        self._dim = config.embedding_dim
        self._backoff = tenacity.wait_exponential_jitter(
            initial=backoff_base_s, max=backoff_max_s, jitter=backoff_base_s
        )
        self._backoff_max_s = backoff_max_s
        self._tracer = trace.get_tracer("memoria.llm", tracer_provider=tracer_provider)
        # pydantic-ai's spans of each request and run, under ours; no prompt text in them.
        self._instrument = InstrumentationSettings(
            tracer_provider=tracer_provider, include_content=False
        )
        self._agents: dict[tuple[type, type], Agent[None, Any]] = {}

    @staticmethod
    def server_delay(exc: BaseException | None) -> float:
        """The seconds the server asked to wait before asking again (in ``exc``), else 0."""
        return 0.0

    @abstractmethod
    def _model(self, name: str, request: port.LLMRequest) -> Model:
        """The model answering ``request`` as ``name``, its requests :class:`Retried`."""

    def _messages(self, request: port.LLMRequest, instruction: str = "") -> list[msg.ModelMessage]:
        return model_messages(request.prompt, instruction)

    async def reasoning_heavy(self, request: port.LLMRequest, choices: Sequence[str]) -> str:
        model = self.label(port.Mode.REASONING_HEAVY)
        with self._span("llm.reasoning_heavy", model, request) as span:
            return await self._decide(span, model, request, choices)

    async def _decide(
        self, span: Span, model: str, request: port.LLMRequest, choices: Sequence[str]
    ) -> str:
        """The answer as it comes (callers validate the name and re-ask themselves)."""
        chat_model, messages = self._model(model, request), self._messages(request)
        response = await self._request(span, chat_model, messages, action_output(choices))
        return action_name(response)

    async def reasoning(self, request: port.LLMRequest, schema: type[port.T]) -> port.T:
        model = self.label(port.Mode.REASONING)
        with self._span("llm.reasoning", model, request) as span:
            return await self._structured(span, model, request, schema)

    async def _structured(
        self, span: Span, model: str, request: port.LLMRequest, schema: type[port.T]
    ) -> port.T:
        # ``strict`` stays off: OpenAI's strict mode rejects optional fields and defaults.
        output = NativeOutput(schema, strict=False)
        chat_model, messages = self._model(model, request), self._messages(request)
        result: port.T = await self._validated(span, chat_model, messages, output, schema)
        return result

    async def chat(self, request: port.LLMRequest) -> AsyncIterator[str]:
        model = self.chat_model(request)
        span = self._tracer.start_span("llm.chat", attributes=self._attributes(model, request))
        stream = TextStream()
        try:
            yield await self._open_chat(model, request, stream)
            while (piece := await self._piece(model, stream)) is not None:
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

    async def _open_chat(self, model: str, request: port.LLMRequest, stream: TextStream) -> str:
        chat_model, messages = self._model(model, request), self._messages(request)
        return await self._call(model, lambda: stream.open(chat_model, messages))

    async def _piece(self, model: str, stream: TextStream) -> str | None:
        """The next piece of an open stream within the per-attempt timeout. Not retried: the
        pieces already yielded cannot be taken back."""
        try:
            async with asyncio.timeout(self._timeout_s):
                return await stream.next_piece()
        except Exception as exc:
            if (error := self._translate(exc, model, 1)) is None:
                raise
            raise error from exc

    async def _request(
        self,
        span: Span,
        chat_model: Model,
        messages: list[msg.ModelMessage],
        output: ModelRequestParameters,
    ) -> msg.ModelResponse:
        response = await model_request(
            chat_model, messages, model_request_parameters=output, instrument=self._instrument
        )
        record(span, chat_model.model_name, [response.usage])
        return response

    async def _validated(
        self,
        span: Span,
        chat_model: Model,
        messages: list[msg.ModelMessage],
        output: OutputSpec[Any],
        schema: type[Any],
    ) -> Any:
        """An answer validated into ``output`` by pydantic-ai's agent loop, re-asked with the
        validation errors: at most ``llm_retries`` answers, each one reported."""
        agent = self._agent(output, schema)
        model = chat_model.model_name
        with capture() as run:
            try:
                return (await agent.run(message_history=messages, model=chat_model)).output
            except ai.UnexpectedModelBehavior as exc:
                why = str(exc.__cause__ or exc).replace("\n", " ")
                raise port.LLMOutputError(
                    f"{model} gave no valid {schema.__name__} in {self._attempts} attempts: {why}"
                ) from exc
            finally:
                answers = run[len(messages) :]
                record(span, model, [m.usage for m in answers if isinstance(m, msg.ModelResponse)])

    def _agent(self, output: OutputSpec[Any], schema: type[Any]) -> Agent[None, Any]:
        """The agent validating answers into ``schema`` as ``output`` asks, built once: building
        one works out its output's JSON schema, which costs more CPU than the rest of a call."""
        key = (type(output), schema)
        if (agent := self._agents.get(key)) is None:
            agent = Agent(
                output_type=output,
                retries={"output": self._attempts - 1},
                capabilities=[Instrumentation(self._instrument)],
            )
            self._agents[key] = agent
        return agent

    async def _embedded(
        self, model: str, texts: Sequence[str], batch_max: int, embed: Embed
    ) -> list[list[float]]:
        """``texts`` embedded in batches, each vector checked and made unit length."""
        vectors: list[list[float]] = []
        counts: list[RequestUsage] = []
        with self._span("llm.embedding", model, None) as span:
            span.set_attribute("memoria.llm.texts", len(texts))
            try:
                for start in range(0, len(texts), batch_max):
                    batch = list(texts[start : start + batch_max])
                    got, tokens = await self._call(model, partial(embed, batch))
                    counts.extend([RequestUsage(input_tokens=tokens)] if tokens else [])
                    if len(got) != len(batch):
                        raise port.LLMOutputError(
                            f"{model} returned {len(got)} of {len(batch)} vectors"
                        )
                    vectors.extend(self._unit(values, model) for values in got)
            finally:
                record(span, model, counts)
        return vectors

    async def _call(self, model: str, send: Callable[[], Awaitable[R]]) -> R:
        """One API request under the retry policy, its failures in the port's errors."""
        attempts = 0
        try:
            async for attempt in tenacity.AsyncRetrying(
                stop=tenacity.stop_after_attempt(self._attempts),
                wait=self._wait,
                retry=tenacity.retry_if_exception(self._transient),
                before_sleep=tenacity.before_sleep_log(log, logging.WARNING),
                reraise=True,
            ):
                with attempt:
                    attempts = attempt.retry_state.attempt_number
                    async with asyncio.timeout(self._timeout_s):
                        return await send()
        except port.LLMError:
            raise
        except Exception as exc:
            if (error := self._translate(exc, model, attempts)) is None:
                raise
            raise error from exc
        raise AssertionError("tenacity re-raises the last failure")

    def _wait(self, state: tenacity.RetryCallState) -> float:
        failure = state.outcome.exception() if state.outcome else None
        return min(self._backoff_max_s, max(self._backoff(state), self.server_delay(failure)))

    def _transient(self, exc: BaseException) -> bool:
        return is_transient(exc) or isinstance(exc, self.transient)

    def _translate(self, exc: BaseException, model: str, attempts: int) -> port.LLMError | None:
        """The port's error for a failure, or None to let it propagate."""
        tries = f"{attempts} attempt{'s' if attempts != 1 else ''}"
        if isinstance(exc, (TimeoutError, ai.ModelTimeoutError)):
            return port.LLMTimeout(f"{model} did not answer within {self._timeout_s:g}s ({tries})")
        if isinstance(exc, ai.ModelHTTPError):
            detail = f"HTTP {exc.status_code}: {server_message(exc)}"
            if is_transient(exc):
                return port.LLMUnavailable(f"{model} is unavailable, {detail} ({tries})")
            return self._refused(exc, f"{model} refused the request, {detail}")
        if isinstance(exc, ai.ModelConnectionError):
            return port.LLMUnavailable(
                f"{model} is unreachable: {exc.__cause__ or exc!r} ({tries})"
            )
        if isinstance(exc, ai.UnexpectedModelBehavior) and NO_CONTENT in exc.message:
            return port.LLMOutputError(f"{model} streamed no text")
        if self._transient(exc):
            return port.LLMUnavailable(f"{model} failed while answering ({tries}): {exc}")
        return None

    def _refused(self, exc: ai.ModelHTTPError, message: str) -> port.LLMError:
        """The error for a request the server refused (a 4xx asking again cannot fix)."""
        return port.LLMUnavailable(message)

    @contextmanager
    def _span(self, name: str, model: str, request: port.LLMRequest | None) -> Iterator[Span]:
        attributes = self._attributes(model, request)
        with self._tracer.start_as_current_span(name, attributes=attributes) as span:
            yield span

    def _attributes(self, model: str, request: port.LLMRequest | None) -> dict[str, str]:
        attributes = {"gen_ai.system": self.system, "gen_ai.request.model": model}
        return attributes | ({"memoria.llm.task": request.task} if request else {})

    def _unit(self, values: object, model: str) -> list[float]:
        """A unit-length copy of one embedding (cosine search expects unit length; providers
        differ on normalising), checked against the dimension the store was made for."""
        if not isinstance(values, list) or not all(isinstance(v, (int, float)) for v in values):
            raise port.LLMOutputError(
                f"{model} returned an embedding that is not a list of numbers"
            )
        if len(values) != self._dim:
            raise port.LLMOutputError(
                f"{model} returns embeddings of {len(values)} dimensions but "
                f"MEMORIA_EMBEDDING_DIM is {self._dim}: set MEMORIA_EMBEDDING_DIM={len(values)}"
            )
        norm = math.sqrt(math.fsum(value * value for value in values))
        if norm == 0.0 or not math.isfinite(norm):
            raise port.LLMOutputError(f"{model} returned an embedding that cannot be normalised")
        return [value / norm for value in values]

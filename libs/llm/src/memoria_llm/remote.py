"""What both remote providers do around pydantic-ai's model requests: every call under one
retry policy, re-asks with the validation problem, usage on spans and to the collector,
chat streams that can be re-opened until their first piece, and unit-length embeddings."""

from __future__ import annotations

import math
from abc import abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from typing import TypeVar

from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode
from pydantic import ValidationError
from pydantic_ai.direct import model_request_stream
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    PartDeltaEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
    UserPromptPart,
)
from pydantic_ai.models import Model, StreamedResponse
from pydantic_ai.usage import RequestUsage

from memoria_llm import usage
from memoria_llm.config import RemoteConfig
from memoria_llm.port import LanguageModel, LLMError, LLMOutputError, LLMRequest, Prompt
from memoria_llm.retrying import CallPolicy
from memoria_llm.tracing import LLMTracer

R = TypeVar("R")

BACKOFF_BASE_S = 1.0
BACKOFF_MAX_S = 30.0

REASK_ERROR_CHARS = 600
REASK = (
    "That answer does not match the required JSON schema ({problem}). "
    "Answer again with JSON only, matching the schema exactly."
)


def problem(exc: ValidationError) -> str:
    parts = [
        f"{'.'.join(map(str, error['loc'])) or 'answer'}: {error['msg']}"
        for error in exc.errors(include_input=False)
    ]
    return "; ".join(parts)[:REASK_ERROR_CHARS]


def reasked(messages: list[ModelMessage], answer: str, why: str) -> list[ModelMessage]:
    """The conversation with the invalid answer and the ask to answer again."""
    reask = UserPromptPart(content=REASK.format(problem=why))
    return [*messages, ModelResponse(parts=[TextPart(content=answer)]), ModelRequest([reask])]


def count(span: Span, model: str, counts: Sequence[RequestUsage]) -> None:
    """Record the sum of ``counts`` (a call's responses, re-asks included) on ``span``, and
    report the last one to whoever collects usage. A response without counts adds nothing."""
    if not counts or not (counts[-1].input_tokens or counts[-1].output_tokens):
        return
    input_tokens = sum(c.input_tokens for c in counts)
    output_tokens = sum(c.output_tokens for c in counts)
    span.set_attribute("gen_ai.usage.input_tokens", input_tokens)
    span.set_attribute("gen_ai.usage.output_tokens", output_tokens)
    span.set_attribute("gen_ai.usage.total_tokens", input_tokens + output_tokens)
    usage.report(usage.Usage(model, counts[-1].input_tokens, counts[-1].output_tokens))


class TextStream:
    """One chat answer streamed as text. :meth:`open` may be called again (a retry) until it
    returns; the usage of every opened attempt is kept, since each was paid for."""

    def __init__(self) -> None:
        self._exit = AsyncExitStack()
        self._response: StreamedResponse | None = None
        self._events: AsyncIterator[object] | None = None
        self.counts: list[RequestUsage] = []

    async def open(self, model: Model, messages: list[ModelMessage]) -> str:
        """Open the stream and read up to its first piece of text, so failures before
        anything reached the caller can be retried."""
        await self.close()
        self._response = await self._exit.enter_async_context(model_request_stream(model, messages))
        self._events = aiter(self._response)
        first = await self.next_piece()
        if first is None:
            raise LLMOutputError(f"{model.model_name} streamed no text")
        return first

    async def next_piece(self) -> str | None:
        """The next non-empty piece of the answer's text (not of the model's thinking);
        None at the end."""
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
    """A provider that calls a remote API: ``llm_retries`` attempts per call with backoff,
    ``llm_timeout_seconds`` per attempt (and per streamed piece), failures in the port's
    errors. Subclasses say which failures are transient, how long a server asks to wait
    (``is_transient``, ``server_delay``), and how a failure reads (``_translate``)."""

    def __init__(
        self,
        system: str,
        config: RemoteConfig,
        *,
        backoff_base_s: float,
        backoff_max_s: float,
        tracer_provider: trace.TracerProvider | None,
        is_transient: Callable[[BaseException], bool],
        server_delay: Callable[[BaseException | None], float],
    ) -> None:
        self._timeout_s = config.llm_timeout_seconds
        self._attempts = max(1, config.llm_retries)
        self._dim = config.embedding_dim
        self._policy = CallPolicy(
            attempts=self._attempts,
            timeout_s=self._timeout_s,
            backoff_base_s=backoff_base_s,
            backoff_max_s=backoff_max_s,
            is_transient=is_transient,
            server_delay=server_delay,
        )
        self._tracing = LLMTracer(system, tracer_provider)

    @abstractmethod
    def _translate(self, exc: BaseException, model: str, attempts: int) -> LLMError | None:
        """The port's error for a failure, or None to let it propagate."""

    @abstractmethod
    async def _open_chat(self, model: str, prompt: Prompt, stream: TextStream) -> str:
        """Open ``stream`` (under :meth:`_call`) and return its first piece."""

    async def _call(self, model: str, send: Callable[[], Awaitable[R]]) -> R:
        """One API call: a timeout per attempt, retries on transient failures, and every
        failure turned into the port's errors."""
        return await self._policy.call(
            send, lambda exc, attempts: self._translate(exc, model, attempts)
        )

    async def chat(self, request: LLMRequest) -> AsyncIterator[str]:
        model = self.chat_model(request)
        span = self._tracing.start_span("llm.chat", model, request)
        stream = TextStream()
        try:
            yield await self._open_chat(model, request.prompt, stream)
            while True:
                piece = await self._policy.piece(
                    stream.next_piece,
                    lambda exc, attempts: self._translate(exc, model, attempts),
                )
                if piece is None:
                    return
                yield piece
        except Exception as exc:
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, str(exc)))
            raise
        finally:
            # Also for a stream that failed or was left early: what it counted was spent.
            await stream.close()
            count(span, model, stream.counts)
            span.end()

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

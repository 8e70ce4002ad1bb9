"""What both remote providers do around pydantic-ai's model requests: re-asks with the
validation problem, usage on spans and to the collector, and streams of answer text that
can be re-opened until their first piece."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack

from opentelemetry.trace import Span
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
from memoria_llm.port import LLMOutputError

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

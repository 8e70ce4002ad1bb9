"""What only the Gemini adapter promises, checked with the real SDK against the local fake:
retries and their limits, re-asks, timeouts, streaming, the requests it sends and the token
usage it records. The behaviours every provider shares are in ``test_llm.py``."""

from __future__ import annotations

import base64
import dataclasses
import json
import sys
import time
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from google.genai import errors
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from pydantic import BaseModel

from memoria_llm import usage as llm_usage
from memoria_llm.config import GeminiConfig
from memoria_llm.conversation import conversation as history_conversation
from memoria_llm.gemini import GeminiModel, _server_delay
from memoria_llm.port import (
    LLMOutputError,
    LLMRequest,
    LLMTimeout,
    LLMUnavailable,
    Mode,
    Prompt,
    PromptMessage,
)
from memoria_llm.remote import REASK
from memoria_offline.selection import language_model
from memoria_runtime.settings import Settings

sys.path.insert(0, str(Path(__file__).parent.parent / "support"))
from fake_gemini import (
    FUNCTION_CALL_ORDER,
    FUNCTION_RESPONSE_ALONE,
    FUNCTION_RESPONSE_COUNT,
    Embed,
    Fail,
    FakeGemini,
    Hang,
    Raw,
    RecordedRequest,
    Reply,
    Stream,
    Usage,
    _function_turns_problem,
    bad_api_key,
    rate_limited,
    reply_json,
)
from stack import free_port
from tool_history import request_with_tool_history, thread, user

API_KEY = "test-key"
SYSTEM = "You are Memoria, a chat assistant with long-term memory."
EMBED_DIM = 16
TEST_BACKOFF_S = 0.01
CHOICES = ["MemorySearch", "Finalize"]
GENEROUS_S = 10.0  # upper bound for "fails fast"; only ever exceeded by a real hang


class Answer(BaseModel):
    title: str
    count: int


class Tagged(BaseModel):
    """Maps are beyond the OpenAPI schema subset, so this goes as JSON Schema."""

    tags: dict[str, str]


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeGemini]:
    with FakeGemini(api_keys=[API_KEY]) as server:
        yield server


@pytest.fixture(autouse=True)
def fresh(fake: FakeGemini) -> None:
    fake.reset()


@pytest.fixture
def spans() -> InMemorySpanExporter:
    return InMemorySpanExporter()


def gemini_settings(base_url: str, **overrides: object) -> Settings:
    """Explicit values only: neither the environment nor a .env file leaks in."""
    values: dict[str, object] = {
        "gemini_api_key": API_KEY,
        "gemini_base_url": base_url,
        "model_reasoning_heavy": "gemini-2.5-pro",
        "model_reasoning": "gemini-2.5-flash",
        "model_chat": "gemini-2.5-flash",
        "model_embedding": "gemini-embedding-001",
        "embedding_dim": EMBED_DIM,
        "llm_retries": 3,
        "llm_timeout_seconds": 2.0,
        **overrides,
    }
    return Settings.load(_env_file=None, **values)


@pytest.fixture
async def make(fake: FakeGemini, spans: InMemorySpanExporter) -> AsyncIterator[Any]:
    """Build adapters against the fake, with fast backoff; closed after the test."""
    built: list[GeminiModel] = []
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))

    def build(**overrides: object) -> GeminiModel:
        model = GeminiModel(
            GeminiConfig.model_validate(
                gemini_settings(fake.base_url, **overrides).llm, from_attributes=True
            ),
            backoff_base_s=TEST_BACKOFF_S,
            backoff_max_s=TEST_BACKOFF_S,
            tracer_provider=provider,
        )
        built.append(model)
        return model

    yield build
    for model in built:
        await model.aclose()


@pytest.fixture
def gemini(make: Any) -> GeminiModel:
    model: GeminiModel = make()
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


# -- retries -----------------------------------------------------------------------------------


async def test_a_429_is_retried_and_the_call_succeeds(
    gemini: GeminiModel, fake: FakeGemini
) -> None:
    fake.enqueue(rate_limited("0.001s"), Reply("Finalize"))
    assert await gemini.reasoning_heavy(conversation(), CHOICES) == "Finalize"
    assert len(fake.requests) == 2


async def test_server_errors_give_up_after_the_configured_attempts(
    make: Any, fake: FakeGemini
) -> None:
    gemini: GeminiModel = make(llm_retries=3)
    fake.enqueue(*[Fail(500, "internal error")] * 5)
    with pytest.raises(LLMUnavailable) as caught:
        await gemini.reasoning_heavy(conversation(), CHOICES)
    assert not isinstance(caught.value, LLMTimeout)
    message = str(caught.value)
    assert "gemini-2.5-pro" in message
    assert "500" in message
    assert "3 attempts" in message
    assert len(fake.requests) == 3


async def test_a_bad_key_fails_at_once_with_the_api_message(make: Any, fake: FakeGemini) -> None:
    gemini: GeminiModel = make(gemini_api_key="not-the-key")
    start = time.monotonic()
    with pytest.raises(LLMUnavailable) as caught:
        await gemini.reasoning_heavy(conversation(), CHOICES)
    assert time.monotonic() - start < GENEROUS_S
    assert "API key not valid" in str(caught.value)
    assert "400" in str(caught.value)
    assert len(fake.requests) == 1


async def test_other_client_errors_are_not_retried(gemini: GeminiModel, fake: FakeGemini) -> None:
    fake.enqueue(Fail(404, "models/gemini-9 is not found", "NOT_FOUND"), Reply("Finalize"))
    with pytest.raises(LLMUnavailable, match="not found"):
        await gemini.reasoning_heavy(conversation(), CHOICES)
    assert len(fake.requests) == 1


async def test_an_unreadable_body_is_retried(gemini: GeminiModel, fake: FakeGemini) -> None:
    fake.enqueue(Raw("<html>proxy hiccup</html>", 200, "text/html"), Reply("Finalize"))
    assert await gemini.reasoning_heavy(conversation(), CHOICES) == "Finalize"
    assert len(fake.requests) == 2


async def test_an_unreachable_server_is_unavailable_after_retries(make: Any) -> None:
    gemini: GeminiModel = make(gemini_base_url=f"http://127.0.0.1:{free_port()}", llm_retries=2)
    with pytest.raises(LLMUnavailable, match="unreachable"):
        await gemini.reasoning_heavy(conversation(), CHOICES)


async def test_embedding_on_an_unreachable_server_is_unavailable_after_retries(
    make: Any,
) -> None:
    gemini: GeminiModel = make(gemini_base_url=f"http://127.0.0.1:{free_port()}", llm_retries=2)
    with pytest.raises(LLMUnavailable, match="unreachable"):
        await gemini.embedding(["hello"], "passage")


def test_the_wait_a_429_asks_for_is_read() -> None:
    body = rate_limited("37s").as_json()
    assert _server_delay(errors.ClientError(429, body)) == 37.0
    assert _server_delay(errors.ServerError(503, Fail(503).as_json())) == 0.0
    assert _server_delay(None) == 0.0


# -- structured output -------------------------------------------------------------------------


async def test_malformed_json_is_re_asked_then_accepted(
    gemini: GeminiModel, fake: FakeGemini
) -> None:
    fake.enqueue(Reply('{"title": "Tea", "count": '), reply_json({"title": "Tea", "count": 2}))
    assert await gemini.reasoning(conversation(), Answer) == Answer(title="Tea", count=2)
    first, second = fake.requests
    assert len(second.body["contents"]) == len(first.body["contents"]) + 2
    bad_turn, reask_turn = second.body["contents"][-2:]
    assert bad_turn == {"role": "model", "parts": [{"text": '{"title": "Tea", "count": '}]}
    assert reask_turn["role"] == "user"
    assert REASK.split("(")[0] in reask_turn["parts"][0]["text"]


async def test_a_schema_violation_is_re_asked(gemini: GeminiModel, fake: FakeGemini) -> None:
    fake.enqueue(reply_json({"title": "Tea"}), reply_json({"title": "Tea", "count": 1}))
    assert await gemini.reasoning(conversation(), Answer) == Answer(title="Tea", count=1)
    assert "count" in fake.requests[1].body["contents"][-1]["parts"][0]["text"]


async def test_always_invalid_output_is_an_output_error(make: Any, fake: FakeGemini) -> None:
    gemini: GeminiModel = make(llm_retries=2)
    fake.enqueue(*[Reply("not json at all")] * 3)
    with pytest.raises(LLMOutputError, match="Answer"):
        await gemini.reasoning(conversation(), Answer)
    assert len(fake.requests) == 2
    assert fake.pending == 1


async def test_schemas_beyond_the_openapi_subset_go_as_json_schema(
    gemini: GeminiModel, fake: FakeGemini
) -> None:
    fake.enqueue(reply_json({"tags": {"drink": "tea"}}))
    assert await gemini.reasoning(conversation(), Tagged) == Tagged(tags={"drink": "tea"})
    config = fake.requests[0].body["generationConfig"]
    assert config["responseMimeType"] == "application/json"
    assert "responseSchema" not in config
    assert config["responseJsonSchema"]["properties"]["tags"]["additionalProperties"]


# -- timeouts ----------------------------------------------------------------------------------


async def test_a_hung_call_times_out(make: Any, fake: FakeGemini) -> None:
    gemini: GeminiModel = make(llm_timeout_seconds=0.5, llm_retries=1)
    fake.enqueue(Hang(30))
    start = time.monotonic()
    with pytest.raises(LLMTimeout, match=r"gemini-2\.5-pro did not answer within 0\.5s"):
        await gemini.reasoning_heavy(conversation(), CHOICES)
    assert time.monotonic() - start < GENEROUS_S


async def test_a_timeout_is_retried_like_any_transient_failure(make: Any, fake: FakeGemini) -> None:
    gemini: GeminiModel = make(llm_timeout_seconds=0.5, llm_retries=2)
    fake.enqueue(Hang(30), Reply("Finalize"))
    assert await gemini.reasoning_heavy(conversation(), CHOICES) == "Finalize"
    assert len(fake.requests) == 2


# -- streaming ---------------------------------------------------------------------------------


async def test_a_slow_stream_yields_pieces_as_they_arrive(
    gemini: GeminiModel, fake: FakeGemini
) -> None:
    chunks = ["Green ", "tea, ", "noted."]
    fake.enqueue(Stream(chunks, delay_seconds=0.3))
    stream = gemini.chat(conversation())
    first = await anext(stream)
    assert first == "Green "
    assert fake.streamed_chunks < len(chunks)  # the fake is still writing the rest
    rest = await collect(stream)
    assert [first, *rest] == chunks


async def test_empty_chunks_are_skipped(gemini: GeminiModel, fake: FakeGemini) -> None:
    fake.enqueue(Stream(["", "Hello", "", " there"]))
    assert await collect(gemini.chat(conversation())) == ["Hello", " there"]


async def test_a_stream_failing_before_any_text_is_retried(
    gemini: GeminiModel, fake: FakeGemini
) -> None:
    fake.enqueue(Fail(503, "overloaded"), Stream([], error=Fail(500)), Reply("All good"))
    assert "".join(await collect(gemini.chat(conversation()))) == "All good"
    assert len(fake.requests) == 3


async def test_a_stream_failing_after_text_is_not_retried(
    gemini: GeminiModel, fake: FakeGemini
) -> None:
    fake.enqueue(Stream(["Half an "], error=Fail(503, "overloaded")), Reply("whole answer"))
    pieces: list[str] = []
    with pytest.raises(LLMUnavailable, match="503"):
        await drain(gemini.chat(conversation()), pieces)
    assert pieces == ["Half an "]
    assert len(fake.requests) == 1


async def test_a_stream_that_stalls_times_out(make: Any, fake: FakeGemini) -> None:
    gemini: GeminiModel = make(llm_timeout_seconds=0.5)
    fake.enqueue(Stream(["First ", "never"], delay_seconds=30))
    pieces: list[str] = []
    start = time.monotonic()
    with pytest.raises(LLMTimeout):
        await drain(gemini.chat(conversation()), pieces)
    assert time.monotonic() - start < GENEROUS_S
    assert pieces == ["First "]
    assert len(fake.requests) == 1


async def test_a_stream_without_text_is_an_output_error(
    gemini: GeminiModel, fake: FakeGemini
) -> None:
    fake.enqueue(Stream([""]))
    with pytest.raises(LLMOutputError):
        await collect(gemini.chat(conversation()))


# -- what is sent ------------------------------------------------------------------------------


def generation(request: RecordedRequest) -> dict[str, Any]:
    config: dict[str, Any] = request.body["generationConfig"]
    return config


async def test_reasoning_heavy_sends_the_prompt_and_asks_for_one_of_the_names(
    gemini: GeminiModel, fake: FakeGemini
) -> None:
    await gemini.reasoning_heavy(conversation(), CHOICES)
    (sent,) = fake.requests
    assert sent.method == "generateContent"
    assert sent.model == "gemini-2.5-pro"
    assert sent.headers["x-goog-api-key"] == API_KEY
    assert sent.body["systemInstruction"]["parts"] == [{"text": SYSTEM}]
    assert [content["role"] for content in sent.body["contents"]] == ["user", "model", "user"]
    assert sent.body["contents"][1]["parts"] == [{"text": "Hello Ana!"}]
    assert generation(sent)["responseMimeType"] == "application/json"
    action = generation(sent)["responseJsonSchema"]["properties"]["action"]
    assert action == {"type": "string", "enum": CHOICES}


async def test_an_answer_around_the_name_is_stripped(gemini: GeminiModel, fake: FakeGemini) -> None:
    fake.enqueue(Reply("  Finalize\n"))
    assert await gemini.reasoning_heavy(conversation(), CHOICES) == "Finalize"


async def test_reasoning_sends_json_mode_and_the_schema(
    gemini: GeminiModel, fake: FakeGemini
) -> None:
    fake.enqueue(reply_json({"title": "x", "count": 1}))
    await gemini.reasoning(conversation(), Answer)
    (sent,) = fake.requests
    assert sent.model == "gemini-2.5-flash"
    assert generation(sent)["responseMimeType"] == "application/json"
    schema = generation(sent)["responseJsonSchema"]
    assert schema["type"] == "object"
    assert set(schema["properties"]) == {"title", "count"}
    assert sent.body["systemInstruction"]["parts"] == [{"text": SYSTEM}]


async def test_chat_streams_over_sse_with_the_chat_model(
    gemini: GeminiModel, fake: FakeGemini
) -> None:
    await collect(gemini.chat(conversation()))
    (sent,) = fake.requests
    assert sent.method == "streamGenerateContent"
    assert sent.query.get("alt") == "sse"
    assert sent.model == "gemini-2.5-flash"
    assert "responseMimeType" not in sent.body.get("generationConfig", {})


async def test_chat_answers_with_a_sessions_chat_model(
    gemini: GeminiModel, fake: FakeGemini
) -> None:
    request = dataclasses.replace(conversation(), model="gemini-2.5-pro")
    await collect(gemini.chat(request))
    (sent,) = fake.requests
    assert sent.model == "gemini-2.5-pro"
    assert gemini.chat_model(request) == "gemini-2.5-pro"
    assert gemini.chat_model(conversation()) == "gemini-2.5-flash"


@pytest.mark.parametrize(
    ("purpose", "task_type"), [("passage", "RETRIEVAL_DOCUMENT"), ("query", "RETRIEVAL_QUERY")]
)
async def test_embedding_asks_for_the_dimension_and_task(
    gemini: GeminiModel, fake: FakeGemini, purpose: Any, task_type: str
) -> None:
    await gemini.embedding(["a", "b"], purpose)
    (sent,) = fake.requests
    assert sent.method == "batchEmbedContents"
    assert sent.model == "gemini-embedding-001"
    assert [item["outputDimensionality"] for item in sent.body["requests"]] == [EMBED_DIM] * 2
    assert {item["taskType"] for item in sent.body["requests"]} == {task_type}
    assert [item["content"]["parts"][0]["text"] for item in sent.body["requests"]] == ["a", "b"]


async def test_many_texts_are_embedded_in_batches(gemini: GeminiModel, fake: FakeGemini) -> None:
    texts = [f"memory {index}" for index in range(150)]
    vectors = await gemini.embedding(texts, "passage")
    assert len(vectors) == 150
    assert [len(sent.body["requests"]) for sent in fake.requests] == [100, 50]


async def test_a_vector_of_the_wrong_dimension_is_an_output_error(
    gemini: GeminiModel, fake: FakeGemini
) -> None:
    fake.enqueue(Embed(dimension=EMBED_DIM + 1))
    with pytest.raises(LLMOutputError, match="dimensions"):
        await gemini.embedding(["a"], "query")


async def test_the_base_url_setting_is_read_from_the_environment(
    fake: FakeGemini, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMORIA_LLM_PROVIDER", "auto")
    monkeypatch.setenv("GEMINI_API_KEY", API_KEY)
    monkeypatch.setenv("MEMORIA_GEMINI_BASE_URL", fake.base_url)
    monkeypatch.setenv("MEMORIA_MODEL_CHAT", "gemini-from-env")
    model = language_model(Settings.load(_env_file=None).llm)
    try:
        assert model.name == "gemini"
        assert model.label(Mode.CHAT) == "gemini-from-env"
        await collect(model.chat(conversation()))
    finally:
        await model.aclose()
    (sent,) = fake.requests
    assert sent.model == "gemini-from-env"
    assert sent.headers["x-goog-api-key"] == API_KEY


# -- telemetry ---------------------------------------------------------------------------------


async def test_token_usage_is_recorded_on_the_call_span(
    gemini: GeminiModel, fake: FakeGemini, spans: InMemorySpanExporter
) -> None:
    fake.enqueue(Reply("Finalize", usage=Usage(prompt=120, candidates=3)))
    await gemini.reasoning_heavy(conversation(), CHOICES)
    attributes = span_named(spans, "llm.reasoning_heavy").attributes or {}
    assert attributes["gen_ai.system"] == "gemini"
    assert attributes["gen_ai.request.model"] == "gemini-2.5-pro"
    assert attributes["gen_ai.usage.input_tokens"] == 120
    assert attributes["gen_ai.usage.output_tokens"] == 3
    assert attributes["gen_ai.usage.total_tokens"] == 123


async def test_a_stream_records_the_usage_of_its_last_chunk(
    gemini: GeminiModel, fake: FakeGemini, spans: InMemorySpanExporter
) -> None:
    fake.enqueue(Stream(["a ", "b ", "c"], usage=Usage(prompt=40, candidates=9)))
    await collect(gemini.chat(conversation()))
    attributes = span_named(spans, "llm.chat").attributes or {}
    assert attributes["gen_ai.request.model"] == "gemini-2.5-flash"
    assert attributes["gen_ai.usage.input_tokens"] == 40
    assert attributes["gen_ai.usage.output_tokens"] == 9


async def test_re_asks_add_up_their_usage(
    gemini: GeminiModel, fake: FakeGemini, spans: InMemorySpanExporter
) -> None:
    fake.enqueue(
        Reply("nope", usage=Usage(prompt=10, candidates=1)),
        Reply(json.dumps({"title": "t", "count": 0}), usage=Usage(prompt=20, candidates=5)),
    )
    await gemini.reasoning(conversation(), Answer)
    attributes = span_named(spans, "llm.reasoning").attributes or {}
    assert attributes["gen_ai.usage.input_tokens"] == 30
    assert attributes["gen_ai.usage.output_tokens"] == 6


async def test_a_failed_call_marks_its_span(
    make: Any, fake: FakeGemini, spans: InMemorySpanExporter
) -> None:
    gemini: GeminiModel = make(llm_retries=1)
    fake.enqueue(bad_api_key())
    with pytest.raises(LLMUnavailable):
        await collect(gemini.chat(conversation()))
    assert span_named(spans, "llm.chat").status.status_code is StatusCode.ERROR


async def test_leaving_a_stream_early_closes_it_and_its_span(
    gemini: GeminiModel, fake: FakeGemini, spans: InMemorySpanExporter
) -> None:
    fake.enqueue(Stream(["one ", "two ", "three"], delay_seconds=0.2))
    stream = gemini.chat(conversation())
    assert isinstance(stream, AsyncGenerator)
    assert await anext(stream) == "one "
    await stream.aclose()
    assert span_named(spans, "llm.chat").status.status_code is StatusCode.UNSET


# -- usage reported to the caller ----------------------------------------------------------------


async def test_reasoning_heavy_reports_its_usage(gemini: GeminiModel, fake: FakeGemini) -> None:
    fake.enqueue(Reply("Finalize", usage=Usage(prompt=120, candidates=3)))
    with llm_usage.collecting() as used:
        await gemini.reasoning_heavy(conversation(), CHOICES)
    assert used == [llm_usage.Usage("gemini-2.5-pro", 120, 3)]


async def test_thinking_tokens_are_billed_as_output(gemini: GeminiModel, fake: FakeGemini) -> None:
    fake.enqueue(Reply("Finalize", usage=Usage(prompt=120, candidates=3, thoughts=40)))
    with llm_usage.collecting() as used:
        await gemini.reasoning_heavy(conversation(), CHOICES)
    assert used == [llm_usage.Usage("gemini-2.5-pro", 120, 43)]


async def test_reasoning_reports_every_attempt(gemini: GeminiModel, fake: FakeGemini) -> None:
    fake.enqueue(
        Reply("nope", usage=Usage(prompt=10, candidates=1)),
        Reply(json.dumps({"title": "t", "count": 0}), usage=Usage(prompt=20, candidates=5)),
    )
    with llm_usage.collecting() as used:
        await gemini.reasoning(conversation(), Answer)
    assert used == [
        llm_usage.Usage("gemini-2.5-flash", 10, 1),
        llm_usage.Usage("gemini-2.5-flash", 20, 5),
    ]
    assert sum(u.input_tokens for u in used) == 30
    assert sum(u.output_tokens for u in used) == 6


async def test_reasoning_that_never_validates_still_reports_what_it_spent(
    make: Any, fake: FakeGemini
) -> None:
    gemini: GeminiModel = make(llm_retries=2)
    fake.enqueue(*[Reply("not json", usage=Usage(prompt=8, candidates=2))] * 2)
    with llm_usage.collecting() as used, pytest.raises(LLMOutputError):
        await gemini.reasoning(conversation(), Answer)
    assert used == [llm_usage.Usage("gemini-2.5-flash", 8, 2)] * 2


async def test_a_stream_reports_its_usage_once(gemini: GeminiModel, fake: FakeGemini) -> None:
    fake.enqueue(Stream(["a ", "b ", "c"], usage=Usage(prompt=40, candidates=9)))
    with llm_usage.collecting() as used:
        assert await collect(gemini.chat(conversation())) == ["a ", "b ", "c"]
    assert used == [llm_usage.Usage("gemini-2.5-flash", 40, 9)]


async def test_a_stream_left_early_reports_what_it_counted(
    gemini: GeminiModel, fake: FakeGemini
) -> None:
    fake.enqueue(Stream(["one ", "two ", "three"], usage=Usage(prompt=40, candidates=9)))
    with llm_usage.collecting() as used:
        stream = gemini.chat(conversation())
        assert isinstance(stream, AsyncGenerator)
        await anext(stream)
        await stream.aclose()
    # The fake, like Gemini, sends only the prompt count before the last chunk.
    assert used == [llm_usage.Usage("gemini-2.5-flash", 40, 0)]


async def test_thinking_tokens_are_reported_as_output(
    gemini: GeminiModel, fake: FakeGemini
) -> None:
    body = {
        "candidates": [
            {"content": {"parts": [{"text": "Finalize"}], "role": "model"}, "finishReason": "STOP"}
        ],
        "usageMetadata": {
            "promptTokenCount": 50,
            "candidatesTokenCount": 2,
            "thoughtsTokenCount": 30,
            "totalTokenCount": 82,
        },
    }
    fake.enqueue(Raw(json.dumps(body)))
    with llm_usage.collecting() as used:
        await gemini.reasoning_heavy(conversation(), CHOICES)
    assert used == [llm_usage.Usage("gemini-2.5-pro", 50, 32)]


async def test_embeddings_report_usage_only_when_the_api_counts_it(
    gemini: GeminiModel, fake: FakeGemini
) -> None:
    fake.enqueue(Embed(), Embed(prompt_tokens=7))
    with llm_usage.collecting() as used:
        await gemini.embedding(["a", "b"], "passage")  # batchEmbedContents without counts
        await gemini.embedding(["c"], "query")
    assert used == [llm_usage.Usage("gemini-embedding-001", 7, 0)]


class Topic(BaseModel):
    """Recursion is beyond the OpenAPI subset too (the SDK would cut it silently)."""

    name: str
    children: list[Topic] = []


async def test_recursive_schemas_go_as_json_schema(gemini: GeminiModel, fake: FakeGemini) -> None:
    value = {"name": "drinks", "children": [{"name": "tea", "children": []}]}
    fake.enqueue(reply_json(value))
    assert await gemini.reasoning(conversation(), Topic) == Topic.model_validate(value)
    config = generation(fake.requests[0])
    assert "responseSchema" not in config
    assert "Topic" in config["responseJsonSchema"]["$defs"]


# -- tool-role history -------------------------------------------------------------------


async def test_tool_history_goes_as_function_call_and_response_parts(
    gemini: GeminiModel, fake: FakeGemini
) -> None:
    await gemini.reasoning_heavy(request_with_tool_history(), CHOICES)
    (sent,) = fake.requests  # the fake refuses what the API refuses: call order, answers
    contents = sent.body["contents"]
    assert [content["role"] for content in contents] == [
        "user",
        "model",  # MemorySearch called
        "user",  # its response
        "model",  # the memory card, the answer
        "user",
        "model",
        "user",
        "model",  # the card-less second call joins no text: a call after a response
        "user",
        "model",
        "user",  # the ask
    ]
    # A replayed call carries the signature Gemini documents for calls it did not just make
    # (models that think require one on every call).
    (call,) = contents[1]["parts"]
    assert call["functionCall"] == {"id": "call_c1_1", "name": "MemorySearch", "args": {}}
    assert base64.b64decode(call["thoughtSignature"]) == b"skip_thought_signature_validator"
    assert contents[2]["parts"] == [
        {
            "functionResponse": {
                "id": "call_c1_1",
                "name": "MemorySearch",
                "response": {"return_value": "found 1 memory"},
            }
        }
    ]
    (call,) = contents[7]["parts"]
    assert call["functionCall"] == {"id": "call_c2_2", "name": "MemorySave", "args": {}}
    assert contents[-1]["parts"] == [{"text": "Where do I live?"}]


def test_the_fake_refuses_a_function_call_out_of_turn() -> None:
    """The fake is faithful: a call right after a model turn, or one left unanswered, is the
    API's 400, so the test above proves the adapter orders turns as the API wants."""
    call = {"role": "model", "parts": [{"functionCall": {"name": "MemorySearch", "args": {}}}]}
    after_model = [
        {"role": "user", "parts": [{"text": "hi"}]},
        {"role": "model", "parts": [{"text": "hello"}]},
        call,
    ]
    unanswered = [{"role": "user", "parts": [{"text": "hi"}]}, call, after_model[0]]
    assert _function_turns_problem(after_model) == FUNCTION_CALL_ORDER
    assert _function_turns_problem(unanswered) == FUNCTION_RESPONSE_COUNT


async def test_a_function_response_content_holds_nothing_but_responses(
    gemini: GeminiModel, fake: FakeGemini
) -> None:
    """A cycle that ended after a step (e.g. out of steps) has no answer: the user's next
    message follows the step's result. It goes in a content of its own."""
    records = [*thread()[5:10], user("c3", "Are you there?")]  # ends with MemorySave's result
    messages = history_conversation(records)
    prompt = Prompt(system=SYSTEM, messages=messages)
    await gemini.reasoning_heavy(LLMRequest(task="decide", prompt=prompt), CHOICES)
    (sent,) = fake.requests
    last_two = sent.body["contents"][-2:]
    assert [c["role"] for c in last_two] == ["user", "user"]
    assert list(last_two[0]["parts"][0]) == ["functionResponse"]
    assert last_two[1]["parts"] == [{"text": "Are you there?"}]
    problem = _function_turns_problem(
        [
            *sent.body["contents"][:-2],
            {"role": "user", "parts": [*last_two[0]["parts"], *last_two[1]["parts"]]},
        ]
    )
    assert problem == FUNCTION_RESPONSE_ALONE  # what the API says when they are mixed

"""One contract for every provider of the LLM port (``memoria_llm.port``).

Each test runs against the scripted provider, the offline planner, the Gemini adapter (the
real ``google-genai`` SDK talking to a local fake of the Gemini API) and the OpenAI-compatible
adapter (the real ``openai`` SDK talking to a local fake of the OpenAI API). A mode a provider
does not offer must fail with the port's documented error, never with something else.
"""

from __future__ import annotations

import asyncio
import math
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from pydantic import BaseModel

from memoria_contracts.chat import ChatRecord
from memoria_contracts.events import CycleContext
from memoria_llm.config import GeminiConfig, OpenAIConfig
from memoria_llm.gemini import GeminiModel
from memoria_llm.openai_compat import OpenAICompatibleModel
from memoria_llm.port import (
    LanguageModel,
    LLMError,
    LLMOutputError,
    LLMRequest,
    Mode,
    Prompt,
    PromptMessage,
    UnsupportedMode,
)
from memoria_llm.scripted import Script, ScriptedModel
from memoria_offline import OfflineModel
from memoria_runtime.settings import Settings

sys.path.insert(0, str(Path(__file__).parent.parent / "support"))
from fake_gemini import Behaviour, FakeGemini, Reply, reply_json
from fake_openai import FakeOpenAI
from fake_openai import Reply as OpenAIReply

SCRIPTED = "scripted"
OFFLINE = "offline"
GEMINI = "gemini"
OPENAI = "openai"
API_KEY = "test-key"
MESSAGE = "Please remember that I like green tea."
SYSTEM = "You are Memoria, a chat assistant with long-term memory."
ANSWER = "Noted: you like green tea, and I will remember it."
CHOICES = ["MemorySave", "Finalize", "Question"]
DECISION = "MemorySave"
EMBED_DIM = 16
CONCURRENT_CALLS = 5
TEST_BACKOFF_S = 0.01


class Fact(BaseModel):
    text: str
    kind: str


class Facts(BaseModel):
    items: list[Fact]


FACTS = {"items": [{"text": "likes green tea", "kind": "preference"}]}
NOT_FACTS = {"items": "green tea"}


def gemini_settings(base_url: str, **overrides: object) -> Settings:
    """Settings for the Gemini adapter from explicit values only (no environment, no .env)."""
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


def openai_settings(base_url: str) -> Settings:
    """Settings for the OpenAI-compatible adapter from explicit values only."""
    values: dict[str, object] = {
        "openai_base_url": base_url,
        "openai_api_key": API_KEY,
        "openai_model": "fake-chat",
        "openai_embedding_model": "fake-embed",
        "embedding_dim": EMBED_DIM,
        "llm_retries": 3,
        "llm_timeout_seconds": 2.0,
    }
    return Settings.load(_env_file=None, **values)


def request(task: str, text: str = MESSAGE) -> LLMRequest:
    original = ChatRecord(id="m-1", chat_history=True, modal="text", role="user", content=text)
    prompt = Prompt(system=SYSTEM, messages=[PromptMessage(role="user", content=text)])
    return LLMRequest(
        task=task,
        prompt=prompt,
        input_json=CycleContext(original_message=original).model_dump_json(),
    )


@dataclass
class Provider:
    kind: str
    model: LanguageModel
    chat_answer: str | None  # None: the provider's own text, not scripted by the test
    unsupported: dict[Mode, type[LLMError]] = field(default_factory=dict)
    fake: FakeGemini | None = None
    openai_fake: FakeOpenAI | None = None

    def will_answer(self, *behaviours: Behaviour) -> None:
        """What the next calls answer; providers without a fake are scripted up front."""
        if self.fake is not None:
            self.fake.enqueue(*behaviours)
        if self.openai_fake is not None:
            for behaviour in behaviours:
                if not isinstance(behaviour, Reply):
                    raise TypeError(f"no OpenAI equivalent of {behaviour!r}")
                self.openai_fake.enqueue(OpenAIReply(behaviour.text))


SCRIPT = Script.model_validate(
    {
        "rules": [
            {
                "match": "tea",
                "decide": [DECISION],
                "chat": {"Finalize": ANSWER},
                "reasoning": {"MemorySave": FACTS, "Broken": NOT_FACTS},
            }
        ],
        "chat_chunk_words": 2,
        "embedding_dim": EMBED_DIM,
    }
)


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeGemini]:
    with FakeGemini(api_keys=[API_KEY]) as server:
        yield server


@pytest.fixture(scope="module")
def openai_fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(api_keys=[API_KEY], embedding_dim=EMBED_DIM) as server:
        yield server


@pytest.fixture(params=[SCRIPTED, OFFLINE, GEMINI, OPENAI])
async def provider(
    request: pytest.FixtureRequest, fake: FakeGemini, openai_fake: FakeOpenAI
) -> AsyncIterator[Provider]:
    kind: str = request.param
    if kind == SCRIPTED:
        yield Provider(kind, ScriptedModel(SCRIPT), ANSWER)
    elif kind == OFFLINE:
        unsupported: dict[Mode, type[LLMError]] = {
            Mode.REASONING: LLMOutputError,
            Mode.EMBEDDING: UnsupportedMode,
        }
        yield Provider(kind, OfflineModel(), None, unsupported)
    elif kind == OPENAI:
        openai_fake.reset()
        compatible = OpenAICompatibleModel(
            OpenAIConfig.model_validate(
                openai_settings(openai_fake.base_url).llm, from_attributes=True
            ),
            backoff_base_s=TEST_BACKOFF_S,
            backoff_max_s=TEST_BACKOFF_S,
        )
        try:
            yield Provider(kind, compatible, ANSWER, openai_fake=openai_fake)
        finally:
            await compatible.aclose()
    else:
        fake.reset()
        model = GeminiModel(
            GeminiConfig.model_validate(gemini_settings(fake.base_url).llm, from_attributes=True),
            backoff_base_s=TEST_BACKOFF_S,
            backoff_max_s=TEST_BACKOFF_S,
        )
        try:
            yield Provider(kind, model, ANSWER, fake=fake)
        finally:
            await model.aclose()


async def collect(stream: AsyncIterator[str]) -> list[str]:
    return [piece async for piece in stream]


# -- every mode --------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", list(Mode))
def test_label_is_a_non_empty_string(provider: Provider, mode: Mode) -> None:
    label = provider.model.label(mode)
    assert isinstance(label, str)
    assert label.strip()


def test_name_is_the_provider(provider: Provider) -> None:
    assert provider.model.name == provider.kind


async def test_reasoning_heavy_returns_one_of_the_choices(provider: Provider) -> None:
    provider.will_answer(Reply(DECISION))
    answer = await provider.model.reasoning_heavy(request("decide"), CHOICES)
    assert answer in CHOICES


async def test_chat_streams_non_empty_pieces_that_join_into_the_answer(
    provider: Provider,
) -> None:
    provider.will_answer(Reply(ANSWER))
    pieces = await collect(provider.model.chat(request("Finalize")))
    assert pieces
    assert all(isinstance(piece, str) and piece for piece in pieces)
    text = "".join(pieces)
    if provider.chat_answer is None:
        assert text.strip()
    else:
        assert text == provider.chat_answer


async def test_reasoning_returns_an_instance_of_the_schema(provider: Provider) -> None:
    provider.will_answer(reply_json(FACTS))
    if Mode.REASONING in provider.unsupported:
        with pytest.raises(provider.unsupported[Mode.REASONING]):
            await provider.model.reasoning(request("MemorySave"), Facts)
        return
    result = await provider.model.reasoning(request("MemorySave"), Facts)
    assert isinstance(result, Facts)
    assert result == Facts.model_validate(FACTS)


async def test_reasoning_output_that_does_not_fit_the_schema_is_an_output_error(
    provider: Provider,
) -> None:
    provider.will_answer(*[reply_json(NOT_FACTS)] * 3)
    with pytest.raises(LLMOutputError):
        await provider.model.reasoning(request("Broken"), Facts)


async def test_embedding_returns_one_unit_vector_per_text(provider: Provider) -> None:
    texts = ["likes green tea", "lives in Lisbon", "likes green tea"]
    if Mode.EMBEDDING in provider.unsupported:
        with pytest.raises(provider.unsupported[Mode.EMBEDDING]):
            await provider.model.embedding(texts, "passage")
        return
    vectors = await provider.model.embedding(texts, "passage")
    assert len(vectors) == len(texts)
    assert {len(vector) for vector in vectors} == {EMBED_DIM}
    for vector in vectors:
        assert math.isclose(math.sqrt(sum(v * v for v in vector)), 1.0, rel_tol=1e-6)
    assert vectors[0] == vectors[2]
    assert vectors[0] != vectors[1]
    (query,) = await provider.model.embedding(["green tea"], "query")
    assert len(query) == EMBED_DIM


async def test_embedding_of_no_texts_is_empty(provider: Provider) -> None:
    if Mode.EMBEDDING in provider.unsupported:
        pytest.skip("embedding is not offered by this provider")
    assert await provider.model.embedding([], "query") == []


async def test_concurrent_calls_share_one_provider(provider: Provider) -> None:
    provider.will_answer(*[Reply(ANSWER)] * CONCURRENT_CALLS)
    results = await asyncio.gather(
        *(collect(provider.model.chat(request("Finalize"))) for _ in range(CONCURRENT_CALLS))
    )
    texts = {"".join(pieces) for pieces in results}
    assert len(texts) == 1
    assert texts.pop().strip()


async def test_aclose_can_be_called(provider: Provider) -> None:
    await provider.model.aclose()

"""The OpenAI-compatible endpoint driven by the official ``openai`` package against the four
services as processes (offline planner, no key): answers whole and streamed, the memories and
actions in the extension field, the thread chosen by header or ``user``, and OpenAI-style
errors for bad bodies and tokens."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from openai import AsyncOpenAI, OpenAI
from stack import Stack, running_stack

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def stack(
    valkey_server: Any, milvus_server: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    redis_url = f"redis://127.0.0.1:{valkey_server.port}/6"
    data_dir: Path = tmp_path_factory.mktemp("openai-stack")
    with running_stack(
        redis_url, milvus_server.uri, data_dir, {"rules": []}, llm_provider="offline"
    ) as running:
        running.wait_ready(actions=6)
        yield running


def client(stack: Stack, user: str, **headers: str) -> OpenAI:
    return OpenAI(
        api_key=stack.token(user),
        base_url=f"{stack.base_url}/v1",
        max_retries=0,
        default_headers=headers or None,
    )


def extension(completion: Any) -> dict[str, Any]:
    extra: dict[str, Any] = completion.model_extra["memoria"]
    return extra


def test_models_lists_memoria(stack: Stack) -> None:
    models = client(stack, "oai-models").models.list()
    assert [m.id for m in models.data] == ["memoria"]
    assert client(stack, "oai-models").models.retrieve("memoria").id == "memoria"


def test_a_saved_memory_is_recalled_in_a_later_request(stack: Stack) -> None:
    api = client(stack, "oai-ana", **{"X-Memoria-Thread": "oai-a"})
    saved = api.chat.completions.create(
        model="memoria",
        messages=[
            {"role": "system", "content": "You are helpful."},
            {"role": "user", "content": "Remember that I am allergic to peanuts"},
        ],
    )
    answer = saved.choices[0].message.content or ""
    assert answer.startswith("Noted: you are allergic to peanuts.")  # the offline planner's
    assert saved.choices[0].finish_reason == "stop"
    assert extension(saved)["actions"] == ["MemorySave", "Finalize"]
    assert extension(saved)["thread_id"] == "oai-a"
    assert saved.id == f"chatcmpl-{extension(saved)['cycle_id']}"

    recalled = client(stack, "oai-ana").chat.completions.create(
        model="memoria",
        user="oai-b",  # the thread, when no header names one
        messages=[
            {"role": "user", "content": [{"type": "text", "text": "What am I allergic to?"}]}
        ],
    )
    memoria = extension(recalled)
    assert memoria["actions"] == ["MemorySearch", "Finalize"]
    assert memoria["thread_id"] == "oai-b"
    assert [m["content"] for m in memoria["memories"]] == ["I am allergic to peanuts"]
    assert "peanuts" in (recalled.choices[0].message.content or "")

    # The thread keeps the exchange like any other.
    stored = stack.history("oai-ana", "oai-b")
    assert any(m.get("content") == "What am I allergic to?" for m in stored)


async def test_streamed_answer_carries_the_text_and_then_the_extension(stack: Stack) -> None:
    api = AsyncOpenAI(
        api_key=stack.token("oai-rui"), base_url=f"{stack.base_url}/v1", max_retries=0
    )
    await api.chat.completions.create(
        model="memoria",
        messages=[{"role": "user", "content": "Lembre que meu cachorro se chama Rex"}],
    )
    stream = await api.chat.completions.create(
        model="memoria",
        stream=True,
        stream_options={"include_usage": True},
        messages=[{"role": "user", "content": "Como se chama o meu cachorro?"}],
    )
    text: list[str] = []
    finish: list[str | None] = []
    final: dict[str, Any] = {}
    usage_chunks = 0
    async for chunk in stream:
        if chunk.usage is not None:
            usage_chunks += 1
        for choice in chunk.choices:
            text.append(choice.delta.content or "")
            finish.append(choice.finish_reason)
        extra = (chunk.model_extra or {}).get("memoria")
        if extra and "actions" in extra:
            final = extra
    assert "Rex" in "".join(text)
    assert finish[-1] == "stop"
    assert final["actions"] == ["MemorySearch", "Finalize"]
    assert any("Rex" in m["content"] for m in final["memories"])
    assert usage_chunks == 1


def test_bad_bodies_get_openai_errors_and_start_nothing(stack: Stack) -> None:
    api = client(stack, "oai-bad")
    with pytest.raises(openai.NotFoundError) as unknown_model:
        api.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    assert unknown_model.value.code == "model_not_found"
    with pytest.raises(openai.BadRequestError) as no_user:
        api.chat.completions.create(
            model="memoria", messages=[{"role": "system", "content": "Be brief."}]
        )
    assert "user message is required" in str(no_user.value)
    with pytest.raises(openai.BadRequestError) as too_long:
        api.chat.completions.create(
            model="memoria", messages=[{"role": "user", "content": "x" * 9000}]
        )
    assert "limit is 8000" in str(too_long.value)

    raw = httpx.post(
        f"{stack.base_url}/v1/chat/completions",
        headers={"Authorization": f"Bearer {stack.token('oai-bad')}"},
        content=b"{not json",
    )
    assert raw.status_code == 400
    assert raw.json()["error"]["type"] == "invalid_request_error"
    bad_thread = httpx.post(
        f"{stack.base_url}/v1/chat/completions",
        headers={"Authorization": f"Bearer {stack.token('oai-bad')}", "X-Memoria-Thread": "a b"},
        json={"model": "memoria", "messages": [{"role": "user", "content": "hi"}]},
    )
    assert bad_thread.status_code == 400
    assert bad_thread.json()["error"]["param"] == "X-Memoria-Thread"
    assert stack.history("oai-bad", "openai") == []  # nothing reached a thread


def test_wrong_or_missing_tokens_are_refused(stack: Stack) -> None:
    forged = OpenAI(api_key="not-a-token", base_url=f"{stack.base_url}/v1", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as refused:
        forged.chat.completions.create(
            model="memoria", messages=[{"role": "user", "content": "hi"}]
        )
    assert refused.value.code == "invalid_api_key"
    with pytest.raises(openai.AuthenticationError):
        forged.models.list()
    missing = httpx.get(f"{stack.base_url}/v1/models")
    assert missing.status_code == 401
    assert missing.json()["error"]["code"] == "invalid_api_key"


CONCURRENT_CALLS = 60
CONCURRENT_THREADS = 6
ANSWERS_TIMEOUT_S = 300.0


@pytest.mark.timeout(ANSWERS_TIMEOUT_S + 60)
async def test_many_concurrent_calls_of_one_user_all_get_their_own_answer(stack: Stack) -> None:
    """The finding: about 60 concurrent calls of one user got up to 50 503s (every request
    took every frame of the user, and fell behind). Each now gets its own cycle's answer,
    streamed or whole, on threads where calls queue behind each other too."""
    token = stack.token("oai-many")
    api = AsyncOpenAI(api_key=token, base_url=f"{stack.base_url}/v1", max_retries=0)

    async def one(n: int) -> tuple[int, str]:
        thread = f"oai-many-{n % CONCURRENT_THREADS}"
        body: dict[str, Any] = {
            "model": "memoria",
            "messages": [{"role": "user", "content": f"hello number {n}"}],
            "extra_headers": {"X-Memoria-Thread": thread},
        }
        if n % 2:
            parts = [
                chunk.choices[0].delta.content or ""
                async for chunk in await api.chat.completions.create(stream=True, **body)
                if chunk.choices
            ]
            return n, "".join(parts)
        whole = await api.chat.completions.create(**body)
        return n, whole.choices[0].message.content or ""

    async with asyncio.timeout(ANSWERS_TIMEOUT_S):
        answers = await asyncio.gather(*(one(n) for n in range(CONCURRENT_CALLS)))
    await api.close()
    assert len(answers) == CONCURRENT_CALLS
    assert all(text.strip() for _, text in answers), answers  # each its own cycle's answer

"""Commands that never reach the model, end to end: the four services as processes, a
real broker and milvus-lite, a WebSocket client. The scripted model has NO rules, so any LLM
call would fail its cycle ("llm_error", as the last test shows): cycles that end "done",
with no usage, made none."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from stack import Stack, running_stack
from ws_client import Frame, one_cycle

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def stack(
    valkey_server: Any, milvus_server: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    redis_url = f"redis://127.0.0.1:{valkey_server.port}/15"
    data_dir: Path = tmp_path_factory.mktemp("fast-paths-stack")
    with running_stack(
        redis_url, milvus_server.uri, data_dir, {"rules": []}, step_timeout_seconds="30"
    ) as running:
        running.wait_ready(actions=6)
        yield running


async def say(stack: Stack, user: str, thread: str, text: str) -> list[Frame]:
    frames = await one_cycle(stack.ws_url(user), thread, text)
    echo = frames[0]
    assert (echo["type"], echo["role"], echo["content"]) == ("message", "user", text)
    return frames


def ended(frames: list[Frame]) -> Frame:
    return next(f for f in frames if f["type"] == "cycle_end")


def without_model(frames: list[Frame]) -> list[str]:
    """The cycle's actions, after checking it ended well without any LLM call."""
    end = ended(frames)
    assert end["reason"] == "done"
    assert end.get("usage") is None
    actions: list[str] = end["actions"]
    return actions


def replies(frames: list[Frame]) -> list[str]:
    return [f["content"] for f in frames if f["type"] == "message" and f["role"] == "assistant"]


def cards(frames: list[Frame]) -> list[Any]:
    return [f["content"]["content"] for f in frames if f.get("modal") == "memory"]


def headers(stack: Stack, user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {stack.token(user)}"}


async def remember(stack: Stack, user: str, content: str) -> None:
    async with httpx.AsyncClient(base_url=stack.base_url) as http:
        response = await http.post(
            "/api/memories",
            json={"content": content, "bindings": [content]},
            headers=headers(stack, user),
        )
    response.raise_for_status()


async def contents(stack: Stack, user: str) -> list[str]:
    async with httpx.AsyncClient(base_url=stack.base_url) as http:
        response = await http.get("/api/memories", headers=headers(stack, user))
    response.raise_for_status()
    return sorted(m["content"] for m in response.json()["memories"])


async def test_list_cancel_and_a_confirmed_delete_all_without_the_model(stack: Stack) -> None:
    await remember(stack, "ivy", "I live in Porto")
    await remember(stack, "ivy", "I am allergic to peanuts")
    await remember(stack, "joe", "I play the cello")

    listed = await say(stack, "ivy", "t", "list all my memories")
    assert without_model(listed) == ["ListMemories"]
    assert sorted(cards(listed)) == ["I am allergic to peanuts", "I live in Porto"]
    assert replies(listed) == ["These are all your memories (2)."]

    asked = await say(stack, "ivy", "t", "delete all my memories")
    assert without_model(asked) == ["ConfirmDeleteAll"]
    assert replies(asked)[0].startswith("Delete every memory I have of you?")
    kept = await say(stack, "ivy", "t", "cancel")
    assert without_model(kept) == ["Cancel"]
    assert replies(kept) == ["Okay, cancelled: I did not delete anything."]
    assert len(await contents(stack, "ivy")) == 2

    asked = await say(stack, "ivy", "t", "Apague todas as minhas memórias")
    assert without_model(asked) == ["ConfirmDeleteAll"]
    assert replies(asked)[0].startswith("Apagar cada memória que tenho de você?")
    confirmed = await say(stack, "ivy", "t", "sim")
    assert without_model(confirmed) == ["DeleteAllMemories"]
    assert replies(confirmed) == ["Pronto: apaguei todas as suas memórias (2)."]
    assert await contents(stack, "ivy") == []
    assert await contents(stack, "joe") == ["I play the cello"]  # only the session's user

    nothing = await say(stack, "ivy", "t", "cancelar")
    assert without_model(nothing) == ["Cancel"]
    assert replies(nothing) == ["Não há nada para cancelar."]

    # The conversation keeps the question and the outcome, like any assistant turn.
    history = [m["content"] for m in stack.history("ivy", "t") if m["role"] == "assistant"]
    assert "Pronto: apaguei todas as suas memórias (2)." in history


async def test_any_other_message_reaches_the_model(stack: Stack) -> None:
    """The proof that the cycles above made no LLM call: with this script, one that does
    fails. A pending question is dropped (and the user told) by a message that is no yes."""
    await say(stack, "kim", "t", "delete all my memories")
    frames = await say(stack, "kim", "t", "what is my name?")
    assert ended(frames)["reason"] == "llm_error"
    notices = [f["content"] for f in frames if f["type"] == "message" and f["role"] == "system"]
    assert (
        'I did not delete your memories: your reply was not a "yes", so I dropped that '
        "request." in notices
    )

"""A memory keeps when it was said, on the real stack with the offline planner: a chat save
names the dates the user gave relatively and is stamped with the message's time; an
imported memory keeps the time and the words it was exported with."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, time, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from stack import Stack, running_stack
from ws_client import one_cycle

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def stack(
    valkey_server: Any, milvus_server: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    redis_url = f"redis://127.0.0.1:{valkey_server.port}/7"
    data_dir: Path = tmp_path_factory.mktemp("dates-stack")
    with running_stack(
        redis_url, milvus_server.uri, data_dir, {"rules": []}, llm_provider="offline"
    ) as running:
        running.wait_ready(actions=6)
        yield running


def memories(stack: Stack, user: str) -> list[dict[str, Any]]:
    response = httpx.get(
        f"{stack.base_url}/api/memories",
        headers={"Authorization": f"Bearer {stack.token(user)}"},
    )
    response.raise_for_status()
    found: list[dict[str, Any]] = response.json()["memories"]
    return found


def moment(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp)


async def test_a_chat_save_names_the_dates_and_keeps_the_time_of_the_message(
    stack: Stack,
) -> None:
    frames = await one_cycle(stack.ws_url("noa"), "t", "Remember that I moved to Porto last week")
    ended = next(f for f in frames if f["type"] == "cycle_end")
    assert ended["actions"] == ["MemorySave", "Finalize"]

    (message,) = [m for m in stack.history("noa", "t") if m["role"] == "user"]
    said_at = moment(message["created_at"])
    said = said_at.date()
    last_monday = said - timedelta(days=said.weekday(), weeks=1)
    (memory,) = memories(stack, "noa")
    assert memory["content"] == f"I moved to Porto last week (week of {last_monday.isoformat()})"
    assert moment(memory["creation_datetime"]) == said_at

    # The dates do not hide it from a later question.
    recalled = await one_cycle(stack.ws_url("noa"), "u", "Where do I live now?")
    found = [f["content"]["content"] for f in recalled if f.get("modal") == "memory"]
    assert memory["content"] in found


def test_an_import_keeps_its_time_and_its_words(stack: Stack) -> None:
    exported = {
        "content": "I moved to Porto last week",
        "bindings": ["where I live"],
        "creation_datetime": "2024-05-06T07:08:09Z",
    }
    response = httpx.post(
        f"{stack.base_url}/api/memories",
        json=exported,
        headers={"Authorization": f"Bearer {stack.token('ivo')}"},
    )
    response.raise_for_status()

    (memory,) = memories(stack, "ivo")
    assert memory["content"] == "I moved to Porto last week"
    assert moment(memory["creation_datetime"]) == moment("2024-05-06T07:08:09+00:00")


def told(stack: Stack, user: str, content: str, at: datetime) -> str:
    response = httpx.post(
        f"{stack.base_url}/api/memories",
        json={"content": content, "bindings": [content], "creation_datetime": at.isoformat()},
        headers={"Authorization": f"Bearer {stack.token(user)}"},
    )
    response.raise_for_status()
    memory_id: str = response.json()["memory_id"]
    return memory_id


async def test_what_was_told_last_week_is_all_that_last_week_shows(stack: Stack) -> None:
    today = datetime.now(UTC).date()
    last_monday = datetime.combine(today - timedelta(days=today.weekday(), weeks=1), time(), UTC)
    inside = told(stack, "lia", "I started learning the cello", last_monday + timedelta(days=2))
    cat = told(stack, "lia", "I adopted a cat named Miso", last_monday - timedelta(days=30))

    frames = await one_cycle(stack.ws_url("lia"), "t", "What did I tell you last week?")

    ended = next(f for f in frames if f["type"] == "cycle_end")
    assert ended["actions"] == ["MemorySearch", "Finalize"]
    shown = [f["content"]["memory_id"] for f in frames if f.get("modal") == "memory"]
    assert shown == [inside]

    window = {
        "since": last_monday.isoformat(),
        "until": (last_monday + timedelta(weeks=1)).isoformat(),
    }
    headers = {"Authorization": f"Bearer {stack.token('lia')}"}

    def get(**params: str) -> httpx.Response:
        url = f"{stack.base_url}/api/memories/search"
        return httpx.get(url, params=params, headers=headers)

    def search(**params: str) -> list[str]:
        response = get(**params)
        response.raise_for_status()
        return [m["memory_id"] for m in response.json()["memories"]]

    assert search(mode="chronological", **window) == [inside]
    assert cat in search(q="my cat Miso")
    assert cat not in search(q="my cat Miso", **window)
    assert get(q="cat", since=window["until"], until=window["since"]).status_code == 422

"""The chat as the offline planner answers it, through a real stack: the stack, one message's
cycle, and what its frames say (the actions taken, the answers, the memory cards)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from stack import Stack, running_stack
from ws_client import Frame, one_cycle


@contextmanager
def offline_stack(valkey_port: int, milvus_uri: str, data_dir: Path, db: int) -> Iterator[Stack]:
    """The four services with no model configured, on Valkey database ``db``."""
    redis_url = f"redis://127.0.0.1:{valkey_port}/{db}"
    with running_stack(
        redis_url, milvus_uri, data_dir, {"rules": []}, llm_provider="offline"
    ) as running:
        running.wait_ready(actions=6)
        yield running


async def say(stack: Stack, user: str, thread: str, text: str) -> list[Frame]:
    return await one_cycle(stack.ws_url(user), thread, text)


def actions(frames: list[Frame]) -> list[str]:
    ended: list[str] = next(f for f in frames if f["type"] == "cycle_end")["actions"]
    return ended


def answers(frames: list[Frame]) -> list[Frame]:
    return [f for f in frames if f["type"] == "message" and f["role"] == "assistant"]


def cards(frames: list[Frame]) -> list[Any]:
    """What the memory cards of a search show (not those of what was saved or updated)."""
    return [
        f["content"]["content"]
        for f in frames
        if f.get("modal") == "memory" and (f.get("card") or {}).get("kind", "found") == "found"
    ]


def written(frames: list[Frame]) -> list[Any]:
    """What the cards of saved and updated memories show: what is stored now."""
    return [
        f["content"]["content"]
        for f in frames
        if f.get("modal") == "memory" and (f.get("card") or {}).get("kind") in ("saved", "updated")
    ]


async def api_get(stack: Stack, user: str, path: str) -> Any:
    """``GET path`` of the HTTP API as ``user`` (the dev login's token)."""
    async with httpx.AsyncClient(base_url=stack.base_url) as http:
        token = (await http.post("/api/token", json={"user_id": user})).json()["token"]
        response = await http.get(path, headers={"Authorization": f"Bearer {token}"})
    response.raise_for_status()
    return response.json()

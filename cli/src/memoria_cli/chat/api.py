"""The gateway's HTTP routes the chat's slash commands use, on the authenticated client of
`memoria export`/`import` (memoria_cli.gateway_client): threads, memories, cycle traces,
personas."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, ConfigDict, ValidationError

from memoria_cli.gateway_client import error_detail, send
from memoria_cli.transfer import MEMORIES_PATH
from memoria_contracts.cycles import Cycle
from memoria_contracts.memory import Memory

THREADS_PATH: Final = "/api/threads"
CYCLES_PATH: Final = "/api/cycles"
PERSONAS_PATH: Final = "/api/personas"
SEARCH_PATH: Final = f"{MEMORIES_PATH}/search"
MEMORIES_SHOWN: Final = 50
BEARER: Final = "Bearer "
# A gateway without a route answers 404 for a path it does not know, 405 for a method.
MISSING_ROUTE: Final = frozenset({httpx.codes.NOT_FOUND, httpx.codes.METHOD_NOT_ALLOWED})


_Model = TypeVar("_Model", bound=BaseModel)


class ApiError(Exception):
    """A request the gateway refused or answered in a way this CLI cannot read; the chat
    reports it and goes on."""


class NotAvailable(ApiError):
    """The gateway has no such route (an older gateway)."""


class ThreadSummary(BaseModel):
    """A thread as ``GET /api/threads`` lists it. Everything but the id is optional, and
    fields a newer gateway adds are ignored: a listing is never worth failing over."""

    model_config = ConfigDict(extra="ignore")

    thread_id: str
    title: str | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    message_count: int | None = None
    last_message: Any = None


class _ThreadList(BaseModel):
    threads: list[ThreadSummary]


class PersonaChoice(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: str
    name: str
    description: str = ""


class PersonaList(BaseModel):
    """``GET /api/personas``: the personas a thread can switch to, the default first."""

    model_config = ConfigDict(extra="ignore")

    default: str
    personas: list[PersonaChoice]


class _ThreadConfig(BaseModel):
    model_config = ConfigDict(extra="ignore")

    config: dict[str, Any]


class _MemoryList(BaseModel):
    memories: list[Memory]


@dataclass(frozen=True)
class Forgotten:
    memory_id: str
    content: Any
    """What the memory said (text, or a JSON object or list)."""


@dataclass(frozen=True)
class Edited:
    memory_id: str
    old_content: Any
    new_content: Any


class _Changed(BaseModel):
    model_config = ConfigDict(extra="ignore")

    old_content: Any
    new_content: Any


async def edit(client: httpx.AsyncClient, memory_id: str, content: str) -> Edited | None:
    """Change a text memory's text (its history keeps the old one; the memory service
    renames the binding that was the old text); None when the user has no such memory. A
    JSON memory is refused here: a line of text would replace it with text."""
    path = f"{MEMORIES_PATH}/{quote(memory_id, safe='')}"
    response = await send(client, "GET", path)
    if response.status_code == httpx.codes.NOT_FOUND:
        return None
    memory = _parsed(Memory, response, "reading the memory")
    if memory.content_kind != "text":
        raise ApiError(f"{memory_id} holds JSON: change it through the HTTP API (PATCH {path})")
    response = await send(client, "PATCH", path, json={"content": content})
    if response.status_code == httpx.codes.NOT_FOUND:
        return None  # deleted in between
    changed = _parsed(_Changed, response, "changing the memory")
    return Edited(memory_id, changed.old_content, changed.new_content)


def bearer_token(client: httpx.AsyncClient) -> str:
    """The token ``gateway_client.connect`` logged in with (the socket needs it too)."""
    return client.headers["Authorization"].removeprefix(BEARER)


def _parsed(model: type[_Model], response: httpx.Response, what: str) -> _Model:
    if response.is_error:
        raise ApiError(f"{what} failed ({response.status_code}): {error_detail(response)}")
    try:
        return model.model_validate_json(response.content)
    except ValidationError as exc:
        raise ApiError(f"{what}: the gateway sent an answer this CLI cannot read") from exc


async def list_threads(client: httpx.AsyncClient) -> list[ThreadSummary]:
    response = await send(client, "GET", THREADS_PATH)
    if response.status_code in MISSING_ROUTE:
        raise NotAvailable("threads are not available on this gateway")
    return _parsed(_ThreadList, response, "listing threads").threads


async def create_thread(client: httpx.AsyncClient) -> str:
    """A new thread's id."""
    response = await send(client, "POST", THREADS_PATH, json={})
    if response.status_code in MISSING_ROUTE:
        raise NotAvailable("threads are not available on this gateway")
    return _parsed(ThreadSummary, response, "creating a thread").thread_id


async def list_memories(client: httpx.AsyncClient, limit: int = MEMORIES_SHOWN) -> list[Memory]:
    """The newest ``limit`` memories."""
    response = await send(client, "GET", MEMORIES_PATH, params={"limit": limit})
    return _parsed(_MemoryList, response, "listing memories").memories


async def search_memories(client: httpx.AsyncClient, query: str) -> list[Memory]:
    """Memories that match ``query`` by meaning, most relevant first."""
    response = await send(client, "GET", SEARCH_PATH, params={"q": query})
    return _parsed(_MemoryList, response, "searching memories").memories


async def forget(client: httpx.AsyncClient, memory_id: str) -> Forgotten | None:
    """Delete a memory; None when the user has no such memory (another user's id and a
    malformed one get the same answer from the gateway)."""
    path = f"{MEMORIES_PATH}/{quote(memory_id, safe='')}"
    response = await send(client, "DELETE", path)
    if response.status_code == httpx.codes.NOT_FOUND:
        return None
    if response.is_error:
        raise ApiError(f"forgetting failed ({response.status_code}): {error_detail(response)}")
    try:
        content = response.json().get("deleted_content")
    except (ValueError, AttributeError):
        content = None  # deleted all the same: the status says so
    return Forgotten(memory_id, content)


async def cycle_trace(client: httpx.AsyncClient, cycle_id: str) -> Cycle | None:
    """A cycle's trace; None when the user has no such cycle (or it has expired)."""
    response = await send(client, "GET", f"{CYCLES_PATH}/{quote(cycle_id, safe='')}")
    if response.status_code == httpx.codes.NOT_FOUND:
        return None
    return _parsed(Cycle, response, "reading the cycle")


async def recent_messages(
    client: httpx.AsyncClient, thread_id: str, limit: int
) -> list[dict[str, Any]]:
    """The thread's last ``limit`` stored messages, oldest first, as ``message`` frames."""
    path = f"{THREADS_PATH}/{quote(thread_id, safe='')}/messages"
    response = await send(client, "GET", path, params={"limit": limit})
    if response.is_error:
        raise ApiError(
            f"reading the thread failed ({response.status_code}): {error_detail(response)}"
        )
    try:
        frames = response.json()
    except ValueError as exc:
        raise ApiError(
            "reading the thread: the gateway sent an answer this CLI cannot read"
        ) from exc
    if not isinstance(frames, list):
        raise ApiError("reading the thread: the gateway sent an answer this CLI cannot read")
    return [frame for frame in frames[-limit:] if isinstance(frame, dict)]


async def list_personas(client: httpx.AsyncClient) -> PersonaList:
    response = await send(client, "GET", PERSONAS_PATH)
    if response.status_code in MISSING_ROUTE:
        raise NotAvailable("personas are not available on this gateway")
    return _parsed(PersonaList, response, "listing personas")


def _config_path(thread_id: str) -> str:
    return f"{THREADS_PATH}/{quote(thread_id, safe='')}/config"


async def thread_persona(client: httpx.AsyncClient, thread_id: str) -> str | None:
    """The thread's persona; None for a thread not stored yet (nothing sent to it)."""
    response = await send(client, "GET", _config_path(thread_id))
    if response.status_code == httpx.codes.NOT_FOUND:
        return None
    persona = _parsed(_ThreadConfig, response, "reading the thread's config").config.get("persona")
    return persona if isinstance(persona, str) else None


async def switch_persona(client: httpx.AsyncClient, thread_id: str, persona: str) -> str | None:
    """Switch the thread to ``persona`` and return the thread's persona after it; None for a
    thread not stored yet. An unknown persona is an :class:`ApiError` saying so."""
    response = await send(client, "PATCH", _config_path(thread_id), json={"persona": persona})
    if response.status_code == httpx.codes.NOT_FOUND:
        return None
    config = _parsed(_ThreadConfig, response, "switching the persona").config
    switched = config.get("persona")
    return switched if isinstance(switched, str) else None

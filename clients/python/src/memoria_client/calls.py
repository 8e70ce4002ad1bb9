"""Every HTTP call of the API, described once: method, path, query, body, headers and how to
read the answer. ``Memoria`` and ``AsyncMemoria`` only differ in how they run a ``Call``."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, TypeAdapter, ValidationError

from memoria_client.errors import UnreadableAnswer, error_for
from memoria_client.models import (
    MESSAGES,
    BatchCreated,
    ContentKind,
    CreatedMemory,
    CycleTrace,
    DeletedMemory,
    Health,
    Memory,
    MemoryHistory,
    MemoryList,
    MemoryPage,
    MemoryType,
    MemoryUpdate,
    Message,
    PersonaList,
    SearchMode,
    Thread,
    ThreadConfig,
    ThreadList,
    Token,
)

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)

MEMORIES = "/api/memories"
THREADS = "/api/threads"
IDEMPOTENCY_HEADER = "Idempotency-Key"

Params = Mapping[str, str | int | float | Sequence[str]]


@dataclass(frozen=True)
class Call(Generic[T]):
    method: str
    path: str
    parse: Callable[[httpx.Response], T]
    params: Params | None = None
    json: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)
    retry_unavailable: bool = True
    """Whether a 503 may be retried: the request may have been carried out before the
    gateway gave up waiting, so only calls that are safe to repeat are."""
    authenticated: bool = True

    def result(self, response: httpx.Response) -> T:
        if response.is_error:
            raise error_for(response)
        try:
            return self.parse(response)
        except ValueError as exc:  # pydantic's ValidationError is one
            # One error type for callers to catch; the reason names fields, never values.
            raise UnreadableAnswer(
                f"{self.method} {self.path}: the gateway sent an answer this client cannot "
                f"read ({_first_problem(exc)})"
            ) from None


def _first_problem(exc: ValueError) -> str:
    if isinstance(exc, ValidationError):
        error = exc.errors()[0]
        return f"{'.'.join(str(p) for p in error['loc']) or 'answer'}: {error['msg']}"
    return "not JSON"


def _model(model: type[M]) -> Callable[[httpx.Response], M]:
    return lambda response: model.model_validate_json(response.content)


def _adapter(adapter: TypeAdapter[T]) -> Callable[[httpx.Response], T]:
    return lambda response: adapter.validate_json(response.content)


def _segment(value: str) -> str:
    # An id is one path segment: "a/b" or ".." must not reach another route.
    return quote(value, safe="")


def _drop_none(values: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def login(user_id: str) -> Call[Token]:
    return Call("POST", "/api/token", _model(Token), json={"user_id": user_id}, authenticated=False)


def memory_body(
    content: Any,
    bindings: Sequence[str] | None,
    *,
    memory_type: MemoryType | None,
    content_kind: ContentKind | None,
    creation_datetime: datetime | None,
    imported: bool,
) -> dict[str, Any]:
    """The body of a create (and, with its ``idempotency_key``, an item of a batch)."""
    if bindings is None:
        if not isinstance(content, str):
            raise ValueError("a JSON memory needs its bindings: the phrases it is found by")
        bindings = [content.strip()]
    body = _drop_none(
        {
            "content": content,
            "bindings": list(bindings),
            "memory_type": memory_type,
            "content_kind": content_kind,
            "creation_datetime": (
                creation_datetime.isoformat() if creation_datetime is not None else None
            ),
        }
    )
    body["content"] = content  # null is the gateway's to refuse, not ours to drop
    if imported:
        body["imported"] = True
    return body


def add_memory(
    content: Any,
    bindings: Sequence[str] | None,
    *,
    memory_type: MemoryType | None,
    content_kind: ContentKind | None,
    creation_datetime: datetime | None,
    imported: bool,
    idempotency_key: str | None,
) -> Call[CreatedMemory]:
    body = memory_body(
        content,
        bindings,
        memory_type=memory_type,
        content_kind=content_kind,
        creation_datetime=creation_datetime,
        imported=imported,
    )
    # Always a key: a retry after a 503 (the memory service may have saved it before the
    # gateway stopped waiting) then finds the memory instead of making a second one.
    key = idempotency_key or f"client:{uuid.uuid4().hex}"
    return Call(
        "POST", MEMORIES, _model(CreatedMemory), json=body, headers={IDEMPOTENCY_HEADER: key}
    )


def add_memories(items: Sequence[Mapping[str, Any]]) -> Call[BatchCreated]:
    """``POST /api/memories/batch``. Safe to retry after a 503 only because every item
    carries an ``idempotency_key``; one without gets a random key here for that reason."""
    keyed = [
        {**item, "idempotency_key": item.get("idempotency_key") or f"client:{uuid.uuid4().hex}"}
        for item in items
    ]
    return Call("POST", f"{MEMORIES}/batch", _model(BatchCreated), json={"memories": keyed})


def get_memory(memory_id: str) -> Call[Memory]:
    return Call("GET", f"{MEMORIES}/{_segment(memory_id)}", _model(Memory))


def update_memory(
    memory_id: str,
    *,
    content: Any,
    content_kind: ContentKind | None,
    memory_type: MemoryType | None,
    bindings: Sequence[str] | None,
) -> Call[MemoryUpdate]:
    body = _drop_none(
        {
            "content": content,
            "content_kind": content_kind,
            "memory_type": memory_type,
            "bindings": list(bindings) if bindings is not None else None,
        }
    )
    return Call("PATCH", f"{MEMORIES}/{_segment(memory_id)}", _model(MemoryUpdate), json=body)


def delete_memory(memory_id: str) -> Call[DeletedMemory]:
    # Not retried on 503: had the first try deleted it, the retry would answer 404.
    return Call(
        "DELETE",
        f"{MEMORIES}/{_segment(memory_id)}",
        _model(DeletedMemory),
        retry_unavailable=False,
    )


def list_memories(
    *, memory_type: MemoryType | None, limit: int, cursor: str | None
) -> Call[MemoryPage]:
    params = _drop_none({"memory_type": memory_type, "limit": limit, "cursor": cursor})
    return Call("GET", MEMORIES, _model(MemoryPage), params=params)


def _aware(moment: datetime | None, name: str) -> str | None:
    """An ISO 8601 time with its offset: a naive one would be read in no known zone."""
    if moment is None:
        return None
    if moment.utcoffset() is None:
        raise ValueError(f"{name} needs a time zone (an aware datetime)")
    return moment.isoformat()


def search_memories(
    queries: Sequence[str],
    *,
    mode: SearchMode,
    memory_type: MemoryType | None,
    limit: int | None,
    min_relevance: float | None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> Call[list[Memory]]:
    params = _drop_none(
        {
            "q": list(queries) if mode == "semantic" else None,
            "mode": mode,
            "memory_type": memory_type,
            "limit": limit,
            "min_relevance": min_relevance,
            "since": _aware(since, "since"),
            "until": _aware(until, "until"),
        }
    )
    return Call(
        "GET",
        f"{MEMORIES}/search",
        lambda response: MemoryList.model_validate_json(response.content).memories,
        params=params,
    )


def memory_history(memory_id: str) -> Call[MemoryHistory]:
    return Call("GET", f"{MEMORIES}/{_segment(memory_id)}/history", _model(MemoryHistory))


def list_threads(*, limit: int) -> Call[list[Thread]]:
    return Call(
        "GET",
        THREADS,
        lambda response: ThreadList.model_validate_json(response.content).threads,
        params={"limit": limit},
    )


def create_thread(title: str | None) -> Call[Thread]:
    # Not retried on 503: every create makes a new thread.
    return Call(
        "POST",
        THREADS,
        _model(Thread),
        json=_drop_none({"title": title}),
        retry_unavailable=False,
    )


def rename_thread(thread_id: str, title: str) -> Call[Thread]:
    return Call("PATCH", f"{THREADS}/{_segment(thread_id)}", _model(Thread), json={"title": title})


def thread_messages(thread_id: str, *, limit: int, before: str | None) -> Call[list[Message]]:
    return Call(
        "GET",
        f"{THREADS}/{_segment(thread_id)}/messages",
        _adapter(MESSAGES),
        params=_drop_none({"limit": limit, "before": before}),
    )


def cycle_trace(cycle_id: str) -> Call[CycleTrace]:
    return Call("GET", f"/api/cycles/{_segment(cycle_id)}", _model(CycleTrace))


def list_personas() -> Call[PersonaList]:
    return Call("GET", "/api/personas", _model(PersonaList))


def thread_config(thread_id: str) -> Call[ThreadConfig]:
    return Call("GET", f"{THREADS}/{_segment(thread_id)}/config", _model(ThreadConfig))


def update_thread_config(thread_id: str, changes: Mapping[str, Any]) -> Call[ThreadConfig]:
    """Fields left out stay as they are; one set to None goes back to its default."""
    return Call(
        "PATCH", f"{THREADS}/{_segment(thread_id)}/config", _model(ThreadConfig), json=changes
    )


def health() -> Call[Health]:
    # Not retried: a probe reports the state it finds.
    return Call("GET", "/healthz", _model(Health), retry_unavailable=False, authenticated=False)

"""HTTP API over the caller's own long-term memories (``/api/memories``).

Every route acts for the user of the bearer token and nobody else: the user id is never read
from a body or a query. Requests go to the memory service through the memory client with
its default thread (``NO_THREAD``), and writes are recorded with the source ``api``.
"""

# No `from __future__ import annotations`: FastAPI reads the routes' annotations when they
# are declared, and the user dependency they name is local to memory_router.
import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Final, Protocol, TypeVar

from fastapi import APIRouter, Depends, Header, HTTPException, Path, Query, Response, status
from fastapi.exceptions import RequestValidationError
from pydantic import TypeAdapter, ValidationError

from memoria_contracts.memory import (
    MAX_PAGE,
    MAX_QUERIES,
    MAX_SEARCH_LIMIT,
    ChangeSource,
    Memory,
    MemoryDelete,
    MemoryDeleted,
    MemoryFailure,
    MemoryFound,
    MemoryHistory,
    MemoryId,
    MemoryList,
    MemoryPage,
    MemorySave,
    MemorySaved,
    MemorySearch,
    MemoryType,
    MemoryUpdate,
    MemoryUpdated,
    QueryText,
    SearchMode,
)
from memoria_contracts.times import StorableTime
from memoria_gateway.bearer import bearer_user
from memoria_gateway.error_words import in_user_words
from memoria_gateway.memory_schemas import (
    IDEMPOTENCY_PREFIX,
    MAX_BATCH_MEMORIES,
    ClientIdempotencyKey,
    ErrorBody,
    MemoryBatchCreate,
    MemoryBatchCreated,
    MemoryBatchItem,
    MemoryBatchResult,
    MemoryChanged,
    MemoryChanges,
    MemoryCreate,
    MemoryCreated,
    MemoryListPage,
    MemoryPatch,
    MemoryRemoved,
    MemorySearchResult,
    RefusedItem,
)
from memoria_runtime.auth import TokenIssuer
from memoria_runtime.bus.request_reply import RpcError

log = logging.getLogger("memoria.gateway.memories")

SOURCE: Final[ChangeSource] = "api"
DEFAULT_LIST_PAGE: Final = 50
NOT_FOUND: Final = "memory not found"
NOT_ANSWERING: Final = "the memory service is not answering"
UNAVAILABLE: Final = "the memory service is unavailable"
BAD_REPLY: Final = "the memory service gave an unexpected answer"
STORAGE_FULL: Final = "the disk under the memory store is full; nothing was changed"

BATCH_SAVES_IN_FLIGHT: Final = 16
"""Saves of batches sent at once, whatever the number of batches being served: as many as
the memory service handles at once, so that its embedder gets them together, and no save
waits in the stream for a free handler while its timeout runs."""

_MEMORY_IDS: Final = TypeAdapter(MemoryId)

# A time window on when memories were told; an offset is required ("Z" or "%2B02:00": a raw
# "+" in a query string reads as a space).
Since = Annotated[
    StorableTime | None,
    Query(description="Only memories told at or after this time (ISO 8601 with offset)."),
]
Until = Annotated[
    StorableTime | None,
    Query(description="Only memories told before this time (ISO 8601 with offset)."),
]

R = TypeVar("R")
F = TypeVar("F")


class MemoryBackend(Protocol):
    """The calls of :class:`memoria_runtime.bus.memory_requests.MemoryClient` this API uses."""

    async def search(self, user_id: str, request: MemorySearch) -> MemoryFound | MemoryFailure:
        """Semantic or chronological search."""

    async def get(self, user_id: str, memory_id: str) -> MemoryFound | MemoryFailure:
        """One memory."""

    async def list(self, user_id: str, request: MemoryList) -> MemoryPage | MemoryFailure:
        """A page of memories, newest first."""

    async def changes(self, user_id: str, memory_id: str) -> MemoryHistory | MemoryFailure:
        """A memory's change history."""

    async def save(self, user_id: str, request: MemorySave) -> MemorySaved | MemoryFailure:
        """Create (or find again, by idempotency key)."""

    async def update(self, user_id: str, request: MemoryUpdate) -> MemoryUpdated | MemoryFailure:
        """Change content, type or bindings."""

    async def delete(self, user_id: str, request: MemoryDelete) -> MemoryDeleted | MemoryFailure:
        """Delete."""


def _error(description: str) -> dict[str, Any]:
    return {"model": ErrorBody, "description": description}


COMMON_ERRORS: Final[dict[int | str, dict[str, Any]]] = {
    status.HTTP_401_UNAUTHORIZED: _error("No bearer token, or a forged or expired one."),
    status.HTTP_502_BAD_GATEWAY: _error("The memory service answered something unexpected."),
    status.HTTP_503_SERVICE_UNAVAILABLE: _error(
        "The memory service is not answering, or its storage or embedder is unavailable."
    ),
    status.HTTP_507_INSUFFICIENT_STORAGE: _error(
        "The disk under the memory store is full: nothing was changed; send it again once "
        "space is freed."
    ),
}
NOT_FOUND_ERROR: Final[dict[int | str, dict[str, Any]]] = {
    status.HTTP_404_NOT_FOUND: _error(
        "No such memory of yours (another user's memory gets the same answer)."
    ),
}


def not_found() -> HTTPException:
    # A fixed body: an unknown id and another user's id must be indistinguishable.
    return HTTPException(status.HTTP_404_NOT_FOUND, detail=NOT_FOUND)


def invalid(message: str, *loc: str) -> RequestValidationError:
    """A 422 in FastAPI's own shape, so clients parse every 422 the same way."""
    return RequestValidationError([{"type": "invalid", "loc": loc, "msg": message}])


def refusal(failure: MemoryFailure) -> HTTPException | RequestValidationError:
    if failure.code == "not_found":
        return not_found()
    if failure.code == "invalid":
        return invalid(failure.error_message)
    if failure.code == "storage_full":
        return HTTPException(status.HTTP_507_INSUFFICIENT_STORAGE, detail=STORAGE_FULL)
    # The message names storage internals (URIs, driver errors): logs only.
    log.warning("memory service unavailable: %s", failure.error_message)
    return HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, detail=UNAVAILABLE)


async def reply_or_raise(
    call: Awaitable[R | F], failure: type[F], refuse: Callable[[F], Exception]
) -> R:
    """The memory service's reply, or the HTTP error it amounts to: no answer in time is a
    503, a reply of the wrong kind a 502, a ``failure`` whatever ``refuse`` makes of it."""
    try:
        reply = await call
    except TimeoutError as exc:
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, detail=NOT_ANSWERING) from exc
    except RpcError as exc:
        log.error("memory service protocol error: %s", exc)
        raise HTTPException(status.HTTP_502_BAD_GATEWAY, detail=BAD_REPLY) from exc
    if isinstance(reply, failure):
        raise refuse(reply)
    return reply  # type: ignore[return-value]  # R | F minus F


async def answer(call: Awaitable[R | MemoryFailure]) -> R:
    return await reply_or_raise(call, MemoryFailure, refusal)


def contract(build: Callable[[], R], location: str) -> R:
    """Build a memory request; its own checks (content vs kind, nothing to update) are 422s
    like the body's."""
    try:
        return build()
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False)
        for error in errors:
            error["loc"] = (location, *error["loc"])
        raise RequestValidationError(errors) from exc


def checked_id(memory_id: str) -> str:
    """An id that cannot exist is just as not found; no need to ask the memory service."""
    try:
        return _MEMORY_IDS.validate_python(memory_id)
    except ValidationError as exc:
        raise not_found() from exc


def save_request(body: MemoryCreate, idempotency_key: str | None, location: str) -> MemorySave:
    """The save a create body asks for; without a key, a random one (every call creates)."""
    key = IDEMPOTENCY_PREFIX + (idempotency_key or uuid.uuid4().hex)
    kind = body.content_kind or ("text" if isinstance(body.content, str) else "json")
    return contract(
        lambda: MemorySave(
            idempotency_key=key,
            memory_type=body.memory_type,
            content_kind=kind,
            content=body.content,
            bindings=body.search_keys(),
            source="import" if body.imported else SOURCE,
            creation_datetime=body.creation_datetime,
        ),
        location,
    )


def created(saved: MemorySaved) -> MemoryCreated:
    return MemoryCreated.model_validate({**saved.memory.model_dump(), "created": saved.created})


async def batch_result(
    memory: MemoryBackend, user_id: str, index: int, item: MemoryBatchItem | RefusedItem
) -> MemoryBatchResult:
    """One item's save, or its refusal as the single create route would have answered it
    (a 422's fields located under ``body.memories.<index>``)."""
    try:
        if isinstance(item, RefusedItem):
            raise RequestValidationError([{**e, "loc": ("body", *e["loc"])} for e in item.errors])
        request = save_request(item, item.idempotency_key, "body")
        saved = await answer(memory.save(user_id, request))
    except RequestValidationError as exc:
        errors = [
            {**error, "loc": ("body", "memories", index, *_within_body(error.get("loc", ())))}
            for error in exc.errors()
        ]
        return MemoryBatchResult(
            status=status.HTTP_422_UNPROCESSABLE_CONTENT, detail=in_user_words(errors)
        )
    except HTTPException as exc:
        return MemoryBatchResult(status=exc.status_code, detail=exc.detail)
    code = status.HTTP_201_CREATED if saved.created else status.HTTP_200_OK
    return MemoryBatchResult(status=code, memory=created(saved))


def _within_body(loc: Any) -> tuple[Any, ...]:
    parts = tuple(loc)
    return parts[1:] if parts[:1] == ("body",) else parts


def memory_router(memory: MemoryBackend, tokens: Callable[[], TokenIssuer]) -> APIRouter:
    """The routes; ``tokens`` is called per request because the issuer exists only once the
    gateway has started."""
    router = APIRouter(prefix="/api/memories", tags=["memories"], responses=COMMON_ERRORS)
    batch_slots = asyncio.Semaphore(BATCH_SAVES_IN_FLIGHT)
    User = Annotated[str, Depends(bearer_user(tokens))]
    MemoryPath = Annotated[str, Path(description="The memory's id (mem_…).")]

    @router.post(
        "",
        status_code=status.HTTP_201_CREATED,
        summary="Create a memory",
        response_description="The new memory.",
        responses={
            status.HTTP_200_OK: {
                "model": MemoryCreated,
                "description": "The memory this Idempotency-Key created before; nothing new.",
            }
        },
    )
    async def create_memory(
        body: MemoryCreate,
        user_id: User,
        response: Response,
        idempotency_key: Annotated[
            ClientIdempotencyKey | None,
            Header(
                alias="Idempotency-Key",
                description="Repeat a create safely: the same key never creates twice. "
                "Unset: a random key (every call creates).",
            ),
        ] = None,
    ) -> MemoryCreated:
        """Save a memory for the token's user. Its bindings are embedded so that semantic
        search finds it. With an `Idempotency-Key`, a retry (or a second import of the same
        file) answers 200 with the memory the key created, unchanged, instead of a copy."""
        saved = await answer(memory.save(user_id, save_request(body, idempotency_key, "body")))
        if not saved.created:
            response.status_code = status.HTTP_200_OK
        return created(saved)

    @router.post(
        "/batch",
        summary="Create many memories",
        description=f"Save up to {MAX_BATCH_MEMORIES} memories at once, each as `POST "
        "/api/memories` would (an item is that route's body plus its `idempotency_key`). The "
        "answer is 200 with one result per item, in order: its status and memory, or why it "
        "was refused. A refused item (invalid, or the memory service unavailable) loses "
        "nothing of the others; send it again with the same `idempotency_key` and nothing is "
        "created twice. Their bindings are embedded together, many times faster than one "
        "create at a time.",
    )
    async def create_memories(body: MemoryBatchCreate, user_id: User) -> MemoryBatchCreated:
        async def one(index: int, item: MemoryBatchItem | RefusedItem) -> MemoryBatchResult:
            async with batch_slots:
                return await batch_result(memory, user_id, index, item)

        entries: list[MemoryBatchItem | RefusedItem] = list(body.memories)
        results = await asyncio.gather(*(one(i, item) for i, item in enumerate(entries)))
        done = [result.status for result in results]
        return MemoryBatchCreated(
            results=results,
            created=done.count(status.HTTP_201_CREATED),
            present=done.count(status.HTTP_200_OK),
            failed=len(done) - done.count(status.HTTP_201_CREATED) - done.count(status.HTTP_200_OK),
        )

    @router.get("", summary="List memories")
    async def list_memories(
        user_id: User,
        *,
        memory_type: Annotated[MemoryType | None, Query(description="Only this type.")] = None,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = DEFAULT_LIST_PAGE,
        cursor: Annotated[
            str | None, Query(description="next_cursor of the previous page.")
        ] = None,
        since: Since = None,
        until: Until = None,
    ) -> MemoryListPage:
        """The token's user's memories, newest first, a page at a time: follow
        `next_cursor` until it is null. An unknown cursor is a 422."""
        request = contract(
            lambda: MemoryList(
                memory_type=memory_type, limit=limit, cursor=cursor, since=since, until=until
            ),
            "query",
        )
        page = await answer(memory.list(user_id, request))
        return MemoryListPage(memories=page.memories, next_cursor=page.next_cursor)

    # Declared before /{memory_id}, which would otherwise take "search" for an id.
    @router.get("/search", summary="Search memories")
    async def search_memories(
        user_id: User,
        *,
        q: Annotated[
            list[QueryText] | None,
            Query(max_length=MAX_QUERIES, description="A query; repeat for several."),
        ] = None,
        mode: Annotated[
            SearchMode, Query(description="semantic (needs q) or chronological (newest).")
        ] = "semantic",
        memory_type: Annotated[MemoryType | None, Query(description="Only this type.")] = None,
        limit: Annotated[
            int | None, Query(ge=1, le=MAX_SEARCH_LIMIT, description="Unset: the default.")
        ] = None,
        min_relevance: Annotated[
            float | None,
            Query(ge=0.0, le=1.0, description="Lowest relevance_score; unset: the default."),
        ] = None,
        since: Since = None,
        until: Until = None,
    ) -> MemorySearchResult:
        """Semantic search: the memories whose bindings are closest to any `q`, most
        relevant first, each with a calibrated `relevance_score` (0–1). `mode=chronological`
        ignores `q` and gives the latest memories. `since`/`until` keep the memories told
        within that time (either mode). Found memories count as accessed."""
        queries = (q or []) if mode == "semantic" else []
        if mode == "semantic" and not queries:
            raise invalid("a semantic search needs at least one q", "query", "q")
        request = contract(
            lambda: MemorySearch(
                mode=mode,
                queries=queries,
                memory_type=memory_type,
                limit=limit,
                min_relevance=min_relevance,
                since=since,
                until=until,
            ),
            "query",
        )
        found = await answer(memory.search(user_id, request))
        return MemorySearchResult(memories=found.memories)

    @router.get("/{memory_id}", summary="Get a memory", responses=NOT_FOUND_ERROR)
    async def get_memory(memory_id: MemoryPath, user_id: User) -> Memory:
        """One memory of the token's user (it counts as accessed)."""
        found = await answer(memory.get(user_id, checked_id(memory_id)))
        if not found.memories:
            raise not_found()
        return found.memories[0]

    @router.patch("/{memory_id}", summary="Change a memory", responses=NOT_FOUND_ERROR)
    async def update_memory(
        memory_id: MemoryPath, body: MemoryPatch, user_id: User
    ) -> MemoryChanged:
        """Change any of content (with content_kind), memory_type and bindings; new
        bindings are embedded again. A new text without bindings renames the binding that was
        the old text (the others stay). The change is kept in the memory's history."""
        known_id = checked_id(memory_id)
        request = contract(
            lambda: MemoryUpdate(
                memory_id=known_id,
                content=body.content,
                content_kind=body.content_kind,
                memory_type=body.memory_type,
                bindings=body.bindings,
                source=SOURCE,
            ),
            "body",
        )
        updated = await answer(memory.update(user_id, request))
        return MemoryChanged(
            memory=updated.memory,
            old_content=updated.old_content,
            new_content=updated.new_content,
        )

    @router.delete("/{memory_id}", summary="Delete a memory", responses=NOT_FOUND_ERROR)
    async def delete_memory(memory_id: MemoryPath, user_id: User) -> MemoryRemoved:
        """Delete a memory (its history stays, ending with the deletion)."""
        request = MemoryDelete(memory_id=checked_id(memory_id), source=SOURCE)
        deleted = await answer(memory.delete(user_id, request))
        return MemoryRemoved(memory_id=deleted.memory_id, deleted_content=deleted.deleted_content)

    @router.get(
        "/{memory_id}/history", summary="A memory's change history", responses=NOT_FOUND_ERROR
    )
    async def memory_history(memory_id: MemoryPath, user_id: User) -> MemoryChanges:
        """Every change of the memory, oldest first: when, how (created, updated, deleted),
        from where (chat, api, import, reconciler) and the memory before and after. A
        deleted memory keeps its history."""
        history = await answer(memory.changes(user_id, checked_id(memory_id)))
        return MemoryChanges(memory_id=history.memory_id, changes=history.changes)

    return router

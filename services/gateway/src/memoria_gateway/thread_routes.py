"""HTTP API over the caller's own chat threads (``/api/threads``): list, create, rename,
and each thread's session config (``/api/threads/{thread_id}/config``).

A thread's messages are read at ``GET /api/threads/{thread_id}/messages`` (http_routes.py).
As with memories, every route acts for the bearer token's user and nobody else, and another
user's thread answers exactly like a thread that does not exist.
"""

# No `from __future__ import annotations`: FastAPI reads the routes' annotations when they
# are declared, and the user dependency they name is local to thread_router.
import logging
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Final, Protocol, TypeVar

from fastapi import APIRouter, Depends, HTTPException, Path, Query, status
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from memoria_contracts.ids import new_id
from memoria_contracts.personas import AgentHistoryEntry
from memoria_contracts.session import (
    SessionConfig,
    SessionConfigGet,
    SessionConfigOverrides,
    SessionConfigPatch,
    SessionConfigState,
)
from memoria_contracts.threads import (
    DEFAULT_THREAD_PAGE,
    DEFAULT_THREAD_TITLE,
    MAX_THREAD_PAGE,
    Thread,
    ThreadCreate,
    ThreadFailure,
    ThreadId,
    ThreadList,
    ThreadPage,
    ThreadRename,
    ThreadSaved,
    ThreadTitle,
)
from memoria_gateway.bearer import bearer_user
from memoria_gateway.memory_routes import COMMON_ERRORS, reply_or_raise
from memoria_gateway.memory_schemas import ErrorBody
from memoria_gateway.session_frames import SessionBackend
from memoria_runtime.auth import TokenIssuer

log = logging.getLogger("memoria.gateway.threads")

THREAD_NOT_FOUND: Final = "thread not found"
THREAD_ID_PREFIX: Final = "t"
"""Server-made thread ids are ``t_`` and 26 lower-case letters and digits, in time order."""

_THREAD_IDS: Final = TypeAdapter(ThreadId)

R = TypeVar("R")


class ThreadBackend(SessionBackend, Protocol):
    """The calls of :class:`memoria_runtime.bus.memory_requests.MemoryClient` this API uses: the
    session config's (as the WebSocket frame's) and the threads'."""

    async def threads(self, user_id: str, request: ThreadList) -> ThreadPage | ThreadFailure:
        """The user's threads, most recently updated first."""

    async def create_thread(
        self, user_id: str, request: ThreadCreate
    ) -> ThreadSaved | ThreadFailure:
        """Create a thread."""

    async def rename_thread(
        self, user_id: str, request: ThreadRename
    ) -> ThreadSaved | ThreadFailure:
        """Give a thread a title."""


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a misspelt field is refused, not dropped


class ThreadCreateBody(_Body):
    title: ThreadTitle | None = Field(
        default=None,
        description=f"1–120 characters. Unset: '{DEFAULT_THREAD_TITLE}' until the first "
        "message, then that message, shortened.",
    )


class ThreadRenameBody(_Body):
    title: ThreadTitle = Field(
        description="1–120 characters, not only blanks (surrounding blanks are removed). "
        "Kept for good: the title made from the first message never replaces it."
    )


class ThreadListPage(BaseModel):
    threads: list[Thread] = Field(description="Most recently updated first.")


class ThreadConfig(BaseModel):
    """A thread's session config, as the HTTP API and the ``session_config`` frame show it."""

    user_id: str = Field(description="The session's user: never taken from a body.")
    config: SessionConfig = Field(description="Effective: the defaults, overrides on top.")
    overrides: SessionConfigOverrides = Field(
        description="What the thread sets itself; null fields follow the defaults."
    )
    agent_history: list[AgentHistoryEntry] = Field(
        default_factory=list,
        serialization_alias="agentHistory",
        description="The thread's persona switches, oldest first.",
    )

    @classmethod
    def of(cls, user_id: str, state: SessionConfigState) -> "ThreadConfig":
        return cls(
            user_id=user_id,
            config=state.config,
            overrides=state.overrides,
            agent_history=state.agent_history,
        )


NOT_FOUND_ERROR: Final[dict[int | str, dict[str, Any]]] = {
    status.HTTP_404_NOT_FOUND: {
        "model": ErrorBody,
        "description": "No such thread of yours (another user's thread gets the same answer).",
    }
}


def not_found() -> HTTPException:
    # A fixed body: an unknown thread and another user's must be indistinguishable.
    return HTTPException(status.HTTP_404_NOT_FOUND, detail=THREAD_NOT_FOUND)


def refused(failure: ThreadFailure) -> HTTPException:
    """``not_found`` (also for another user's thread), or a change the thread cannot take
    (an unknown persona): a 422 shaped like FastAPI's own validation errors."""
    if failure.code == "invalid":
        problem = {"loc": ["body", "persona"], "msg": failure.error_message, "type": "value_error"}
        return HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, detail=[problem])
    return not_found()


async def answer(call: Awaitable[R | ThreadFailure]) -> R:
    return await reply_or_raise(call, ThreadFailure, refused)


def known_thread(thread_id: str) -> str:
    """``thread_id`` if it could be a thread's id; else "not found", like an unknown one."""
    try:
        return _THREAD_IDS.validate_python(thread_id)
    except ValidationError as exc:
        raise not_found() from exc


def thread_router(threads: ThreadBackend, tokens: Callable[[], TokenIssuer]) -> APIRouter:
    """The routes; ``tokens`` is called per request because the issuer exists only once the
    gateway has started."""
    router = APIRouter(prefix="/api/threads", tags=["threads"], responses=COMMON_ERRORS)
    User = Annotated[str, Depends(bearer_user(tokens))]

    @router.get("", summary="List threads")
    async def list_threads(
        user_id: User,
        limit: Annotated[int, Query(ge=1, le=MAX_THREAD_PAGE)] = DEFAULT_THREAD_PAGE,
    ) -> ThreadListPage:
        """The token's user's threads, most recently updated first: those created here and
        those that simply received messages (a client may pick its own thread ids)."""
        page = await answer(threads.threads(user_id, ThreadList(limit=limit)))
        return ThreadListPage(threads=page.threads)

    @router.post(
        "",
        status_code=status.HTTP_201_CREATED,
        summary="Create a thread",
        response_description="The new thread, with its server-made id.",
    )
    async def create_thread(body: ThreadCreateBody, user_id: User) -> Thread:
        """A new, empty thread with a server-made `thread_id` (`t_…`); send messages to it
        over the WebSocket."""
        # Made here, not by the memory service: a request retried after a lost reply then
        # finds the thread it created instead of creating a second one.
        request = ThreadCreate(thread_id=new_id(THREAD_ID_PREFIX), title=body.title)
        saved = await answer(threads.create_thread(user_id, request))
        return saved.thread

    @router.patch("/{thread_id}", summary="Rename a thread", responses=NOT_FOUND_ERROR)
    async def rename_thread(
        thread_id: Annotated[str, Path(description="The thread's id.")],
        body: ThreadRenameBody,
        user_id: User,
    ) -> Thread:
        """Give one of your threads a title."""
        request = ThreadRename(thread_id=known_thread(thread_id), title=body.title)
        saved = await answer(threads.rename_thread(user_id, request))
        return saved.thread

    @router.get(
        "/{thread_id}/config", summary="Read a thread's session config", responses=NOT_FOUND_ERROR
    )
    async def read_config(
        thread_id: Annotated[str, Path(description="The thread's id.")], user_id: User
    ) -> ThreadConfig:
        """The session config the thread's cycles run with: system prompt, chat model,
        memory search limits, memory type descriptions, proactive retrieval. Defaults come
        from the settings; `overrides` shows what the thread sets itself."""
        request = SessionConfigGet(thread_id=known_thread(thread_id))
        return ThreadConfig.of(user_id, await answer(threads.session_config(user_id, request)))

    @router.patch(
        "/{thread_id}/config",
        summary="Change a thread's session config (or switch its persona)",
        responses=NOT_FOUND_ERROR,
    )
    async def change_config(
        thread_id: Annotated[str, Path(description="The thread's id.")],
        body: SessionConfigPatch,
        user_id: User,
    ) -> ThreadConfig:
        """Fields left out stay as they are; a field set to null goes back to its default
        (in `memory_type_descriptions`, per type). Takes effect from the thread's next
        cycle. A new `persona` (one of `GET /api/personas`; another is a 422) is logged in
        `agentHistory`, and the next cycle resets the model's identity to it."""
        request = body.as_update(known_thread(thread_id))
        state = await answer(threads.update_session_config(user_id, request))
        return ThreadConfig.of(user_id, state)

    return router

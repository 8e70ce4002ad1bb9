"""HTTP API over the caller's own thought cycles: ``GET /api/cycles/{cycle_id}`` returns a
cycle's trace — every message and event, in order, with its trace id.

A cycle's id is in every frame of it (``cycle_id``). As everywhere in the API, the route acts
for the bearer token's user only, and another user's cycle answers exactly like one that does
not exist. An id that is not a cycle id at all is a 422: it is a mistake of the caller's, not
a question about what exists.
"""

# No `from __future__ import annotations`: FastAPI reads the routes' annotations when they
# are declared, and the user dependency they name is local to cycle_router.
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Final, Protocol, TypeVar

from fastapi import APIRouter, Depends, HTTPException, Path, status
from fastapi.responses import JSONResponse

from memoria_contracts.cycles import Cycle, CycleFailure, CycleFound, CycleId
from memoria_gateway.bearer import bearer_user
from memoria_gateway.memory_routes import COMMON_ERRORS, reply_or_raise
from memoria_gateway.memory_schemas import ErrorBody
from memoria_runtime.auth import TokenIssuer

CYCLE_NOT_FOUND: Final = "cycle not found"
_EVENT_FIELDS_ALWAYS: Final = frozenset({"event_id", "at", "stream", "type", "trace_id"})

R = TypeVar("R")


class CycleBackend(Protocol):
    """The call of :class:`memoria_runtime.bus.memory_requests.MemoryClient` this API uses."""

    async def cycle(self, user_id: str, cycle_id: str) -> CycleFound | CycleFailure:
        """One of the user's cycles with its trace."""


NOT_FOUND_ERROR: Final[dict[int | str, dict[str, Any]]] = {
    status.HTTP_404_NOT_FOUND: {
        "model": ErrorBody,
        "description": "No such cycle of yours (another user's cycle gets the same answer), "
        "or one whose trace has passed MEMORIA_CYCLE_TRACE_RETENTION_DAYS.",
    }
}


def not_found() -> HTTPException:
    # A fixed body: an unknown cycle and another user's must be indistinguishable.
    return HTTPException(status.HTTP_404_NOT_FOUND, detail=CYCLE_NOT_FOUND)


async def answer(call: Awaitable[R | CycleFailure]) -> R:
    # The only cycle failure is "not found" (also for another user's cycle).
    return await reply_or_raise(call, CycleFailure, lambda _: not_found())


def body_of(cycle: Cycle) -> dict[str, Any]:
    """The cycle as JSON, each event without the fields its type does not have (a
    ``user.message`` has no ``step``): a trace is read by people, and a column of nulls
    hides what each event says."""
    body = cycle.model_dump(mode="json")
    body["events"] = [
        {
            key: value
            for key, value in event.items()
            if value is not None or key in _EVENT_FIELDS_ALWAYS
        }
        for event in body["events"]
    ]
    return body


def cycle_router(cycles: CycleBackend, tokens: Callable[[], TokenIssuer]) -> APIRouter:
    """The routes; ``tokens`` is called per request because the issuer exists only once the
    gateway has started."""
    router = APIRouter(prefix="/api/cycles", tags=["cycles"], responses=COMMON_ERRORS)
    User = Annotated[str, Depends(bearer_user(tokens))]

    @router.get(
        "/{cycle_id}", summary="A cycle's trace", response_model=Cycle, responses=NOT_FOUND_ERROR
    )
    async def get_cycle(
        cycle_id: Annotated[CycleId, Path(description="The cycle's id (`cyc_…`).")],
        user_id: User,
    ) -> JSONResponse:
        """Every message and event of one of your cycles, oldest first: the user message,
        the status lines, each step's request and outcome, the messages it posted, the end.
        Streamed pieces (`delta` frames) are not kept, only the complete messages they
        make. `trace_id` is the cycle's OpenTelemetry trace, for looking it up in your
        tracing backend; each event carries the trace id of its own envelope. An event
        has only the fields of its type."""
        found = await answer(cycles.cycle(user_id, cycle_id))
        return JSONResponse(body_of(found.cycle))

    return router

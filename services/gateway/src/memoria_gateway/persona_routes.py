"""``GET /api/personas``: the personas a thread can switch to.

A thread switches with ``PATCH /api/threads/{thread_id}/config`` ``{"persona": "<id>"}`` or
the ``session_config`` frame; the memory service refuses an id that is not configured (422).
Identities (the prompts) are configuration and stay on the server: clients get what they
need to offer a choice.
"""

# No `from __future__ import annotations`: FastAPI reads the route's annotations.
from collections.abc import Callable
from typing import Annotated

from fastapi import APIRouter, Depends
from pydantic import BaseModel, Field

from memoria_contracts.personas import PersonaId
from memoria_gateway.bearer import bearer_user
from memoria_gateway.memory_routes import COMMON_ERRORS
from memoria_runtime.auth import TokenIssuer
from memoria_runtime.personas import PersonaCatalog


class PersonaChoice(BaseModel):
    id: PersonaId
    name: str
    description: str


class PersonaList(BaseModel):
    default: PersonaId = Field(description="The persona of threads that did not choose one.")
    personas: list[PersonaChoice] = Field(description="The default first, then as configured.")


def persona_router(personas: PersonaCatalog, tokens: Callable[[], TokenIssuer]) -> APIRouter:
    router = APIRouter(prefix="/api/personas", tags=["personas"], responses=COMMON_ERRORS)
    User = Annotated[str, Depends(bearer_user(tokens))]
    listed = PersonaList(
        default=personas.default_id,
        personas=[PersonaChoice(id=p.id, name=p.name, description=p.description) for p in personas],
    )

    @router.get("", summary="List personas")
    async def list_personas(user_id: User) -> PersonaList:
        """The configured personas; switch a thread with `PATCH
        /api/threads/{thread_id}/config` `{"persona": "<id>"}`."""
        return listed

    return router

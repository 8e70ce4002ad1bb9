"""HTTP endpoints: the chat page, health, metrics, dev login, a thread's stored messages."""

from __future__ import annotations

import logging
from importlib.resources import files
from typing import Annotated

from fastapi import APIRouter, Header, HTTPException, Query, Request
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, Field, field_validator, model_validator

from memoria_contracts.events import ThreadId, UserId
from memoria_contracts.frames import MessageFrame
from memoria_gateway.core import Gateway
from memoria_gateway.dev_login import (
    MAX_NAME_CHARS,
    NOT_HERE,
    answers_on,
    clean_name,
    user_id_for,
)
from memoria_gateway.frames import message_frame
from memoria_gateway.memory_schemas import ErrorBody
from memoria_gateway.security_headers import PAGE_HEADERS
from memoria_gateway.user_rate_limit import per_user
from memoria_runtime import metrics
from memoria_runtime.auth import AuthError
from memoria_runtime.bus.request_reply import RpcError
from memoria_runtime.instance import instance_of

log = logging.getLogger("memoria.gateway.http")

STATIC = files("memoria_gateway") / "static"
# The page is plain ES modules: browsers must revalidate them (a cheap 304) rather than
# guess a freshness from Last-Modified and keep running yesterday's modules.
_REVALIDATE = {"Cache-Control": "no-cache"}
_DEFAULT_PAGE = 100
_MAX_PAGE = 1000


class TokenRequest(BaseModel):
    """Either a user id, as the services spell it, or the name a person typed (any script,
    spaces, accents), which the gateway maps to a stable user id (dev_login.py)."""

    user_id: UserId | None = None
    name: str | None = Field(
        default=None,
        max_length=4 * MAX_NAME_CHARS,  # before trimming; the cleaned name has its own bound
        description=f"A display name (trimmed, at most {MAX_NAME_CHARS} characters).",
    )

    @field_validator("name")
    @classmethod
    def _clean(cls, name: str | None) -> str | None:
        return None if name is None else clean_name(name)

    @model_validator(mode="after")
    def _one_of(self) -> TokenRequest:
        if (self.user_id is None) == (self.name is None):
            raise ValueError("give either user_id or name")
        return self


class LimitsResponse(BaseModel):
    max_message_chars: int = Field(
        description="The longest message text a `message` frame may carry, in characters "
        "(Unicode code points); a longer one is refused with a `too_large` error frame."
    )
    max_frame_bytes: int = Field(description="The largest WebSocket frame, in UTF-8 bytes.")


class TokenResponse(BaseModel):
    token: str
    user_id: str
    name: str | None = Field(default=None, description="The display name, when one was given.")


def http_router(gateway: Gateway) -> APIRouter:
    router = APIRouter()
    instance = instance_of(gateway.settings.auth)

    def user_from(authorization: str | None) -> str:
        token = (authorization or "").removeprefix("Bearer ").strip()
        try:
            return gateway.tokens().verify(token)
        except AuthError as exc:
            raise HTTPException(status_code=401, detail=str(exc)) from exc

    static_files = StaticFiles(directory=str(STATIC))

    @router.get("/", include_in_schema=False)
    async def index() -> FileResponse:
        return FileResponse(str(STATIC / "index.html"), headers={**_REVALIDATE, **PAGE_HEADERS})

    @router.get("/static/{path:path}", include_in_schema=False)
    async def static(path: str, request: Request) -> Response:
        """The page's files (ETag revalidated; StaticFiles refuses paths outside static/)."""
        response = await static_files.get_response(path, request.scope)
        response.headers.update(_REVALIDATE)
        return response

    @router.get("/livez")
    async def livez() -> JSONResponse:
        """Liveness: answered on the event loop, so an answer means the loop turns. Never
        looks at the broker: an outage there is not cured by restarting gateways."""
        return JSONResponse({"status": "ok"})

    @router.get("/healthz")
    @router.get("/readyz")
    async def healthz() -> JSONResponse:
        """Readiness: the broker answers (without it no message can be accepted). ``instance``
        says which Memoria this gateway serves (instance.py), for `memoria doctor`."""
        try:
            await gateway.redis.ping()
        except Exception as exc:
            return JSONResponse(
                {"status": "unavailable", "broker": str(exc), "instance": instance},
                status_code=503,
            )
        return JSONResponse(
            {"status": "ok", "connections": gateway.hub.count, "instance": instance}
        )

    @router.get("/metrics", include_in_schema=False)
    def prometheus_metrics() -> Response:
        """Prometheus metrics of this process. Always on: the gateway serves HTTP anyway, so
        it needs no MEMORIA_METRICS_PORT (which it ignores). Nothing in them names a user."""
        body, content_type = metrics.exposition()
        return Response(body, media_type=content_type)

    @router.get("/api/limits")
    async def limits() -> LimitsResponse:
        """What the gateway accepts, so a client can tell its user before sending rather
        than after (the settings MEMORIA_MAX_MESSAGE_CHARS and MEMORIA_MAX_FRAME_BYTES)."""
        settings = gateway.settings
        return LimitsResponse(
            max_message_chars=settings.gateway.max_message_chars,
            max_frame_bytes=settings.gateway.max_frame_bytes,
        )

    add_dev_login(router, gateway)

    @router.get(
        "/api/threads/{thread_id}/messages",
        dependencies=per_user(gateway.tokens, gateway.requests),
        responses={
            404: {"model": ErrorBody, "description": "No message `before` in this thread."},
            503: {"model": ErrorBody, "description": "The memory service is not answering."},
        },
    )
    async def thread_messages(
        thread_id: ThreadId,
        authorization: Annotated[str | None, Header()] = None,
        limit: Annotated[int, Query(ge=1, le=_MAX_PAGE)] = _DEFAULT_PAGE,
        before: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
    ) -> list[MessageFrame]:
        """The thread's newest ``limit`` stored messages, oldest first (status lines are never
        stored); with ``before`` (a message id from an earlier page), the ``limit`` messages
        just older than that one: page back until a page comes back shorter than ``limit``."""
        user_id = user_from(authorization)
        try:
            page = await gateway.memory.shown_history(
                user_id, thread_id, limit=limit, before_id=before
            )
        except TimeoutError as exc:
            raise HTTPException(503, detail="the memory service is not answering") from exc
        except RpcError as exc:
            if exc.code == "not_found":
                raise HTTPException(404, detail=f"no message {before!r} in this thread") from exc
            log.error("memory service protocol error: %s", exc)
            raise HTTPException(502, detail="the memory service gave a bad reply") from exc
        # Tool calls and results are history for the LLM, not messages to show; an
        # older memory service still sends them.
        records = [r for r in page.messages if not r.tool_record]
        # Each ended cycle's summary goes on its last message in the page (the latest wins).
        last_of_cycle = {r.cycle_id: r.id for r in records if r.cycle_id}
        end_on = {last_of_cycle[s.cycle_id]: s for s in page.cycles if s.cycle_id in last_of_cycle}
        return [
            message_frame(r, thread_id, cycle_id=r.cycle_id, cycle_end=end_on.get(r.id))
            for r in records
        ]

    return router


def add_dev_login(router: APIRouter, gateway: Gateway) -> None:
    """``POST /api/token``: the dev login."""

    @router.post(
        "/api/token",
        responses={
            403: {"model": ErrorBody, "description": "Not addressed to this machine."},
            404: {"model": ErrorBody, "description": "The dev login is off."},
        },
    )
    async def token(
        request: TokenRequest, host: Annotated[str | None, Header(include_in_schema=False)] = None
    ) -> TokenResponse:
        """Dev login: a token for any user id, without a password. Off unless
        MEMORIA_DEV_LOGIN is true (the default only in the embedded profile); answers only
        requests addressed to this machine (``Host``) unless MEMORIA_DEV_LOGIN_HOSTS names
        others."""
        if not gateway.settings.auth.dev_login:
            raise HTTPException(status_code=404, detail="dev login is disabled")
        if not answers_on(host, gateway.settings.auth.dev_login_hosts):
            raise HTTPException(status_code=403, detail=NOT_HERE)
        if request.name is not None:
            user_id = user_id_for(request.name)
            token = gateway.tokens().issue(user_id, name=request.name)
            return TokenResponse(token=token, user_id=user_id, name=request.name)
        assert request.user_id is not None  # one of the two, checked by TokenRequest
        return TokenResponse(token=gateway.tokens().issue(request.user_id), user_id=request.user_id)

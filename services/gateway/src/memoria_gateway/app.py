"""Wiring of the gateway: HTTP + WebSocket (FastAPI) around the broker's fan-out."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from fastapi.staticfiles import StaticFiles
from fastapi_offline import FastAPIOffline
from opentelemetry.sdk.trace import TracerProvider
from redis.exceptions import RedisError

from memoria_gateway import SERVICE_NAME, openapi, validation_errors
from memoria_gateway.body_limit import BULK_PATHS, BodyLimit
from memoria_gateway.core import build_broker
from memoria_gateway.cycle_routes import cycle_router
from memoria_gateway.http_routes import STATIC, http_router
from memoria_gateway.memory_routes import memory_router
from memoria_gateway.openai_routes import error_body, openai_router
from memoria_gateway.persona_routes import persona_router
from memoria_gateway.security_headers import SecurityHeaders
from memoria_gateway.thread_routes import thread_router
from memoria_gateway.user_rate_limit import per_user
from memoria_gateway.ws import ws_router
from memoria_runtime.auth import TokenIssuer
from memoria_runtime.health import Health
from memoria_runtime.lifecycle import Lifecycle
from memoria_runtime.personas import load_personas
from memoria_runtime.service import service_lifecycle
from memoria_runtime.settings import GatewayProcessSettings

log = logging.getLogger("memoria.gateway")


def create_app(
    settings: GatewayProcessSettings,
    provider: TracerProvider | None = None,
    health: Health | None = None,
    *,
    freeze_heap: bool = False,
) -> FastAPI:
    """``health`` (when given) is kept up to date for the ops port; the gateway's own
    ``/livez`` and ``/readyz`` answer from the request itself. ``freeze_heap``: as in
    service_lifecycle. Starts and stops with the lifecycle every service has (service.py)."""
    personas = load_personas(settings.cycle)  # a bad personas file stops the gateway here
    broker, gateway = build_broker(settings, provider)
    own = Lifecycle()

    async def issue_tokens() -> None:
        gateway.issuer = TokenIssuer.from_settings(settings.auth)  # may create the secret file

    async def close_redis() -> None:
        await gateway.redis.aclose()

    async def say_ready() -> None:
        log.info(
            "gateway ready on http://%s:%d/",
            settings.gateway.gateway_host,
            settings.gateway.gateway_port,
        )

    own.add(issue_tokens, close_redis)
    own.add(broker.start, broker.stop)
    own.add(gateway.quiet.start, gateway.quiet.stop)
    own.add(say_ready)
    lifecycle = service_lifecycle(
        SERVICE_NAME, settings.bus, own, health or Health(), freeze_heap=freeze_heap
    )

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await lifecycle.start()
        try:
            yield
        finally:
            await lifecycle.stop()

    # /docs and /redoc with their Swagger UI and ReDoc files served by the gateway itself
    # (from the fastapi-offline wheel): the stock pages load them from a CDN, and are blank
    # on a machine with no network.
    app = FastAPIOffline(title="Memoria gateway", version="0.1.0", lifespan=lifespan)

    @app.exception_handler(RedisError)
    async def broker_unavailable(request: Request, exc: RedisError) -> JSONResponse:
        # The broker is away (or was restarted and a pooled connection is stale): the
        # request did nothing, so it is safe to send again, unlike what a 500 says.
        log.error("%s %s: the broker failed: %r", request.method, request.url.path, exc)
        return JSONResponse({"detail": "the broker is unavailable; try again"}, status_code=503)

    validation_errors.install(app)  # a 422 that echoes a lone surrogate is not a 500
    app.include_router(http_router(gateway))
    limited = per_user(gateway.tokens, gateway.requests)  # a signed-in user's allowance
    app.include_router(memory_router(gateway.memory, gateway.tokens), dependencies=limited)
    app.include_router(thread_router(gateway.memory, gateway.tokens), dependencies=limited)
    app.include_router(cycle_router(gateway.memory, gateway.tokens), dependencies=limited)
    app.include_router(persona_router(personas, gateway.tokens), dependencies=limited)
    app.include_router(openai_router(gateway))
    app.include_router(ws_router(gateway))
    app.mount("/static", StaticFiles(directory=str(STATIC)), name="static")

    def body_limit(path: str) -> int:
        bulk = path in BULK_PATHS
        return settings.gateway.max_bulk_body_bytes if bulk else settings.gateway.max_body_bytes

    app.add_middleware(BodyLimit, limit_for=body_limit, refusal=refusal_body)
    app.add_middleware(SecurityHeaders)
    openapi.install(app)
    return app


def refusal_body(path: str, text: str) -> dict[str, object]:
    """A 413 the middleware answers before any route runs, in the shape of the route's own
    errors: OpenAI's error object under /v1, ``{"detail": ...}`` elsewhere."""
    if path.startswith("/v1/"):
        return error_body(413, text).model_dump()
    return {"detail": text}

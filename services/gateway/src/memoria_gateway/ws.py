"""The WebSocket: authenticate (socket_auth.py), resume where the client left off
(``?since=``), then turn each client frame into an accepted message or an error frame. The
socket stays open after an error: a bad frame, or one too many, costs only that frame."""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Query, WebSocket, WebSocketDisconnect
from redis.exceptions import RedisError

from memoria_contracts.cycles import cycle_id_for
from memoria_contracts.frames import (
    SOCKET_REFUSALS,
    AcceptedFrame,
    ClientSessionConfig,
    ErrorCode,
    ErrorFrame,
    SessionConfigFrame,
)
from memoria_gateway.core import Gateway
from memoria_gateway.hub import SLOW_CLIENT_CLOSE_CODE, Connection, SocketGone
from memoria_gateway.intake import ADMIT_TIMEOUT_S
from memoria_gateway.origins import origin_allowed
from memoria_gateway.rate_limit import TokenBucket, retry_after_seconds
from memoria_gateway.replay import resume
from memoria_gateway.session_frames import answer_session_config
from memoria_gateway.socket_auth import accept_and_authenticate
from memoria_gateway.user_rate_limit import UserRateLimit
from memoria_runtime.auth import AuthError

FOREIGN_ORIGIN_CLOSE = 1008
"""Policy violation; before the handshake is accepted, the client sees an HTTP 403."""


async def refuse(websocket: WebSocket, code: ErrorCode, message: str) -> None:
    """Refuse the socket itself: one error frame, then its close code."""
    await websocket.send_text(ErrorFrame(code=code, message=message).model_dump_json())
    await websocket.close(code=SOCKET_REFUSALS[code], reason=code.replace("_", " "))


def rate_limited(bucket: TokenBucket, wait: float) -> ErrorFrame:
    return _too_many(
        f"at most {bucket.per_minute} a minute on one connection (bursts of {bucket.burst})",
        wait,
    )


def user_rate_limited(limit: UserRateLimit, wait: float) -> ErrorFrame:
    return _too_many(
        f"at most {limit.per_minute} a minute for one user, all connections together", wait
    )


def _too_many(limit: str, wait: float) -> ErrorFrame:
    seconds = retry_after_seconds(wait)
    return ErrorFrame(
        code="rate_limited",
        message=f"too many messages: {limit}; try again in {seconds} s",
        retry_after=seconds,
    )


ROUTES_AWAY = ErrorFrame(
    code="broker_unavailable",
    message="this server could not register the connection with the message broker; "
    "connect again (with ?since= to get what you missed)",
)

BROKER_AWAY = ErrorFrame(
    code="broker_unavailable",
    message="the message could not be checked against your rate limit; nothing was "
    "accepted, please send it again",
)


async def user_allowance(gateway: Gateway, user_id: str, bucket: TokenBucket) -> ErrorFrame | None:
    """Count the message against the user's limit over all their sockets (in the broker):
    None when it may go on, else the refusal (the socket's own token given back)."""
    if gateway.messages is None:
        return None
    try:
        async with asyncio.timeout(ADMIT_TIMEOUT_S):
            wait = await gateway.messages.take(user_id)
    except (RedisError, OSError, TimeoutError):
        bucket.give_back()
        return BROKER_AWAY
    if wait > 0:
        bucket.give_back()  # refused all the same: it costs this socket nothing
        return user_rate_limited(gateway.messages, wait)
    return None


async def joined(gateway: Gateway, connection: Connection) -> bool:
    """The socket takes the user's frames from now on: added to the hub and, with routed
    fan-out, registered in the broker (before a replay is read: a frame is then replayed, or
    delivered live, or both and sent once). False when the broker could not be told: the
    socket was closed, to connect again (also when the broker does not answer in time: a
    partition would otherwise hold the socket without a word)."""
    gateway.hub.add(connection)
    try:
        async with asyncio.timeout(ADMIT_TIMEOUT_S):
            await gateway.routes.enter(connection.user_id)
    except (RedisError, OSError, TimeoutError):
        await gateway.hub.remove(connection)
        await connection.websocket.send_text(ROUTES_AWAY.model_dump_json())
        await connection.websocket.close(code=SLOW_CLIENT_CLOSE_CODE, reason="try again later")
        return False
    return True


def ws_router(gateway: Gateway) -> APIRouter:
    router = APIRouter()
    settings = gateway.settings
    allowed_origins = settings.gateway.allowed_origins

    async def answer(
        user_id: str, raw: str | bytes, bucket: TokenBucket
    ) -> AcceptedFrame | SessionConfigFrame | ErrorFrame:
        parsed = gateway.intake.parse(raw)
        if isinstance(parsed, ErrorFrame):
            return parsed  # a frame that is refused anyway costs no token
        wait = bucket.take()
        if wait > 0:
            return rate_limited(bucket, wait)
        refused = await user_allowance(gateway, user_id, bucket)
        if refused is not None:
            return refused
        if isinstance(parsed, ClientSessionConfig):
            return await answer_session_config(gateway.memory, user_id, parsed)
        reply = await gateway.intake.submit(user_id, parsed)
        if isinstance(reply, AcceptedFrame) and not reply.duplicate:
            gateway.quiet.accepted(
                user_id, parsed.thread_id, cycle_id_for(reply.id), parsed.content
            )
        return reply

    @router.websocket("/ws")
    async def websocket_endpoint(
        websocket: WebSocket,
        token: Annotated[str | None, Query()] = None,
        since: Annotated[str | None, Query()] = None,
    ) -> None:
        headers = websocket.headers
        if not origin_allowed(headers.get("origin"), headers.get("host"), allowed_origins):
            # Refused at the handshake (HTTP 403): a page of another site learns nothing.
            await websocket.close(code=FOREIGN_ORIGIN_CLOSE)
            return
        try:
            user_id = await accept_and_authenticate(websocket, gateway.tokens(), token)
        except AuthError as exc:
            await refuse(websocket, "unauthorized", str(exc))
            return
        except WebSocketDisconnect:
            return  # left before saying who it is
        # Each socket has its own message bucket, so the cap bounds one user's messages too.
        # Checked and added with no await in between: two sockets of one user cannot both
        # take the last place.
        cap = settings.gateway.ws_max_sockets_per_user
        if gateway.hub.sockets_of(user_id) >= cap:
            await refuse(
                websocket,
                "too_many_connections",
                f"at most {cap} connections per user on one server: close another tab or "
                "window and connect again",
            )
            return
        connection = Connection(websocket, user_id)
        if since is not None:
            connection.hold_live()  # before it is registered: nothing may overtake the replay
        bucket = TokenBucket(settings.gateway.ws_messages_per_minute, settings.gateway.ws_burst)
        if not await joined(gateway, connection):
            return
        try:
            if since is not None:
                await resume(connection, gateway.chat_out, since)
            while True:
                incoming = await websocket.receive()
                if incoming["type"] == "websocket.disconnect":
                    break
                raw: str | bytes = incoming.get("text") or incoming.get("bytes") or b""
                reply = await answer(user_id, raw, bucket)
                connection.send(reply.model_dump_json())
        except (WebSocketDisconnect, SocketGone):
            pass
        finally:
            gateway.routes.leave(user_id)
            await gateway.hub.remove(connection)

    return router

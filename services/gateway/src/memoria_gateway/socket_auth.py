"""Who is on a WebSocket. Three ways to give the token, none of them required to be the URL:

1. ``Sec-WebSocket-Protocol: memoria.v1, bearer.<token>`` (``new WebSocket(url,
   ["memoria.v1", "bearer." + token])`` in a browser): the handshake carries it, and only
   ``memoria.v1`` is echoed back;
2. ``?token=<token>``: older clients; URLs end up in logs and histories;
3. none in the handshake: the first frame, ``{"type": "auth", "token": "..."}``, within
   :data:`AUTH_FRAME_TIMEOUT_S`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from fastapi import WebSocket, WebSocketDisconnect
from pydantic import ValidationError

from memoria_contracts.frames import BEARER_SUBPROTOCOL_PREFIX, SOCKET_SUBPROTOCOL, ClientAuth
from memoria_runtime.auth import AuthError, TokenIssuer

AUTH_FRAME_TIMEOUT_S: Final = 10.0
"""Long enough for a slow link's first frame; short enough that a socket that never says who
it is does not hold a place for long."""
_AUTH_FRAME_HINT: Final = (
    'the first frame must be {"type": "auth", "token": "<token>"} (or offer the subprotocols '
    '"memoria.v1" and "bearer.<token>" when connecting)'
)


@dataclass(frozen=True)
class Handshake:
    """What the upgrade request offered: a token (or None) and the subprotocol to accept."""

    token: str | None
    subprotocol: str | None


def read_handshake(offered: Sequence[str], query_token: str | None) -> Handshake:
    """The token of the ``bearer.`` subprotocol, else of the query; ``memoria.v1`` is
    accepted when offered (never the one that holds the token)."""
    bearer = [
        protocol.removeprefix(BEARER_SUBPROTOCOL_PREFIX)
        for protocol in offered
        if protocol.startswith(BEARER_SUBPROTOCOL_PREFIX)
    ]
    token = (bearer[0] if bearer else None) or query_token or None
    return Handshake(token, SOCKET_SUBPROTOCOL if SOCKET_SUBPROTOCOL in offered else None)


async def token_from_first_frame(websocket: WebSocket, wait_s: float) -> str:
    """The token of the socket's first frame. AuthError for a frame that is not an auth
    frame or none in time; WebSocketDisconnect if the client left."""
    try:
        incoming = await asyncio.wait_for(websocket.receive(), wait_s)
    except TimeoutError:
        raise AuthError(f"no token within {wait_s:g} s: {_AUTH_FRAME_HINT}") from None
    if incoming["type"] == "websocket.disconnect":
        raise WebSocketDisconnect(incoming.get("code", 1000))
    raw: str | bytes = incoming.get("text") or incoming.get("bytes") or b""
    try:
        frame = ClientAuth.model_validate_json(raw)
    except ValidationError:
        # Never the validation's own text: it may quote the frame, token and all.
        raise AuthError(_AUTH_FRAME_HINT) from None
    return frame.token.get_secret_value()


async def accept_and_authenticate(
    websocket: WebSocket,
    tokens: TokenIssuer,
    query_token: str | None,
    wait_s: float = AUTH_FRAME_TIMEOUT_S,
) -> str:
    """Accept the socket and return its user id; AuthError when the token is missing or
    refused (the caller refuses the socket), WebSocketDisconnect if the client left."""
    handshake = read_handshake(websocket.scope.get("subprotocols", []), query_token)
    await websocket.accept(subprotocol=handshake.subprotocol)
    token = handshake.token or await token_from_first_frame(websocket, wait_s)
    return tokens.verify(token)

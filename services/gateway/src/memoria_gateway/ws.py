"""The WebSocket: authenticate, then turn each client frame into an accepted message or an
error frame. The socket stays open after an error: a bad frame costs only that frame."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, WebSocket, WebSocketDisconnect

from memoria_contracts.frames import ErrorFrame
from memoria_gateway.auth import AuthError
from memoria_gateway.core import Gateway
from memoria_gateway.hub import Connection

UNAUTHORIZED_CLOSE_CODE = 4401  # 4000-4999 are application codes; this mirrors HTTP 401


def ws_router(gateway: Gateway) -> APIRouter:
    router = APIRouter()

    @router.websocket("/ws")
    async def websocket_endpoint(
        websocket: WebSocket, token: Annotated[str | None, Query()] = None
    ) -> None:
        await websocket.accept()
        try:
            user_id = gateway.tokens().verify(token)
        except AuthError as exc:
            refusal = ErrorFrame(code="unauthorized", message=str(exc))
            await websocket.send_text(refusal.model_dump_json())
            await websocket.close(code=UNAUTHORIZED_CLOSE_CODE, reason="unauthorized")
            return
        connection = Connection(websocket, user_id)
        gateway.hub.add(connection)
        try:
            while True:
                incoming = await websocket.receive()
                if incoming["type"] == "websocket.disconnect":
                    break
                raw: str | bytes = incoming.get("text") or incoming.get("bytes") or b""
                parsed = gateway.intake.parse(raw)
                reply = (
                    parsed
                    if isinstance(parsed, ErrorFrame)
                    else await gateway.intake.submit(user_id, parsed)
                )
                connection.send(reply.model_dump_json())
        except WebSocketDisconnect:
            pass
        finally:
            await gateway.hub.remove(connection)

    return router

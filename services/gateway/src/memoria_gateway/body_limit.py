"""Request bodies are bounded before they are read: an ASGI middleware in front of every route.

A declared ``Content-Length`` over the limit is refused before a byte of the body is read;
a body without one (chunked) is counted as it arrives and refused the moment it passes the
limit. FastAPI reads a body before it resolves a route's dependencies, so the 413 comes
before the token check and before any parsing, and a huge body costs the gateway no more
memory than the limit, whoever sends it. The 413 closes the connection: the rest of the body
is not read, and a client still sending sees the answer at once (ADR 0027 says why this is
ours rather than Starlette's ``max_body_size``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Final

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

CONTENT_TOO_LARGE: Final = 413
BULK_PATHS: Final = frozenset({"/api/memories/batch", "/v1/chat/completions"})
"""Routes whose bodies are big by design: an import (up to 256 memories), and the
OpenAI-compatible chat, whose clients send the whole conversation with every message."""
_CLOSE: Final = (b"connection", b"close")

Refusal = Callable[[str, str], dict[str, object]]
"""The error body of a 413 on a path, given its text (routes differ in their error shape)."""


def too_large_text(limit: int) -> str:
    return f"The request body is larger than {limit} bytes, the most this route takes."


class BodyTooLarge(HTTPException):
    """Raised from ``receive`` once the body passes its limit. An HTTPException, so that
    whatever reads the body (FastAPI turns other errors into a 400) lets it through to the
    app's handling of HTTP errors, which answers 413 in the route's own error shape."""

    def __init__(self, limit: int) -> None:
        super().__init__(CONTENT_TOO_LARGE, too_large_text(limit))


class BodyLimit:
    """Refuses bodies larger than ``limit_for(path)`` bytes with 413; a 413 the middleware
    sends itself carries ``refusal(path, text)``."""

    def __init__(self, app: ASGIApp, limit_for: Callable[[str], int], refusal: Refusal) -> None:
        self.app = app
        self.limit_for = limit_for
        self.refusal = refusal

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit_for(scope["path"])
        declared = _content_length(scope)
        if declared is not None and declared > limit:
            await self._refuse(scope, send, limit)
            return
        received = 0
        over = answered = False

        async def counted_receive() -> Message:
            nonlocal received, over
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    over = True
                    raise BodyTooLarge(limit)
            return message

        async def watched_send(message: Message) -> None:
            nonlocal answered
            if message["type"] == "http.response.start":
                answered = True
                if over:  # the app answered the 413 itself, in its route's error shape
                    message = {**message, "headers": [*message.get("headers", []), _CLOSE]}
            await send(message)

        try:
            await self.app(scope, counted_receive, watched_send)
        except BodyTooLarge:
            if answered:  # too late for a 413: the connection is dropped instead
                raise
            await self._refuse(scope, send, limit)

    async def _refuse(self, scope: Scope, send: Send, limit: int) -> None:
        body = json.dumps(self.refusal(scope["path"], too_large_text(limit))).encode()
        await send(
            {
                "type": "http.response.start",
                "status": CONTENT_TOO_LARGE,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    _CLOSE,
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


def _content_length(scope: Scope) -> int | None:
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None  # uvicorn refuses a malformed one before the app sees it
    return None

"""Headers that keep the page in its own frame and its files what they say they are.

Every answer says ``X-Content-Type-Options: nosniff`` (a file is run or shown only as its
declared type) and ``X-Frame-Options: DENY`` (no other site frames the page to trick clicks
on it). The page itself comes with a Content-Security-Policy that lets it load scripts,
styles, images and connections from the gateway alone: no inline script or style, nothing
from another host, no plugins, no ``<base>``, and no framing (the page runs none of those;
the browser suite runs it under this policy).
"""

from __future__ import annotations

from typing import Final

from starlette.types import ASGIApp, Message, Receive, Scope, Send

PAGE_POLICY: Final = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "font-src 'self'",
        "connect-src 'self'",  # the API and, in CSP level 3 browsers, ws(s):// of this host
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)
PAGE_HEADERS: Final = {
    "Content-Security-Policy": PAGE_POLICY,
    "Referrer-Policy": "no-referrer",
}
"""The page's own (the chat at ``/``); the API docs at /docs run inline scripts."""

_EVERY_ANSWER: Final = [(b"x-content-type-options", b"nosniff"), (b"x-frame-options", b"DENY")]


class SecurityHeaders:
    """Adds ``nosniff`` and ``DENY`` to every HTTP answer."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *_EVERY_ANSWER]}
            await send(message)

        await self.app(scope, receive, with_headers)

"""Typed errors: one class per way the gateway refuses, with what a program needs to react."""

from __future__ import annotations

from typing import Any

import httpx


class MemoriaError(Exception):
    """Anything this client raises."""


class GatewayUnreachable(MemoriaError):
    """No answer from the gateway at all: not running, wrong URL, network down."""


class UnreadableAnswer(MemoriaError):
    """The gateway answered, but not in the documented format (another program on the port,
    a proxy's error page, a gateway of another version)."""


class APIError(MemoriaError):
    """The gateway refused the request. ``detail`` is its explanation (a text, or FastAPI's
    list of field errors for a 422)."""

    def __init__(self, status_code: int, detail: Any, *, method: str = "", url: str = "") -> None:
        self.status_code = status_code
        self.detail = detail
        self.method = method
        self.url = url
        where = f" ({method} {url})" if method else ""
        super().__init__(f"{status_code}{where}: {describe(detail)}")


class AuthenticationError(APIError):
    """401: no token, a forged or an expired one."""


class NotFound(APIError):
    """404: no such memory, thread or cycle of yours (another user's looks the same)."""


class InvalidRequest(APIError):
    """400 or 422: the request was refused as it is; ``errors`` lists the field errors."""

    @property
    def errors(self) -> list[dict[str, Any]]:
        if isinstance(self.detail, list):
            return [e for e in self.detail if isinstance(e, dict)]
        return []


class RateLimited(APIError):
    """429: too many requests; ``retry_after`` is the wait in seconds the gateway asked for."""

    def __init__(self, *args: Any, retry_after: float | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.retry_after = retry_after


class Unavailable(APIError):
    """503: the memory service or the broker is not answering; safe to retry."""


class ChatError(MemoriaError):
    """The chat socket refused a frame (an ``error`` frame) or closed before the cycle ended.
    ``code`` is the protocol's error code (``unauthorized``, ``rate_limited``…)."""

    def __init__(self, code: str, message: str, retry_after: int | None = None) -> None:
        self.code = code
        self.message = message
        self.retry_after = retry_after
        super().__init__(f"{code}: {message}")


class ChatClosed(ChatError):
    """The chat connection is over: the gateway refused the socket (``code``
    ``unauthorized`` or ``too_many_connections``; reconnecting would be refused again), every
    reconnection failed (``connection_lost``), or the program closed it (``closed``)."""


def describe(detail: Any) -> str:
    """A refusal's detail on one line: FastAPI's field errors as their sentences (the
    gateway's name the field: "Content is empty."), or as ``field: message`` when the
    message is a validator's fragment ("Field required")."""
    if isinstance(detail, list):
        parts = []
        for error in detail:
            if isinstance(error, dict):
                message = str(error.get("msg", error))
                if _is_sentence(message):
                    parts.append(message)
                    continue
                loc = ".".join(str(p) for p in error.get("loc", []) if p not in ("body", "query"))
                parts.append(f"{loc or 'request'}: {message}")
            else:
                parts.append(str(error))
        return " ".join(parts) if all(_is_sentence(p) for p in parts) else "; ".join(parts)
    return str(detail)


def _is_sentence(message: str) -> bool:
    return message[:1].isupper() and message.endswith((".", "?", "!"))


def retry_after(response: httpx.Response) -> float | None:
    """``Retry-After`` in seconds (the gateway sends whole seconds; an HTTP date is ignored)."""
    value = response.headers.get("Retry-After")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


def error_for(response: httpx.Response) -> APIError:
    """The typed error for a refused response."""
    try:
        body = response.json()
        detail = body.get("detail", body) if isinstance(body, dict) else body
    except ValueError:
        detail = response.text or response.reason_phrase
    status = response.status_code
    where = {
        "method": response.request.method,
        "url": str(response.request.url.copy_with(query=None)),
    }
    if status == 401:
        return AuthenticationError(status, detail, **where)
    if status == 404:
        return NotFound(status, detail, **where)
    if status in (400, 422):
        return InvalidRequest(status, detail, **where)
    if status == 429:
        return RateLimited(status, detail, retry_after=retry_after(response), **where)
    if status == 503:
        return Unavailable(status, detail, **where)
    return APIError(status, detail, **where)

"""Which web pages may open the WebSocket: the gateway's own, and the origins
MEMORIA_ALLOWED_ORIGINS names.

A browser sends ``Origin`` with every WebSocket handshake and lets any page connect
anywhere: without this check, a page on any site a user visits could open a socket to the
gateway on their machine. Clients that are not browsers (the CLI, the Python client, the
MCP server) send no ``Origin`` and are not concerned; nothing a browser page can do removes
the header.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final
from urllib.parse import urlsplit

ANY_ORIGIN: Final = "*"
_DEFAULT_PORTS: Final = {"http": 80, "https": 443, "ws": 80, "wss": 443}


def _site(origin: str) -> tuple[str, str] | None:
    """``(scheme, host[:port])`` of an origin, in lower case, without the scheme's default
    port; None for what is no origin (``null``, a bare word)."""
    parts = urlsplit(origin.strip().lower())
    if not parts.scheme or not parts.hostname:
        return None
    try:
        port = parts.port
    except ValueError:
        return None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    if port is None or port == _DEFAULT_PORTS.get(parts.scheme):
        return parts.scheme, host
    return parts.scheme, f"{host}:{port}"


def same_site(origin: str, host_header: str | None) -> bool:
    """The page comes from the address the request was sent to (its ``Host``), whatever
    the scheme: behind a TLS proxy an ``https://`` page reaches the gateway in plain HTTP."""
    site = _site(origin)
    if site is None or not host_header:
        return False
    scheme, netloc = site
    host = host_header.strip().lower()
    default = f":{_DEFAULT_PORTS[scheme]}" if scheme in _DEFAULT_PORTS else None
    if default is not None and host.endswith(default):
        host = host.removesuffix(default)
    return netloc == host


def origin_allowed(origin: str | None, host_header: str | None, allowed: Sequence[str]) -> bool:
    if origin is None:  # not a browser
        return True
    if ANY_ORIGIN in allowed or same_site(origin, host_header):
        return True
    site = _site(origin)
    return site is not None and site in {_site(entry) for entry in allowed}

"""An authenticated HTTP client for commands that use a running gateway's API."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import httpx
import tenacity

from memoria_runtime.settings import Settings

TOKEN_ENV: Final = "MEMORIA_TOKEN"
URL_ENV: Final = "MEMORIA_URL"
LOOPBACK: Final = "127.0.0.1"
TOKEN_PATH: Final = "/api/token"
HTTP_TIMEOUT_S: Final = 60.0
"""Longer than the gateway waits for the memory service (two tries of its RPC timeout), and
a save embeds its bindings first, which takes a while on a CPU."""
LOOPBACK_HOSTS: Final = frozenset({"127.0.0.1", "localhost", "::1"})
RATE_LIMITED_TRIES: Final = 20
"""A request refused for the user's request rate (429) is sent again after the gateway's
``Retry-After``, this many times in all: a long import goes on at the allowed pace."""
MAX_RETRY_AFTER_S: Final = 60.0
DEFAULT_RETRY_AFTER_S: Final = 1.0
"""The wait when a refusal names none (or not as a number)."""


class GatewayError(Exception):
    """What stops a command as a whole: no credentials, gateway unreachable, token refused."""


def gateway_url(
    url: str | None = None,
    *,
    settings: Settings | None = None,
    environ: Mapping[str, str] | None = None,
) -> str:
    """Where every command finds the gateway: ``--url``, else ``$MEMORIA_URL``, else this
    machine's port of `memoria run`'s gateway (MEMORIA_GATEWAY_PORT, as the settings read
    it: environment, then .env). One rule, so that no command talks to another gateway
    than the others."""
    chosen = url or (os.environ if environ is None else environ).get(URL_ENV)
    if chosen:
        return chosen
    port = (Settings() if settings is None else settings).gateway_port
    return f"http://{LOOPBACK}:{port}"


@dataclass(frozen=True)
class Connection:
    """Where the gateway is and who to be: a token, or a user id for the dev login."""

    url: str
    token: str | None = None
    user: str | None = None
    transport: httpx.AsyncBaseTransport | None = field(default=None, compare=False)
    """Tests pass the gateway's ASGI app here; None is real HTTP."""


def token_from(connection: Connection, environ: Mapping[str, str] | None = None) -> str | None:
    """The token to send, or None when the dev login is to make one for ``user``. An
    explicit --user wins over a token in the environment; both flags at once are a mistake."""
    if connection.token and connection.user:
        raise GatewayError("give --token or --user, not both")
    if connection.user:
        return None
    token = connection.token or (os.environ if environ is None else environ).get(TOKEN_ENV)
    if not token:
        raise GatewayError(
            f"no credentials: give --token (or set {TOKEN_ENV}), "
            "or --user USER_ID to use the gateway's dev login"
        )
    return token


def reason(exc: Exception) -> str:
    """An exception in a few words: its message, else its type (httpx's are often empty)."""
    return " ".join(str(exc).split()) or type(exc).__name__


def error_detail(response: httpx.Response) -> str:
    """The gateway's reason for a refusal: FastAPI's ``detail``, a text or field errors."""
    try:
        detail: Any = response.json().get("detail")
    except (ValueError, AttributeError):
        detail = None
    if isinstance(detail, str):
        return detail
    if isinstance(detail, list):
        return "; ".join(_field_error(error) for error in detail)
    return response.reason_phrase or f"HTTP {response.status_code}"


def _field_error(error: Any) -> str:
    if not isinstance(error, dict):
        return str(error)
    # Drop FastAPI's "body"/"query" head: the place within the record is what helps.
    loc = [str(part) for part in error.get("loc", []) if part not in {"body", "query"}]
    message = str(error.get("msg", "invalid"))
    return f"{'.'.join(loc)}: {message}" if loc else message


def _rate_limited(response: httpx.Response) -> bool:
    return response.status_code == httpx.codes.TOO_MANY_REQUESTS


def bounded_wait(seconds: float) -> float:
    """A wait the gateway named, kept between 0 and a minute."""
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_S)


def _retry_after(state: tenacity.RetryCallState) -> float:
    """The gateway's ``Retry-After`` (seconds; the default if absent or not a number)."""
    assert state.outcome is not None  # tenacity waits only after an attempt
    header = state.outcome.result().headers.get("Retry-After")
    try:
        return bounded_wait(float(header))
    except (TypeError, ValueError):
        return DEFAULT_RETRY_AFTER_S


async def send(client: httpx.AsyncClient, method: str, path: str, **kwargs: Any) -> httpx.Response:
    """One request; an unreachable gateway or a refused token ends the command, since every
    further request would fail the same way. A request refused for the rate (429: it did
    nothing) is sent again when the gateway says. Other refusals are the caller's to judge."""
    retrying = tenacity.AsyncRetrying(
        retry=tenacity.retry_if_result(_rate_limited),
        wait=_retry_after,
        stop=tenacity.stop_after_attempt(RATE_LIMITED_TRIES),
        retry_error_callback=lambda state: state.outcome.result() if state.outcome else None,
    )
    try:
        response: httpx.Response = await retrying(client.request, method, path, **kwargs)
    except httpx.TransportError as exc:
        raise GatewayError(
            f"cannot reach the gateway at {client.base_url} ({reason(exc)}): is Memoria "
            f"running there? --url or {URL_ENV} choose another address"
        ) from exc
    if response.status_code == httpx.codes.UNAUTHORIZED:
        raise GatewayError(f"the gateway refused the token: {error_detail(response)}")
    return response


async def dev_login(client: httpx.AsyncClient, user_id: str) -> str:
    response = await send(client, "POST", TOKEN_PATH, json={"user_id": user_id})
    if response.status_code == httpx.codes.NOT_FOUND:
        raise GatewayError(
            "the gateway's dev login is disabled (MEMORIA_DEV_LOGIN=false): "
            f"pass --token or set {TOKEN_ENV} instead of --user"
        )
    if response.is_error:
        raise GatewayError(f"dev login as {user_id!r} failed: {error_detail(response)}")
    return str(response.json()["token"])


def is_loopback(url: str) -> bool:
    return httpx.URL(url).host in LOOPBACK_HOSTS


@contextlib.asynccontextmanager
async def connect(
    connection: Connection, environ: Mapping[str, str] | None = None
) -> AsyncIterator[httpx.AsyncClient]:
    """A client that sends the bearer token with every request."""
    token = token_from(connection, environ)
    try:
        httpx.URL(connection.url)
    except httpx.InvalidURL as exc:
        raise GatewayError(f"not a gateway address: {connection.url!r} ({exc})") from exc
    async with httpx.AsyncClient(
        base_url=connection.url,
        timeout=HTTP_TIMEOUT_S,
        transport=connection.transport,
        # An HTTP(S)_PROXY in the environment must not see a gateway on this machine.
        trust_env=not is_loopback(connection.url),
    ) as client:
        if connection.user:  # token_from gave no token: the dev login makes one
            token = await dev_login(client, connection.user)
        client.headers["Authorization"] = f"Bearer {token}"
        yield client

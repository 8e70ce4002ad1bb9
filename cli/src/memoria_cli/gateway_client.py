"""Which gateway a command talks to and as whom, and a memoria_client logged in there."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Final

import httpx

from memoria_client import (
    APIError,
    AsyncMemoria,
    AuthenticationError,
    GatewayUnreachable,
    MemoriaError,
    NotFound,
    RetryPolicy,
)
from memoria_client.errors import describe
from memoria_runtime.instance import resolved_data_dir, with_recorded
from memoria_runtime.settings import DataSettings, GatewaySettings

TOKEN_ENV: Final = "MEMORIA_TOKEN"
URL_ENV: Final = "MEMORIA_URL"
LOOPBACK: Final = "127.0.0.1"
HTTP_TIMEOUT_S: Final = 60.0
"""Longer than the gateway waits for the memory service (two tries of its RPC timeout), and
a save embeds its bindings first, which takes a while on a CPU."""
LOOPBACK_HOSTS: Final = frozenset({"127.0.0.1", "localhost", "::1"})
WILDCARD_HOSTS: Final = frozenset({"0.0.0.0", "::", ""})
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
    settings: GatewaySettings | None = None,
    environ: Mapping[str, str] | None = None,
) -> str:
    """Where every command finds the gateway: ``--url``, else ``$MEMORIA_URL``, else the
    gateway of `memoria run` on this machine: MEMORIA_GATEWAY_PORT as the settings read it
    (environment, then .env), else the port the instance of MEMORIA_DATA_DIR wrote down
    when it started (instance.py), else 8000. One rule, so that no command talks to
    another gateway than the others."""
    chosen = url or (os.environ if environ is None else environ).get(URL_ENV)
    if chosen:
        return chosen
    if settings is None:
        settings = with_recorded(GatewaySettings(), resolved_data_dir(DataSettings()))
    host = settings.gateway_host
    if host in WILDCARD_HOSTS or is_loopback_name(host):
        host = LOOPBACK
    elif ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{settings.gateway_port}"


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


def reason(exc: BaseException) -> str:
    """An exception in a few words: its message, else its type (httpx's are often empty)."""
    return " ".join(str(exc).split()) or type(exc).__name__


def bounded_wait(seconds: float) -> float:
    """A wait the gateway named, kept between 0 and a minute."""
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_S)


def retry_policy() -> RetryPolicy:
    """A 429 did nothing: it is sent again when the gateway says, so a long import goes on
    at the allowed pace. A 503 is reported at once, as the command's refusal to judge."""
    return RetryPolicy(
        attempts=RATE_LIMITED_TRIES,
        backoff=DEFAULT_RETRY_AFTER_S,
        max_wait=MAX_RETRY_AFTER_S,
        unavailable=False,
    )


def refused(exc: APIError) -> str:
    """A refusal in a few words: its status and the gateway's reason."""
    return f"refused ({exc.status_code}): {describe(exc.detail)}"


async def _dev_login(client: AsyncMemoria, user_id: str) -> None:
    try:
        await client.login(user_id)
    except NotFound:
        raise GatewayError(
            "the gateway's dev login is disabled (MEMORIA_DEV_LOGIN=false): "
            f"pass --token or set {TOKEN_ENV} instead of --user"
        ) from None
    except APIError as exc:
        raise GatewayError(f"dev login as {user_id!r} failed: {describe(exc.detail)}") from exc


def is_loopback_name(host: str) -> bool:
    return host in LOOPBACK_HOSTS or host.startswith("127.")


def is_loopback(url: str) -> bool:
    return is_loopback_name(httpx.URL(url).host)


@contextlib.asynccontextmanager
async def connect(
    connection: Connection, environ: Mapping[str, str] | None = None
) -> AsyncIterator[AsyncMemoria]:
    """A client logged in as the connection says. What stops a command as a whole (the
    gateway unreachable, the token refused) leaves as a :class:`GatewayError`: every further
    request would fail the same way."""
    token = token_from(connection, environ)
    try:
        httpx.URL(connection.url)
    except httpx.InvalidURL as exc:
        raise GatewayError(f"not a gateway address: {connection.url!r} ({exc})") from exc
    client = AsyncMemoria(
        connection.url,
        token or "",
        timeout=HTTP_TIMEOUT_S,
        retry=retry_policy(),
        transport=connection.transport,
        # An HTTP(S)_PROXY in the environment must not see a gateway on this machine.
        trust_env=not is_loopback(connection.url),
    )
    try:
        async with client:
            if connection.user:  # token_from gave no token: the dev login makes one
                await _dev_login(client, connection.user)
            yield client
    except GatewayUnreachable as exc:
        # The client's own message names no reason: the cause it hides does.
        cause = exc.__context__ or exc
        raise GatewayError(
            f"cannot reach the gateway at {connection.url} ({reason(cause)}): is Memoria "
            f"running there? --url or {URL_ENV} choose another address"
        ) from exc
    except AuthenticationError as exc:
        raise GatewayError(f"the gateway refused the token: {describe(exc.detail)}") from exc
    except MemoriaError as exc:  # anything else the client could not get past: said, not a trace
        raise GatewayError(str(exc)) from exc

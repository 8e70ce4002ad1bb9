"""Redis clients that survive a broker restart.

A restarted broker leaves every pooled connection dead, and the first command on each one
fails with ``ConnectionError`` although the broker is back: without a retry, that is a 500
on the HTTP API and a failed step or RPC per pooled connection (docs/chaos.md, bug 3).
redis-py retries only where the client builds its own pool with the defaults; a pool built
outside (FastStream's broker, a blocking pool) does not retry at all. So every client here
uses the same explicit policy: a few quick reconnects with jittered backoff.

Retrying a command whose connection broke can run it twice when the broker received it
before the break; the bus tolerates that (consumers are idempotent by event id and the
thread gate's admission is keyed by the client's message id).

A connection reset under a command is a ``ConnectionError`` on asyncio's own event loop, but
uvloop (the gateway's, through uvicorn) raises a plain ``RuntimeError`` ("unable to perform
operation on <TCPTransport closed=True>; the handler is closed") when a command is written to
a transport the peer reset; redis-py drops that connection all the same, so it is retried
too, on a fresh one (docs/chaos.md, bug 12).

A broker that vanishes without closing its connections (its node lost, a network cut: no
reset ever arrives) is the other danger: a blocked read (``XREADGROUP BLOCK``, the reply
inbox) would wait on a silent socket for good. TCP keepalive makes the kernel notice within
``KEEPALIVE_IDLE_S + KEEPALIVE_INTERVAL_S * KEEPALIVE_PROBES`` seconds and fail the read;
the usual reconnect follows. A connect to a vanished address gives up after
``CONNECT_TIMEOUT_S`` instead of the kernel's two minutes of SYN retries.
"""

from __future__ import annotations

import socket
from typing import Any, cast

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import ConnectionError, RedisError, TimeoutError

from memoria_runtime.settings import BusSettings

RETRIES = 3
BACKOFF_BASE_S = 0.05
BACKOFF_CAP_S = 1.0
CONNECT_TIMEOUT_S = 5.0
KEEPALIVE_IDLE_S = 10
KEEPALIVE_INTERVAL_S = 3
KEEPALIVE_PROBES = 3


def _keepalive_options() -> dict[int, int]:
    """Linux names (the images and the dev machines); elsewhere the system's defaults."""
    wanted = {
        "TCP_KEEPIDLE": KEEPALIVE_IDLE_S,
        "TCP_KEEPINTVL": KEEPALIVE_INTERVAL_S,
        "TCP_KEEPCNT": KEEPALIVE_PROBES,
    }
    return {getattr(socket, name): value for name, value in wanted.items() if hasattr(socket, name)}


def connection_options() -> dict[str, Any]:
    """What every service connection to the broker uses besides its URL."""
    return {
        "retry": reconnecting(),
        "socket_connect_timeout": CONNECT_TIMEOUT_S,
        "socket_keepalive": True,
        "socket_keepalive_options": _keepalive_options(),
    }


def reconnecting() -> Retry:
    """A fresh retry policy (redis-py copies it per connection; never share one)."""
    return Retry(
        ExponentialWithJitterBackoff(base=BACKOFF_BASE_S, cap=BACKOFF_CAP_S),
        RETRIES,
        # Typed for RedisError only; redis-py catches whatever it is given.
        supported_errors=cast(
            "tuple[type[RedisError], ...]", (ConnectionError, TimeoutError, RuntimeError)
        ),
    )


def connect(settings: BusSettings) -> Redis:
    """A client with its own pool (redis-py's default size)."""
    return Redis.from_url(settings.effective_redis_url, **connection_options())


def connect_bounded(settings: BusSettings, *, max_connections: int, wait_s: float) -> Redis:
    """A client whose pool holds at most ``max_connections``; a command beyond them waits up
    to ``wait_s`` for a free one instead of failing at once ("Too many connections")."""
    pool = BlockingConnectionPool.from_url(
        settings.effective_redis_url,
        max_connections=max_connections,
        timeout=wait_s,
        **connection_options(),
    )
    return Redis.from_pool(pool)

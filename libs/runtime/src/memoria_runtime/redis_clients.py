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
"""

from __future__ import annotations

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import ConnectionError, TimeoutError

from memoria_runtime.settings import Settings

RETRIES = 3
BACKOFF_BASE_S = 0.05
BACKOFF_CAP_S = 1.0


def reconnecting() -> Retry:
    """A fresh retry policy (redis-py copies it per connection; never share one)."""
    return Retry(
        ExponentialWithJitterBackoff(base=BACKOFF_BASE_S, cap=BACKOFF_CAP_S),
        RETRIES,
        supported_errors=(ConnectionError, TimeoutError),
    )


def connect(settings: Settings) -> Redis:
    """A client with its own pool (redis-py's default size)."""
    return Redis.from_url(settings.effective_redis_url, retry=reconnecting())


def connect_bounded(settings: Settings, *, max_connections: int, wait_s: float) -> Redis:
    """A client whose pool holds at most ``max_connections``; a command beyond them waits up
    to ``wait_s`` for a free one instead of failing at once ("Too many connections")."""
    pool = BlockingConnectionPool.from_url(
        settings.effective_redis_url,
        max_connections=max_connections,
        timeout=wait_s,
        retry=reconnecting(),
    )
    return Redis.from_pool(pool)

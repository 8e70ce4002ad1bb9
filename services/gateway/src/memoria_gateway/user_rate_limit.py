"""How much one user may ask of the services per minute, whichever gateway they reach.

* HTTP API requests, ``MEMORIA_HTTP_REQUESTS_PER_MINUTE``: each costs a memory request, and
  a save or a search an embedding. A refused request did nothing and is answered ``429``
  with ``Retry-After``.
* Chat messages over all the user's sockets, ``MEMORIA_WS_USER_MESSAGES_PER_MINUTE``: each
  starts a thought cycle, that is LLM calls someone pays for. Each socket has its own
  limit besides (``rate_limit.py``), but a user may open many sockets on many gateways.

The counts live in the broker, keyed by user, so they hold across gateway replicas (a count
per process would let n replicas admit n times the limit). The ``limits`` library keeps
them: a sliding-window counter, two keys per user and limit, one Lua script per request,
over the gateway's own connection pool (ADR 15); on a cluster over a cluster client of its
own (``limits`` gives the two keys one hash tag).
"""

# No `from __future__ import annotations`: FastAPI reads the dependency's annotation, which
# names a closure variable that a string annotation could not be resolved to.

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Final
from urllib.parse import urlsplit, urlunsplit

from fastapi import Depends, HTTPException, status
from fastapi.params import Depends as Dependency
from limits import RateLimitItemPerMinute
from limits.aio.storage import RedisClusterStorage, RedisStorage
from limits.aio.strategies import SlidingWindowCounterRateLimiter
from redis.asyncio import Redis

from memoria_gateway.bearer import UserDependency, bearer_user
from memoria_gateway.rate_limit import retry_after_seconds
from memoria_runtime.auth import TokenIssuer

KEY_PREFIX: Final = "memoria:limits"
HTTP_REQUESTS: Final = "http"  # what a limit counts: a namespace of its keys
WS_MESSAGES: Final = "ws"


class UserRateLimit:
    """At most ``per_minute`` of one kind of request per user per sliding minute, every
    gateway counted."""

    def __init__(
        self, redis: Redis, per_minute: int, counted: str, *, cluster_url: str | None = None
    ) -> None:
        """``cluster_url``: the broker is a cluster, reached through this node's URL."""
        if per_minute < 1:
            raise ValueError("a rate limit needs at least one request a minute")
        self.per_minute = per_minute
        self._counted = counted
        storage: RedisStorage | RedisClusterStorage
        # A new cluster client meets its first commands one at a time (redis_clients.py).
        self._first_use: asyncio.Lock | None = None
        if cluster_url is not None:
            storage = RedisClusterStorage(
                _cluster_uri(cluster_url), implementation="redispy", key_prefix=KEY_PREFIX
            )
            self._first_use = asyncio.Lock()
        else:
            # The gateway's pool (its bound and timeouts); typed by limits as scalars only.
            shared: dict[str, Any] = {"connection_pool": redis.connection_pool}
            storage = RedisStorage(
                "async+redis://", implementation="redispy", key_prefix=KEY_PREFIX, **shared
            )
        self._storage = storage
        self._limiter = SlidingWindowCounterRateLimiter(storage)
        self._item = RateLimitItemPerMinute(per_minute)

    async def take(self, user_id: str) -> float:
        """Count one request of ``user_id``: 0 when it may go on, else the seconds until one
        would (a refused request is not counted)."""
        if self._first_use is not None:
            async with self._first_use:
                if self._first_use is not None:
                    await self._storage.check()  # learns the cluster's nodes
                    self._first_use = None
        if await self._limiter.hit(self._item, self._counted, user_id):
            return 0.0
        stats = await self._limiter.get_window_stats(self._item, self._counted, user_id)
        wait = stats.reset_time - time.time()
        # limits reckons the next reset from the key's TTL modulo the window, which is 0 in
        # the millisecond a window starts (TTL exactly two windows): the window is all ahead.
        return wait if wait > 0 else float(self._item.get_expiry())


def _cluster_uri(redis_url: str) -> str:
    """``redis://[user:password@]host:port/0`` as ``limits`` names a cluster node."""
    parts = urlsplit(redis_url)
    return urlunsplit(("async+redis+cluster", parts.netloc, "", "", ""))


def too_many_requests(limit: UserRateLimit, wait_s: float) -> HTTPException:
    seconds = retry_after_seconds(wait_s)
    return HTTPException(
        status.HTTP_429_TOO_MANY_REQUESTS,
        detail=f"too many requests: at most {limit.per_minute} a minute for one user; "
        f"try again in {seconds} s",
        headers={"Retry-After": str(seconds)},
    )


def limited_user(
    current_user: UserDependency, limit: UserRateLimit
) -> Callable[[str], Awaitable[None]]:
    """A dependency that counts the request against its user, once the token is checked
    (a caller without a valid token spends no one's allowance)."""

    async def admit(user_id: Annotated[str, Depends(current_user)]) -> None:
        wait_s = await limit.take(user_id)
        if wait_s > 0:
            raise too_many_requests(limit, wait_s)

    return admit


def per_user(tokens: Callable[[], TokenIssuer], limit: UserRateLimit | None) -> list[Dependency]:
    """The dependencies that put a router's (or a route's) requests under the limit; none
    when there is no limit. The route checks the token again for its own use (microseconds)."""
    if limit is None:
        return []
    return [Depends(limited_user(bearer_user(tokens), limit))]

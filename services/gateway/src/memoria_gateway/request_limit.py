"""How many HTTP API requests one user may make: ``MEMORIA_HTTP_REQUESTS_PER_MINUTE``.

Every API request costs the services work (a memory request, an embedding for a search or a
save), so one user's script must not take what others need. The count lives in the broker,
keyed by user, so it holds across gateway replicas behind a load balancer (a per-process
count would let n replicas admit n times the limit). The ``limits`` library keeps it: a
sliding-window counter, two keys per user and one Lua script per request, over the
gateway's own connection pool.

A refused request did nothing and is answered ``429`` with ``Retry-After``.
"""

# No `from __future__ import annotations`: FastAPI reads the dependency's annotation, which
# names a closure variable that a string annotation could not be resolved to.

import time
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Final

from fastapi import Depends, HTTPException, status
from fastapi.params import Depends as Dependency
from limits import RateLimitItemPerMinute
from limits.aio.storage import RedisStorage
from limits.aio.strategies import SlidingWindowCounterRateLimiter
from redis.asyncio import Redis

from memoria_gateway.bearer import UserDependency, bearer_user
from memoria_gateway.rate_limit import retry_after_seconds
from memoria_runtime.auth import TokenIssuer

KEY_PREFIX: Final = "memoria:limits"
LIMITED: Final = "http"  # the namespace of this limit's keys, beside the user id


class RequestLimit:
    """At most ``per_minute`` requests per user per sliding minute, every gateway counted."""

    def __init__(self, redis: Redis, per_minute: int) -> None:
        if per_minute < 1:
            raise ValueError("a request limit needs at least one request a minute")
        self.per_minute = per_minute
        # The gateway's pool (its bound and timeouts); typed by limits as scalars only.
        shared: dict[str, Any] = {"connection_pool": redis.connection_pool}
        storage = RedisStorage(
            "async+redis://", implementation="redispy", key_prefix=KEY_PREFIX, **shared
        )
        self._limiter = SlidingWindowCounterRateLimiter(storage)
        self._item = RateLimitItemPerMinute(per_minute)

    async def take(self, user_id: str) -> float:
        """Count one request of ``user_id``: 0 when it may go on, else the seconds until one
        would (a refused request is not counted)."""
        if await self._limiter.hit(self._item, LIMITED, user_id):
            return 0.0
        stats = await self._limiter.get_window_stats(self._item, LIMITED, user_id)
        return max(0.0, stats.reset_time - time.time())


def too_many_requests(limit: RequestLimit, wait_s: float) -> HTTPException:
    seconds = retry_after_seconds(wait_s)
    return HTTPException(
        status.HTTP_429_TOO_MANY_REQUESTS,
        detail=f"too many requests: at most {limit.per_minute} a minute for one user; "
        f"try again in {seconds} s",
        headers={"Retry-After": str(seconds)},
    )


def limited_user(
    current_user: UserDependency, limit: RequestLimit
) -> Callable[[str], Awaitable[None]]:
    """A dependency that counts the request against its user, once the token is checked
    (a caller without a valid token spends no one's allowance)."""

    async def admit(user_id: Annotated[str, Depends(current_user)]) -> None:
        wait_s = await limit.take(user_id)
        if wait_s > 0:
            raise too_many_requests(limit, wait_s)

    return admit


def per_user(tokens: Callable[[], TokenIssuer], limit: RequestLimit | None) -> list[Dependency]:
    """The dependencies that put a router's (or a route's) requests under the limit; none
    when there is no limit. The route checks the token again for its own use (microseconds)."""
    if limit is None:
        return []
    return [Depends(limited_user(bearer_user(tokens), limit))]

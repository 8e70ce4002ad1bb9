"""What one user may ask per minute is counted in the broker across every gateway (a real
Valkey; for HTTP, the gateway's dependency in a small app, as the gateway mounts it)."""

# No `from __future__ import annotations`: FastAPI must resolve the routes' annotations,
# which name a closure variable.

import time
from collections.abc import AsyncIterator
from typing import Annotated

import httpx
import pytest
from fastapi import Depends, FastAPI
from limits.util import WindowStats
from redis.asyncio import Redis

from memoria_gateway.bearer import bearer_user
from memoria_gateway.user_rate_limit import (
    HTTP_REQUESTS,
    KEY_PREFIX,
    WS_MESSAGES,
    UserRateLimit,
    limited_user,
)
from memoria_runtime.auth import TokenIssuer

PER_MINUTE = 3
SECONDS_PER_MINUTE = 60
ISSUER = TokenIssuer("k" * 32, ttl_seconds=600)


def gateway_app(redis: Redis) -> FastAPI:
    """One gateway: a route of a signed-in user behind the per-user limit."""
    current_user = bearer_user(lambda: ISSUER)
    app = FastAPI()

    @app.get("/api/me", dependencies=[Depends(limited_user(current_user, limit(redis)))])
    async def me(user_id: Annotated[str, Depends(current_user)]) -> dict[str, str]:
        return {"user_id": user_id}

    return app


def limit(redis: Redis) -> UserRateLimit:
    return UserRateLimit(redis, PER_MINUTE, HTTP_REQUESTS)


def signed_in(user_id: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {ISSUER.issue(user_id)}"}


@pytest.fixture
async def gateways(redis: Redis, redis_url: str) -> AsyncIterator[list[httpx.AsyncClient]]:
    """Two gateways on the same broker, each with its own connection pool."""
    other = Redis.from_url(redis_url)
    clients = [
        httpx.AsyncClient(transport=httpx.ASGITransport(gateway_app(r)), base_url="http://gw")
        for r in (redis, other)
    ]
    try:
        yield clients
    finally:
        for client in clients:
            await client.aclose()
        await other.aclose()


async def test_a_user_past_the_limit_is_refused_with_when_to_retry(
    gateways: list[httpx.AsyncClient],
) -> None:
    gateway = gateways[0]
    for _ in range(PER_MINUTE):
        assert (await gateway.get("/api/me", headers=signed_in("ana"))).status_code == 200
    refused = await gateway.get("/api/me", headers=signed_in("ana"))
    assert refused.status_code == 429
    assert 1 <= int(refused.headers["Retry-After"]) <= SECONDS_PER_MINUTE
    assert f"at most {PER_MINUTE} a minute" in refused.json()["detail"]
    # Another user's allowance is their own.
    assert (await gateway.get("/api/me", headers=signed_in("bob"))).json() == {"user_id": "bob"}


async def test_every_gateway_counts_against_the_same_allowance(
    gateways: list[httpx.AsyncClient],
) -> None:
    """Behind a load balancer a user's requests spread over replicas; the limit is theirs,
    not each replica's."""
    statuses = [
        (await gateways[n % 2].get("/api/me", headers=signed_in("ana"))).status_code
        for n in range(PER_MINUTE + 2)
    ]
    assert statuses == [200] * PER_MINUTE + [429, 429]


async def test_requests_without_a_valid_token_spend_no_ones_allowance(
    gateways: list[httpx.AsyncClient], redis: Redis
) -> None:
    gateway = gateways[0]
    for headers in ({}, {"Authorization": "Bearer forged"}) * PER_MINUTE:
        assert (await gateway.get("/api/me", headers=headers)).status_code == 401
    assert await redis.keys(f"{KEY_PREFIX}*") == []
    for _ in range(PER_MINUTE):
        assert (await gateway.get("/api/me", headers=signed_in("ana"))).status_code == 200


async def test_the_count_expires_so_idle_users_cost_the_broker_nothing(
    gateways: list[httpx.AsyncClient], redis: Redis
) -> None:
    await gateways[0].get("/api/me", headers=signed_in("ana"))
    keys = await redis.keys(f"{KEY_PREFIX}*")
    assert keys
    for key in keys:
        assert 0 < await redis.ttl(key) <= 2 * SECONDS_PER_MINUTE


def test_a_limit_needs_a_request_a_minute(redis_url: str) -> None:
    with pytest.raises(ValueError, match="at least one request"):
        UserRateLimit(Redis.from_url(redis_url), 0, HTTP_REQUESTS)


async def test_chat_messages_and_api_requests_are_counted_apart(redis: Redis) -> None:
    """A user who used up their API requests can still chat, and the other way round."""
    requests = UserRateLimit(redis, PER_MINUTE, HTTP_REQUESTS)
    messages = UserRateLimit(redis, PER_MINUTE, WS_MESSAGES)
    assert [await requests.take("ana") for _ in range(PER_MINUTE)] == [0.0] * PER_MINUTE
    assert await requests.take("ana") > 0
    assert [await messages.take("ana") for _ in range(PER_MINUTE)] == [0.0] * PER_MINUTE
    assert 0 < await messages.take("ana") <= SECONDS_PER_MINUTE


async def test_a_refusal_in_the_millisecond_a_window_starts_still_says_to_wait(
    redis: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """limits reckons the reset from the key's TTL modulo the window: "now" when the TTL is
    exactly two windows, as in the millisecond the window's first request was counted. That
    millisecond cannot be hit on purpose against a live server, so limits' answer for it is
    given here; the refusal itself is the broker's."""
    limit = UserRateLimit(redis, PER_MINUTE, WS_MESSAGES)
    for _ in range(PER_MINUTE):
        await limit.take("ana")

    async def reset_now(*_: object) -> WindowStats:
        return WindowStats(reset_time=time.time(), remaining=0)

    monkeypatch.setattr(limit._limiter, "get_window_stats", reset_now)
    assert await limit.take("ana") == SECONDS_PER_MINUTE

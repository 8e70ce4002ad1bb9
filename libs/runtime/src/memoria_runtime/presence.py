"""Which service processes are up and serving: each announces itself in one Redis hash and
refreshes the announcement; an announcement not refreshed in time is stale.

`memoria run` waits for the memory service's announcement before it says Memoria is running:
the process starts quickly, but it serves only once its stores are open.
"""

from __future__ import annotations

import time
from typing import Any

from pydantic import BaseModel

from memoria_runtime import keys


class Presence(BaseModel):
    service: str
    consumer: str
    pid: int
    serving_since: float
    expires_at: float
    # Which Memoria the process serves (instance.py); None from processes older than the field.
    instance: str | None = None
    data_dir: str | None = None


async def announce(redis: Any, presence: Presence) -> None:
    await redis.hset(keys.SERVICES, presence.consumer, presence.model_dump_json())


async def withdraw(redis: Any, consumer: str) -> None:
    await redis.hdel(keys.SERVICES, consumer)


async def serving(redis: Any, service: str, *, since: float = 0.0) -> list[Presence]:
    """Live announcements of ``service`` made by processes serving since ``since``."""
    now = time.time()
    found: list[Presence] = []
    for raw in (await redis.hgetall(keys.SERVICES)).values():
        presence = Presence.model_validate_json(raw)
        fresh = presence.expires_at >= now and presence.serving_since >= since
        if presence.service == service and fresh:
            found.append(presence)
    return found


async def serving_services(redis: Any) -> set[str]:
    """The services with at least one live announcement (one read of the hash)."""
    now = time.time()
    raws = (await redis.hgetall(keys.SERVICES)).values()
    return {p.service for p in map(Presence.model_validate_json, raws) if p.expires_at >= now}

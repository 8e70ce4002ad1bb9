"""The action catalog: workers advertise the actions they run; decision reads the union.

Each worker writes one hash field with an expiry time and refreshes it; a worker that stops
is forgotten after ``catalog_ttl_seconds``. Decision reads the catalog at every step, so
enabling or disabling an action needs no decision restart.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from memoria_contracts.events import ActionSpec
from memoria_runtime import keys


class WorkerAdvert(BaseModel):
    worker: str
    actions: list[ActionSpec]
    expires_at: float


async def advertise(redis: Any, worker: str, actions: list[ActionSpec], ttl_s: float) -> None:
    advert = WorkerAdvert(worker=worker, actions=actions, expires_at=time.time() + ttl_s)
    await redis.hset(keys.ACTION_CATALOG, worker, advert.model_dump_json())


async def withdraw(redis: Any, worker: str) -> None:
    await redis.hdel(keys.ACTION_CATALOG, worker)


async def live_actions(redis: Any, entries: Mapping[bytes, bytes]) -> list[ActionSpec]:
    """Actions any live worker runs, in the order workers list them, from the catalog hash
    as read (HGETALL of ``ACTION_CATALOG``, sent with the cycle's other commands); expired
    adverts are removed on the way."""
    now = time.time()
    specs: dict[str, ActionSpec] = {}
    expired: list[bytes] = []
    for field, raw in sorted(entries.items()):
        advert = WorkerAdvert.model_validate_json(raw)
        if advert.expires_at < now:
            expired.append(field)
            continue
        for spec in advert.actions:
            specs.setdefault(spec.name, spec)
    if expired:
        await redis.hdel(keys.ACTION_CATALOG, *expired)
    return list(specs.values())

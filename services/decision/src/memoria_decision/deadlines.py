"""Per-step deadlines in a Redis sorted set, so any decision replica can time a step out."""

from __future__ import annotations

import time
from typing import Any

from memoria_runtime import keys

_SEPARATOR = "|"


def _member(cycle_id: str, step: int) -> str:
    return f"{cycle_id}{_SEPARATOR}{step}"


class Deadlines:
    def __init__(self, redis: Any) -> None:
        self._redis = redis

    async def set(self, cycle_id: str, step: int, seconds: float) -> None:
        await self._redis.zadd(
            keys.STEP_DEADLINES, {_member(cycle_id, step): time.time() + seconds}
        )

    async def clear(self, cycle_id: str, step: int) -> bool:
        """True when this caller removed it (and so owns what happens next)."""
        return bool(await self._redis.zrem(keys.STEP_DEADLINES, _member(cycle_id, step)))

    async def due(self, limit: int) -> list[tuple[str, int]]:
        members = await self._redis.zrangebyscore(
            keys.STEP_DEADLINES, "-inf", time.time(), start=0, num=limit
        )
        due: list[tuple[str, int]] = []
        for member in members:
            cycle_id, _, step = member.decode().rpartition(_SEPARATOR)
            due.append((cycle_id, int(step)))
        return due

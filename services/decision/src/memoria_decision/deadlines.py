"""Per-step deadlines in a Redis sorted set, so any decision replica can time a step out."""

from __future__ import annotations

import time
from typing import Any

from memoria_runtime import keys

_SEPARATOR = "|"
CLAIM_S = 30.0
"""How long a replica that took an overdue deadline has to end its cycle before the deadline
comes due again for another one (it died, or its broker connection did)."""

# Take an overdue deadline: only one caller gets it, and it stays in the set, later.
_CLAIM = """
local due = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not due or tonumber(due) > tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
return 1
"""


def _member(cycle_id: str, step: int) -> str:
    return f"{cycle_id}{_SEPARATOR}{step}"


class Deadlines:
    def __init__(self, redis: Any, *, claim_s: float = CLAIM_S) -> None:
        self._redis = redis
        self._claim_s = claim_s
        self._claim = redis.register_script(_CLAIM)

    # A deadline set, or cleared, queued on a pipeline with the cycle's other writes.

    @staticmethod
    def queue_set(pipe: Any, cycle_id: str, step: int, seconds: float) -> None:
        pipe.zadd(keys.STEP_DEADLINES, {_member(cycle_id, step): time.time() + seconds})

    @staticmethod
    def queue_clear(pipe: Any, cycle_id: str, step: int) -> None:
        pipe.zrem(keys.STEP_DEADLINES, _member(cycle_id, step))

    async def clear(self, cycle_id: str, step: int) -> bool:
        """True when this caller removed it."""
        return bool(await self._redis.zrem(keys.STEP_DEADLINES, _member(cycle_id, step)))

    async def claim(self, cycle_id: str, step: int) -> bool:
        """Take an overdue deadline to act on it; True for one caller only. It is moved
        ``claim_s`` later rather than removed, so that a caller that dies before it has acted
        (and cleared it) leaves it to come due again instead of losing the timeout."""
        now = time.time()
        return bool(
            await self._claim(
                keys=[keys.STEP_DEADLINES], args=[_member(cycle_id, step), now, now + self._claim_s]
            )
        )

    async def due(self, limit: int) -> list[tuple[str, int]]:
        members = await self._redis.zrangebyscore(
            keys.STEP_DEADLINES, "-inf", time.time(), start=0, num=limit
        )
        parts = (member.decode().rpartition(_SEPARATOR) for member in members)
        return [(cycle_id, int(step)) for cycle_id, _, step in parts]

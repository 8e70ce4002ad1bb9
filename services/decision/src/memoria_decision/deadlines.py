"""Per-step deadlines in a Redis sorted set per partition (written in the pipelines of the
partition's steps), so any decision replica can time a step out; the sweep reads them all."""

from __future__ import annotations

import time
from typing import Any

from memoria_runtime import keys
from memoria_runtime.partitions import Partition, Partitions

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
    def __init__(self, redis: Any, partitions: Partitions, *, claim_s: float = CLAIM_S) -> None:
        self._redis = redis
        self._partitions = partitions
        self._claim_s = claim_s
        self._claim = redis.register_script(_CLAIM)

    @staticmethod
    def queue_set(pipe: Any, part: Partition, cycle_id: str, step: int, seconds: float) -> None:
        pipe.zadd(keys.step_deadlines(part), {_member(cycle_id, step): time.time() + seconds})

    @staticmethod
    def queue_clear(pipe: Any, part: Partition, cycle_id: str, step: int) -> None:
        pipe.zrem(keys.step_deadlines(part), _member(cycle_id, step))

    async def clear(self, part: Partition, cycle_id: str, step: int) -> bool:
        """True when this caller removed it."""
        return bool(await self._redis.zrem(keys.step_deadlines(part), _member(cycle_id, step)))

    async def claim(self, part: Partition, cycle_id: str, step: int) -> bool:
        """Take an overdue deadline to act on it; True for one caller only. It is moved
        ``claim_s`` later rather than removed, so that a caller that dies before it has acted
        (and cleared it) leaves it to come due again instead of losing the timeout."""
        now = time.time()
        args = [_member(cycle_id, step), now, now + self._claim_s]
        return bool(await self._claim(keys=[keys.step_deadlines(part)], args=args))

    async def due(self, limit: int) -> list[tuple[Partition, str, int]]:
        """Up to ``limit`` overdue steps of each partition, in one round trip per primary."""
        now = time.time()
        async with self._redis.pipeline(transaction=False) as pipe:
            for part in self._partitions.all:
                pipe.zrangebyscore(keys.step_deadlines(part), "-inf", now, start=0, num=limit)
            answers = await pipe.execute()
        due = zip(self._partitions.all, answers, strict=True)
        parts = ((part, m.decode().rpartition(_SEPARATOR)) for part, ms in due for m in ms)
        return [(part, cycle_id, int(step)) for part, (cycle_id, _, step) in parts]

"""Decision's keys in Redis. A running cycle's state is kept a day after its last write (its
thread's lock expires long before); the release replaces it with a tombstone of under 200
bytes, kept only while an event of the cycle can still be delivered again
(:func:`released_ttl_s`): what the cycle said is in the memory service's cycle traces. A
thread's pending action expires: a "yes" the next day is an ordinary message. Each key is in
its user's partition, beside the thread's other keys (one cluster slot: ``partitions.py``)."""

from __future__ import annotations

import logging
import math
from typing import Annotated, Any, Final

from pydantic import Field, TypeAdapter, ValidationError

from memoria_decision.core.state import PendingAction, Released, Stored
from memoria_runtime import keys
from memoria_runtime.bus.thread_gate import KeyWrite
from memoria_runtime.partitions import Partition, Partitions
from memoria_runtime.settings import BusSettings

log = logging.getLogger("memoria.decision.store")

PENDING_ACTION_TTL_S: Final = 10 * 60  # how long a question to the user stays answerable
_RUNNING: Final = keys.CYCLE_TTL_S
# The bus consumer's: an entry is parked after at most 4 deliveries per allowed failure, and
# its reclaimer looks for idle entries at least every 2 s.
DELIVERIES_PER_FAILURE: Final = 4
RECLAIM_PERIOD_S: Final = 2
_STORED: TypeAdapter[Stored] = TypeAdapter(Annotated[Stored, Field(discriminator="status")])
_CLEAR = """
local raw = redis.call('GET', KEYS[1])
if raw and cjson.decode(raw)['id'] == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


def released_ttl_s(settings: BusSettings) -> int:
    """Past the last delivery any event of an ended cycle can get: one whose handler died is
    delivered again once idle ``reclaim_idle_ms``, up to ``max_deliveries`` × 4 times (640 s
    by default). Later, only a backlog read by a decision down all that time: the cycle would
    run again, its records (fixed ids) replacing the first run's."""
    idle_s = settings.reclaim_idle_ms / 1000 + RECLAIM_PERIOD_S
    return math.ceil(idle_s * settings.max_deliveries * DELIVERIES_PER_FAILURE)


class CycleStore:
    def __init__(self, redis: Any, partitions: Partitions, *, released_ttl_s: int) -> None:
        self._redis = redis
        self.partitions = partitions
        self.released_ttl_s = released_ttl_s

    async def load(self, part: Partition, cycle_id: str) -> Stored | None:
        raw = await self._redis.get(keys.cycle_state(part, cycle_id))
        return self.parse(raw) if raw else None

    def _key(self, state: Stored | Released) -> str:
        return keys.cycle_state(self.partitions.of(state.user_id), state.cycle_id)

    def _pending_key(self, user_id: str, thread_id: str) -> str:
        return keys.pending_action(self.partitions.of(user_id), user_id, thread_id)

    @staticmethod
    def parse(raw: bytes) -> Stored:
        return _STORED.validate_json(raw)

    def queue_save(self, pipe: Any, state: Stored, *, new: bool = False) -> None:
        """``new``: stored unless a delivery of its message stored it first."""
        pipe.set(self._key(state), state.model_dump_json(), nx=new, ex=_RUNNING)

    def released(self, tombstone: Released) -> KeyWrite:
        """The tombstone, written in the release's atomic step."""
        return KeyWrite(self._key(tombstone), tombstone.model_dump_json(), self.released_ttl_s)

    # A thread's pending action: read as its next cycle opens, written or cleared only by that
    # cycle (cycles of a thread never overlap: the thread gate).

    async def pending(
        self, user_id: str, thread_id: str, raw: bytes | None
    ) -> PendingAction | None:
        if raw is None:
            return None
        try:
            return PendingAction.model_validate_json(raw)
        except ValidationError:
            # Written by another version, or by hand: asking again is safer than guessing.
            log.warning("unreadable pending action for %s/%s dropped", user_id, thread_id)
            await self._redis.delete(self._pending_key(user_id, thread_id))
            return None

    def queue_put(self, pipe: Any, user_id: str, thread_id: str, action: PendingAction) -> None:
        key = self._pending_key(user_id, thread_id)
        pipe.set(key, action.model_dump_json(), ex=PENDING_ACTION_TTL_S)

    def queue_clear(self, pipe: Any, user_id: str, thread_id: str, action_id: str) -> None:
        """Only the one answered: a redelivered cycle must not clear one it asked since."""
        pipe.eval(_CLEAR, 1, self._pending_key(user_id, thread_id), action_id)

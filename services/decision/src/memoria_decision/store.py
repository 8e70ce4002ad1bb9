"""Decision's keys in Redis: each cycle's state between events, each thread's pending action.

A running cycle's state is kept a day after its last write (far longer than any cycle runs:
its thread's lock expires first). When the cycle ends, the release replaces it with a
tombstone of under 200 bytes (:class:`~memoria_decision.core.state.Released`), kept as long
as an event of the cycle can still be delivered again (:func:`released_ttl_s`); what was
said lives on in the memory service's cycle traces (``GET /api/cycles/{id}``).

A thread's pending action expires after :data:`PENDING_ACTION_TTL_S`: a "yes" the next day is
an ordinary message, not the trigger of a forgotten request. It is per thread, so a "yes" in
another conversation confirms nothing.
"""

from __future__ import annotations

import logging
import math
from typing import Annotated, Any, Final

from pydantic import Field, TypeAdapter, ValidationError

from memoria_decision.core.state import PendingAction, Released, Stored
from memoria_runtime import keys
from memoria_runtime.gate import KeyWrite
from memoria_runtime.settings import BusSettings

log = logging.getLogger("memoria.decision.store")

PENDING_ACTION_TTL_S: Final = 10 * 60
"""How long a question to the user stays answerable."""
RUNNING_TTL_S: Final = keys.CYCLE_TTL_S
CONSUMER_DELIVERIES_PER_STRIKE: Final = 4
"""The bus consumer parks an entry after at most this many deliveries per allowed failure."""
RECLAIM_PERIOD_S: Final = 2
"""The most the consumer's reclaimer waits between two looks for idle entries."""

_STORED: TypeAdapter[Stored] = TypeAdapter(Annotated[Stored, Field(discriminator="status")])
# Clear a thread's pending action only if it is still the one answered (a redelivered
# cycle must not clear the one it asked itself since).
_CLEAR = """
local raw = redis.call('GET', KEYS[1])
if raw and cjson.decode(raw)['id'] == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


def released_ttl_s(settings: BusSettings) -> int:
    """How long an ended cycle's tombstone is kept: past the last delivery any of its
    events can still get. An entry whose handler died is delivered again once it sat idle
    ``reclaim_idle_ms`` (found within ``RECLAIM_PERIOD_S``), and parked after at most
    ``max_deliveries`` × ``CONSUMER_DELIVERIES_PER_STRIKE`` deliveries: 640 s by default."""
    idle_s = settings.reclaim_idle_ms / 1000 + RECLAIM_PERIOD_S
    return math.ceil(idle_s * settings.max_deliveries * CONSUMER_DELIVERIES_PER_STRIKE)


class CycleStore:
    def __init__(self, redis: Any, *, released_ttl_s: int) -> None:
        self._redis = redis
        self.released_ttl_s = released_ttl_s

    async def load(self, cycle_id: str) -> Stored | None:
        raw = await self._redis.get(keys.cycle_state(cycle_id))
        return self.parse(raw) if raw else None

    @staticmethod
    def parse(raw: bytes) -> Stored:
        """A state as stored (read elsewhere too: the thread gate's ``open`` returns it)."""
        return _STORED.validate_json(raw)

    @staticmethod
    def queue_create(pipe: Any, state: Stored) -> None:
        """Store a new cycle unless a delivery of its message stored it first."""
        pipe.set(
            keys.cycle_state(state.cycle_id), state.model_dump_json(), nx=True, ex=RUNNING_TTL_S
        )

    @staticmethod
    def queue_save(pipe: Any, state: Stored) -> None:
        pipe.set(keys.cycle_state(state.cycle_id), state.model_dump_json(), ex=RUNNING_TTL_S)

    def released(self, tombstone: Released) -> KeyWrite:
        """The SET that replaces the state with its tombstone, with the release."""
        key = keys.cycle_state(tombstone.cycle_id)
        return KeyWrite(key, tombstone.model_dump_json(), self.released_ttl_s)


class PendingStore:
    """Cycles of one thread never overlap (the thread gate): a thread's pending action is
    read as its next cycle opens, and written or cleared only by that cycle."""

    def __init__(self, redis: Any, *, ttl_s: int = PENDING_ACTION_TTL_S) -> None:
        self._redis = redis
        self.ttl_s = ttl_s

    async def parse(self, user_id: str, thread_id: str, raw: bytes | None) -> PendingAction | None:
        if raw is None:
            return None
        try:
            return PendingAction.model_validate_json(raw)
        except ValidationError:
            # Written by another version, or by hand: asking again is safer than guessing.
            log.warning("unreadable pending action for %s/%s dropped", user_id, thread_id)
            await self._redis.delete(keys.pending_action(user_id, thread_id))
            return None

    async def get(self, user_id: str, thread_id: str) -> PendingAction | None:
        raw = await self._redis.get(keys.pending_action(user_id, thread_id))
        return await self.parse(user_id, thread_id, raw)

    def queue_put(self, pipe: Any, user_id: str, thread_id: str, action: PendingAction) -> None:
        key = keys.pending_action(user_id, thread_id)
        pipe.set(key, action.model_dump_json(), ex=self.ttl_s)

    @staticmethod
    def queue_clear(pipe: Any, user_id: str, thread_id: str, action_id: str) -> None:
        pipe.eval(_CLEAR, 1, keys.pending_action(user_id, thread_id), action_id)

"""The action catalog: workers advertise the actions they run; decision reads the union.

Each worker writes one hash field with an expiry time and refreshes it; a worker that stops
is forgotten after ``catalog_ttl_seconds``. Decision reads the catalog at every step, so
enabling or disabling an action needs no decision restart. A partitioned bus has a copy of
the catalog per partition (``keys.action_catalog``): workers write all of them, a cycle
reads its own partition's.

An advert must outlive broker outages (docs/chaos.md, bug 7): workers keep it with
:func:`memoria_runtime.refresh.keep_refreshed` (a failed refresh is tried again within a
second), and decision forgets an expired advert only if nobody rewrote it since it was read.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, Final

from pydantic import BaseModel

from memoria_contracts.events import ActionSpec
from memoria_runtime import keys
from memoria_runtime.partitions import Partition, Partitions

# Delete each expired field only if it still holds the advert that was read (ARGV pairs:
# field, value); a worker that advertised again in between keeps its fresh advert.
_FORGET_EXPIRED: Final = """
local forgotten = 0
for i = 1, #ARGV, 2 do
  if redis.call('HGET', KEYS[1], ARGV[i]) == ARGV[i + 1] then
    forgotten = forgotten + redis.call('HDEL', KEYS[1], ARGV[i])
  end
end
return forgotten
"""


class WorkerAdvert(BaseModel):
    worker: str
    actions: list[ActionSpec]
    expires_at: float


_ONE = Partitions()  # one partition on one server: the catalog's untagged name


async def advertise(
    redis: Any,
    worker: str,
    actions: list[ActionSpec],
    ttl_s: float,
    *,
    partitions: Partitions = _ONE,
) -> None:
    advert = WorkerAdvert(worker=worker, actions=actions, expires_at=time.time() + ttl_s)
    raw = advert.model_dump_json()
    async with redis.pipeline(transaction=False) as pipe:
        for part in partitions.all:
            pipe.hset(keys.action_catalog(part), worker, raw)
        await pipe.execute()


async def withdraw(redis: Any, worker: str, *, partitions: Partitions = _ONE) -> None:
    async with redis.pipeline(transaction=False) as pipe:
        for part in partitions.all:
            pipe.hdel(keys.action_catalog(part), worker)
        await pipe.execute()


async def live_actions(
    redis: Any, entries: Mapping[bytes, bytes], part: Partition = _ONE.all[0]
) -> list[ActionSpec]:
    """Actions any live worker runs, in the order workers list them, from the catalog hash
    as read (HGETALL of ``keys.action_catalog(part)``, sent with the cycle's other commands);
    expired adverts are removed on the way, unless rewritten since they were read."""
    now = time.time()
    specs: dict[str, ActionSpec] = {}
    expired: list[bytes] = []
    for field, raw in sorted(entries.items()):
        advert = WorkerAdvert.model_validate_json(raw)
        if advert.expires_at < now:
            expired.extend((field, raw))
            continue
        for spec in advert.actions:
            specs.setdefault(spec.name, spec)
    if expired:
        forget = redis.register_script(_FORGET_EXPIRED)
        await forget(keys=[keys.action_catalog(part)], args=expired)
    return list(specs.values())

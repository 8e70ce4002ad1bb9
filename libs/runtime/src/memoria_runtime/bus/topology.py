"""Streams come into being with every consumer group that reads them.

A consumer group created on a stream that already has entries starts at its end (``$``):
what was appended before is never read by that group. If streams were created by their
first append, a message a gateway took before decision had ever started (compose and
Kubernetes start services in any order), or appended after a flushed broker before the
readers noticed, would be skipped, and its cycle would never start. So:

* a stream is created only with all the groups of ``memoria_contracts.streams.READERS``
  (and the caller's own), each at the end of the new, empty stream: here, in one
  transaction, or in the thread gate's scripts (thread_gate.py), which append to
  ``chat.in`` and create it the same way inside the script;
* every other append is made with ``NOMKSTREAM``; an append that finds no stream gets
  ``None``, calls :func:`create_stream`, and is made again (publisher.py, replies.py).

A group missing from a stream that exists (a group added by a new release, one destroyed
by hand) still starts at the end: reading the retained history from the start could run
old cycles again.
"""

from __future__ import annotations

from functools import cache

from redis.asyncio import Redis
from redis.exceptions import ResponseError
from redis.typing import EncodableT, FieldT

from memoria_contracts.streams import READERS, Group, Stream
from memoria_runtime.bus.entries import DATA_FIELD
from memoria_runtime.partitions import logical_name

APPEND_ATTEMPTS = 3
"""How often an append is made again after creating its stream: more than once only if the
stream is deleted again in between (a broker flushed twice in a row)."""


@cache  # asked at every append: the answer never changes in a process
def groups_of(stream: str, *also: str) -> tuple[str, ...]:
    """The groups that read ``stream`` (any of its partitions; none for a name outside the
    contract), then ``also``."""
    try:
        known = READERS[Stream(logical_name(stream))]
    except ValueError:
        known = ()
    names = [group.value for group in known]
    names += [name for name in also if name not in names]
    return tuple(names)


async def create_stream(redis: Redis, stream: str, *also: Group) -> None:
    """Create ``stream`` (a stream of the contract, or one of its partitions) with every
    group that reads it, and ``also`` groups, atomically; groups that exist already are left
    where they are."""
    groups = groups_of(stream, *(group.value for group in also))
    if not groups:
        return
    async with redis.pipeline(transaction=True) as pipe:
        for group in groups:
            pipe.xgroup_create(stream, group, id="$", mkstream=True)
        results = await pipe.execute(raise_on_error=False)
    for result in results:
        if isinstance(result, ResponseError) and "BUSYGROUP" not in str(result):
            raise result


async def append(redis: Redis, stream: str, data: bytes, *, maxlen: int) -> bytes | str:
    """``XADD`` of one framed entry (``DATA_FIELD``) with approximate ``MAXLEN`` trimming;
    the entry's id. A stream that does not exist is created with its groups first (a stream
    no group reads is created by the append, as usual)."""
    fields: dict[FieldT, EncodableT] = {DATA_FIELD: data}
    if not groups_of(stream):
        return await redis.xadd(stream, fields, maxlen=maxlen)
    for _ in range(APPEND_ATTEMPTS):
        entry_id = await redis.xadd(stream, fields, maxlen=maxlen, nomkstream=True)
        if entry_id is not None:
            return entry_id
        await create_stream(redis, stream)
    raise RuntimeError(f"{stream} vanished {APPEND_ATTEMPTS} times while appending to it")

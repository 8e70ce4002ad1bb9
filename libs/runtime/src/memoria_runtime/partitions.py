"""Which partition of the bus a user's work goes to, and the hash tag that keeps it together.

Every stream is split into ``MEMORIA_BUS_PARTITIONS`` partitions. A user maps to one of them
(a stable hash of the user id), and so does each of the user's threads: one cycle at a time
per thread still holds, since a thread's messages, steps and locks are all in one place.
Every key a thread's step touches (the thread gate's lock and queue, the cycle's state, the
streams the gate's scripts append to) carries its partition's **hash tag**, so that on a
Redis Cluster each script and each pipeline of a step runs against one slot of one primary.

A tag is chosen so that its slot falls in the middle of the partition's share of the 16384
slots (partition ``p`` of ``n`` owns slots ``p·16384/n`` to ``(p+1)·16384/n``): on a cluster
whose primaries hold equal ranges of slots, as ``CLUSTER ADDSLOTSRANGE`` or
``valkey-cli --cluster create`` assign them, ``n`` partitions spread evenly over the
primaries whenever ``n`` is a multiple of their count (docs/adr/0029-partitioned-bus.md).

With one partition on one server (the embedded default) no key carries a tag: every name is
what it was before the bus had partitions, so data written by an earlier version stays where
it is read.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache

from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot

__all__ = ["MAX_PARTITIONS", "Partition", "Partitions", "logical_name"]

MAX_PARTITIONS = 256
"""More partitions than primaries x 4 buys nothing; a bound keeps the tag search short."""
PREFIX = "memoria:"


@dataclass(frozen=True, slots=True)
class Partition:
    """One partition: its index and the hash tag its keys carry ("" in the untagged layout)."""

    index: int
    tag: str

    def scoped(self, name: str) -> str:
        """``name`` (a key starting with ``memoria:``) in this partition: the tag right after
        the prefix, before any user-given part of the name, so nothing a user chose can come
        first as a tag."""
        if not self.tag:
            return name
        if not name.startswith(PREFIX):
            raise ValueError(f"not a Memoria key: {name!r}")
        return f"{PREFIX}{self.tag}:{name[len(PREFIX) :]}"

    @property
    def slot(self) -> int | None:
        """The cluster slot of this partition's keys (None when untagged)."""
        return key_slot(self.tag.encode()) if self.tag else None


def logical_name(key: str) -> str:
    """The name ``key`` has without its partition's tag (``memoria:{p3.48}:chat.in`` →
    ``memoria:chat.in``); an untagged name is returned as it is."""
    if key.startswith(PREFIX + "{"):
        end = key.find("}:", len(PREFIX))
        if end != -1:
            return PREFIX + key[end + 2 :]
    return key


@cache
def _tag(index: int, count: int) -> str:
    """The first tag ``{p<index>.<n>}`` whose slot lies in the central half of the
    partition's share of the slots (away from the edges, where a cluster's ranges may be
    split one slot differently)."""
    share = REDIS_CLUSTER_HASH_SLOTS / count
    low = int(index * share + share / 4)
    high = max(low + 1, int(index * share + 3 * share / 4))
    salt = 0
    while True:
        tag = f"{{p{index}.{salt}}}"
        if low <= key_slot(tag.encode()) < high:
            return tag
        salt += 1


class Partitions:
    """The partitions of one deployment (every service must be given the same count)."""

    def __init__(self, count: int = 1, *, tagged: bool = False) -> None:
        """``tagged``: give keys hash tags even with one partition (a cluster needs them, so
        a script's keys share a slot)."""
        if not 1 <= count <= MAX_PARTITIONS:
            raise ValueError(f"the partition count must be 1 to {MAX_PARTITIONS}, not {count}")
        self.count = count
        self.tagged = tagged or count > 1
        self.all: tuple[Partition, ...] = tuple(
            Partition(index, _tag(index, count) if self.tagged else "") for index in range(count)
        )

    def of(self, user_id: str) -> Partition:
        """The partition of ``user_id`` (and of all the user's threads)."""
        if self.count == 1:
            return self.all[0]
        digest = hashlib.blake2b(user_id.encode(), digest_size=8).digest()
        return self.all[int.from_bytes(digest, "big") % self.count]

    def keys(self, name: str) -> list[str]:
        """``name`` in every partition, in partition order."""
        return [partition.scoped(name) for partition in self.all]

    @property
    def layout(self) -> str:
        """What every service of one deployment must agree on (checked at start)."""
        return f"partitions={self.count};tagged={int(self.tagged)}"

    @classmethod
    def from_layout(cls, layout: str) -> Partitions:
        """The partitions a :attr:`layout` describes (as the running services record it)."""
        fields = dict(part.split("=", 1) for part in layout.split(";") if "=" in part)
        try:
            return cls(int(fields["partitions"]), tagged=fields.get("tagged") == "1")
        except (KeyError, ValueError) as exc:
            raise ValueError(f"not a partition layout: {layout!r}") from exc

    def __repr__(self) -> str:
        return f"Partitions({self.count}, tagged={self.tagged})"

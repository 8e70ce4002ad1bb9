"""Every service of a deployment splits the streams the same way.

A service given another partition count than the running ones would look for a user's work
in another partition: a thread's next message could start a second cycle beside the one
running; one with another fan-out would send frames where no gateway reads. So the first
service to start records the layout (``memoria:bus:layout``: partitions, tags, fan-out) and
every later one refuses to start with another.
"""

from __future__ import annotations

from typing import Any

from memoria_runtime import keys


class LayoutMismatch(RuntimeError):
    """This process' partition layout is not the one the running services use."""


async def ensure_same_layout(redis: Any, mine: str) -> None:
    """``mine``: this process' layout (``BusSettings.bus_layout``)."""
    await redis.set(keys.BUS_LAYOUT, mine, nx=True)
    recorded = await redis.get(keys.BUS_LAYOUT)
    recorded = recorded.decode() if isinstance(recorded, bytes) else recorded
    if recorded in (None, mine):
        return
    raise LayoutMismatch(
        f"this service splits the bus as {mine!r} (MEMORIA_BUS_PARTITIONS, "
        f"MEMORIA_REDIS_CLUSTER, MEMORIA_FAN_OUT) but the running services split it as "
        f"{recorded!r}. Give "
        f"every service the same settings. To change the partition count, drain the bus and "
        f"stop every service, delete the Redis key {keys.BUS_LAYOUT}, then start them all "
        f"with the new count (docs/operating.md)."
    )

"""The dead-letter stream: entries that cannot be handled, kept with the reason."""

from __future__ import annotations

import logging
import time
from typing import Any

from memoria_contracts.streams import Stream

log = logging.getLogger("memoria.bus.dead_letter")


async def dead_letter(
    redis: Any,
    *,
    stream: str,
    group: str,
    entry_id: str,
    data: bytes,
    reason: str,
    maxlen: int,
) -> None:
    """Copy the entry to the dead-letter stream. The caller acks the original afterwards,
    so a crash in between leaves it pending (and it is dead-lettered again, not lost)."""
    await redis.xadd(
        Stream.DEAD_LETTER.value,
        {
            "stream": stream,
            "group": group,
            "entry_id": entry_id,
            "reason": reason[:2000],
            "failed_at": f"{time.time():.3f}",
            "data": data,
        },
        maxlen=maxlen,
    )
    log.error("dead-lettered %s %s (%s): %s", stream, entry_id, group, reason)

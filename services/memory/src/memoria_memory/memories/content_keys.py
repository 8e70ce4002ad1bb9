"""Content keys for memories written before they existed (ADR 0019): without one, a chat
save of what such a memory already says would keep it twice."""

from __future__ import annotations

import logging
from typing import Final

from memoria_memory.memories.ids import content_key_for
from memoria_memory.memories.repository import MemoryRepository

PAGE: Final = 500
MIGRATION: Final = "content_keys"

log = logging.getLogger("memoria.memory.content_keys")


async def backfill(repo: MemoryRepository, *, page: int = PAGE) -> int:
    """Give every keyless ready memory its key; return how many were given one.

    Once per store: the pass is marked done when it finds none left, and every write since
    sets its own key, so later starts skip the scan (on MongoDB a query no index serves,
    a read of the whole collection). Each page read is keyed before the next is read, so the
    loop ends: a memory keyed here, or by a write in between, is not read again."""
    if await repo.migrated(MIGRATION):
        return 0
    keyed = 0
    while documents := await repo.keyless(page):
        for document in documents:
            if await repo.give_content_key(document, content_key_for(document.content)):
                keyed += 1
    await repo.mark_migrated(MIGRATION)
    if keyed:
        log.info("gave %d memories written before content keys their key", keyed)
    return keyed

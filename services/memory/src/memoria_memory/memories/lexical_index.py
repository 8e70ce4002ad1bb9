"""The lexical entries of memories: what each vector row's text is, and the pass that gives
the rows of memories written before lexical search their text.

A row's text is its binding and the memory's content (JSON content as its JSON text), so a
memory is found by any word it was bound by or says.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any, Final

from memoria_memory.memories.documents import MemoryDocument
from memoria_memory.memories.ids import row_id_for
from memoria_memory.memories.repository import MemoryRepository
from memoria_memory.vectors import TextRow, VectorRow, VectorStore

PAGE: Final = 200  # memories read, indexed and recorded as done per step
MIGRATION_PREFIX: Final = "lexical_index"

log = logging.getLogger("memoria.memory.lexical_index")


def row_text(binding: str, content: Any) -> str:
    said = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
    return f"{binding}\n{said}"


def text_rows(document: MemoryDocument) -> list[TextRow]:
    """The lexical entries of a settled memory's rows."""
    return [
        TextRow(
            id=row_id_for(document.id, binding),
            memory_id=document.id,
            text=row_text(binding, document.content),
        )
        for binding in document.bindings
    ]


def vector_rows(document: MemoryDocument, vectors: Sequence[Sequence[float]]) -> list[VectorRow]:
    """A memory's rows, one per binding, each with its vector (``vectors`` in binding order)
    and its lexical text."""
    return [
        VectorRow(
            id=row_id_for(document.id, binding),
            memory_id=document.id,
            vector=vector,
            text=row_text(binding, document.content),
        )
        for binding, vector in zip(document.bindings, vectors, strict=True)
    ]


def migration_name(collection: str) -> str:
    return f"{MIGRATION_PREFIX}.{collection}"


async def backfill(repo: MemoryRepository, vectors: VectorStore, *, page: int = PAGE) -> int:
    """Index the text of every ready memory in ``vectors``' collection; return how many.

    Once per collection, marked done when the last page is indexed. Resumable: the id of
    the last memory of each indexed page is recorded, and a restart goes on after it. Safe
    to repeat (an entry is an upsert by row id) and to run beside writes: every write
    indexes its own text, and a memory that changed between this pass' read and its write
    is indexed again from what it says now. Memory stays bounded by ``page``."""
    name = migration_name(vectors.collection)
    if await repo.migrated(name):
        return 0
    after = await repo.progress(name)
    indexed = 0
    while documents := await repo.ready_in(vectors.collection, after=after, limit=page):
        by_user: dict[str, list[TextRow]] = {}
        for document in documents:
            by_user.setdefault(document.user_id, []).extend(text_rows(document))
        for user_id, rows in by_user.items():
            await vectors.index_text(user_id, rows)
            await _index_changed(repo, vectors, user_id, documents)
        indexed += len(documents)
        after = documents[-1].id
        await repo.save_progress(name, after)
    await repo.mark_migrated(name)
    if indexed:
        log.info("indexed the text of %d memories written before lexical search", indexed)
    return indexed


async def _index_changed(
    repo: MemoryRepository, vectors: VectorStore, user_id: str, read: list[MemoryDocument]
) -> None:
    """Index again the user's memories of ``read`` that a write changed since they were
    read, so an old text written by this pass does not replace the write's newer one."""
    before = {d.id: (d.content, d.bindings) for d in read if d.user_id == user_id}
    now = await repo.ready(user_id, list(before), None)
    changed = [d for d in now if (d.content, d.bindings) != before[d.id]]
    rows = [row for document in changed for row in text_rows(document)]
    if rows:
        await vectors.index_text(user_id, rows)

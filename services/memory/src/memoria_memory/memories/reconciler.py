"""Repairs what crashes leave behind: unfinished writes and orphan vector rows.

Runs at start-up (every unfinished write, whatever its age) and then periodically (only
writes untouched for ``reconcile_grace_seconds``: younger ones may still be in flight in
another replica). Unfinished writes are finished forward with the writer's own idempotent
steps — a save is completed, never rolled back, so nothing the user asked to remember is
lost. Orphan rows (rows no document accounts for) are deleted.

Earlier versions wrote a year before 1000 as three digits ("999-01-01T…"), which no later
read could parse, so such a save never settled: its times are rewritten in today's
fixed-width form before it is finished.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from memoria_memory.memories import clock
from memoria_memory.memories.documents import STAMPED_FIELDS, MemoryDocument
from memoria_memory.memories.ids import row_ids_for
from memoria_memory.memories.repository import MemoryRepository
from memoria_memory.memories.writes import MemoryWriter
from memoria_memory.vectors import VectorStore

log = logging.getLogger("memoria.memory.reconciler")


@dataclass
class ReconcileReport:
    finished: int = 0
    failed: int = 0
    orphans_removed: int = 0
    elsewhere: int = 0
    errors: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not (self.finished or self.failed or self.orphans_removed)


@dataclass
class Reconciler:
    repo: MemoryRepository
    vectors: VectorStore
    writer: MemoryWriter

    async def run_once(self, *, grace_seconds: float | None) -> ReconcileReport:
        report = ReconcileReport()
        await self._finish_writes(report, grace_seconds)
        await self._remove_orphans(report)
        report.elsewhere = await self.repo.count_in_other_collections(self.vectors.collection)
        if report.elsewhere:
            log.warning(
                "%d memories have vectors of another embedding model and are not found by "
                "semantic search: run `memoria reembed`",
                report.elsewhere,
            )
        if not report.clean:
            log.info(
                "reconciled: %d writes finished, %d failed, %d orphan vectors removed",
                report.finished,
                report.failed,
                report.orphans_removed,
            )
        return report

    async def _finish_writes(self, report: ReconcileReport, grace_seconds: float | None) -> None:
        before = None if grace_seconds is None else clock.stamp_ago(grace_seconds)
        for document in await self.repo.unsettled(before):
            try:
                await self.writer.finish(await self._times_repaired(document))
            except Exception as exc:  # one broken memory must not stop the repair of others
                log.exception("could not finish the %s of %s", document.state, document.id)
                report.failed += 1
                report.errors.append(f"{document.id}: {exc!r}")
            else:
                report.finished += 1

    async def _times_repaired(self, document: MemoryDocument) -> MemoryDocument:
        repaired = {
            name: clock.canonical(getattr(document, name))
            for name in STAMPED_FIELDS
            if clock.canonical(getattr(document, name)) != getattr(document, name)
        }
        if not repaired:
            return document
        log.warning("rewriting the times of %s in fixed-width form: %s", document.id, repaired)
        await self.repo.change(document.user_id, document.id, set=repaired)
        return document.model_copy(update=repaired)

    async def _remove_orphans(self, report: ReconcileReport) -> None:
        for user_id in await self.repo.users():
            # Rows first, documents second: every row was written after its document, so a
            # row seen here has a document visible to the read below (no false orphans).
            rows = await self.vectors.rows_of(user_id)
            if not rows:
                continue
            accounted: set[str] = set()
            for document in await self.repo.of_user(user_id):
                # The rows of a document's current bindings are never orphans, whichever
                # collection it points to: a save or update in flight, or `memoria reembed`
                # between writing rows here and switching the document, has them already.
                accounted.update(row_ids_for(document.id, document.bindings))
                if document.vector_collection in (None, self.vectors.collection):
                    accounted.update(document.vector_ids)
            orphans = [row_id for row_id, _ in rows if row_id not in accounted]
            if orphans:
                await self.vectors.delete(user_id, orphans)
                report.orphans_removed += len(orphans)

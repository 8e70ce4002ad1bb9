"""Maintenance commands of the memory service: ``python -m memoria_memory.admin reembed``.

`memoria reembed` runs this module in a subprocess, as `memoria run` runs the services: the
CLI never imports a service (nor its embedder and vector database client), and draws the
progress this module reports on the socket it hands over (``progress_feed``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated

import typer

from memoria_memory.docstore import DocumentStoreError
from memoria_memory.embedding.port import EmbeddingError
from memoria_memory.progress_feed import ProgressSocket, RunningTotals
from memoria_memory.reembed import (
    DEFAULT_BATCH,
    ReembedPlan,
    ReembedReport,
    describe_issues,
    milvus_dropper,
    plan,
)
from memoria_memory.reembed import reembed as migrate
from memoria_memory.storage import MemoryStorage
from memoria_memory.vectors.port import VectorStoreError
from memoria_runtime.settings import MemoryServiceSettings

EXIT_OK = 0
EXIT_FAILED = 1  # some memories failed, the run aborted, or --drop-old could not drop
EXIT_CANNOT_OPEN = 2  # the stores or the embedder could not be opened: nothing changed
ISSUES_SHOWN = 20  # failed/skipped memories listed one by one; the rest are counted

app = typer.Typer(no_args_is_help=True, add_completion=False)


@app.callback()
def main() -> None:
    """Memoria memory service maintenance."""


@app.command()
def reembed(
    batch: Annotated[
        int, typer.Option(min=1, help="Memories embedded and written per step.")
    ] = DEFAULT_BATCH,
    drop_old: Annotated[
        bool,
        typer.Option(
            "--drop-old", help="Afterwards drop the old collections, if every memory migrated."
        ),
    ] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    progress_fd: Annotated[
        int | None,
        typer.Option(hidden=True, help="A socket to report progress on (`memoria reembed`)."),
    ] = None,
) -> None:
    """Re-embed every memory with the embedding model the settings select now."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    # Its "run `memoria reembed`" warning is noise in the very run it asks for.
    logging.getLogger("memoria.memory.reconciler").setLevel(logging.ERROR)
    feed = None if progress_fd is None else ProgressSocket.from_fd(progress_fd)
    code = asyncio.run(
        _reembed(MemoryServiceSettings.load(), batch=batch, drop_old=drop_old, yes=yes, feed=feed)
    )
    raise typer.Exit(code)


async def _reembed(
    settings: MemoryServiceSettings,
    *,
    batch: int,
    drop_old: bool,
    yes: bool,
    feed: ProgressSocket | None = None,
) -> int:
    try:
        storage = await MemoryStorage.open(settings)
    except (VectorStoreError, DocumentStoreError, EmbeddingError, ValueError, OSError) as exc:
        typer.echo(f"cannot open the memory stores: {exc}", err=True)
        return EXIT_CANNOT_OPEN
    try:
        planned = await plan(storage)
        _show_plan(planned, drop_old=drop_old)
        if not (planned.to_migrate or planned.unsettled or (drop_old and planned.retired)):
            typer.echo("Nothing to migrate.")
            return EXIT_OK
        # Blocking on the terminal inside the loop is fine: nothing else runs yet.
        if not yes and not typer.confirm("Go ahead?", default=False):
            typer.echo("Nothing changed.")
            return EXIT_OK
        with _reporting(feed, planned.to_migrate):
            totals = RunningTotals(feed.advance if feed else lambda _: None)
            report = await migrate(
                storage,
                batch=batch,
                drop_old=drop_old,
                progress=lambda done: totals(done.migrated + done.failed + done.skipped),
                drop=milvus_dropper(settings.storage) if drop_old else None,
            )
        _show_report(report)
        if not report.ok or (drop_old and report.drop_refused is not None):
            return EXIT_FAILED
        return EXIT_OK
    finally:
        await storage.close()


def _show_plan(planned: ReembedPlan, *, drop_old: bool) -> None:
    typer.echo(f"Embedder: {planned.embedder} ({planned.dim} dimensions)")
    typer.echo(f"Target collection: {planned.target}")
    for name, count in sorted(planned.old.items()):
        typer.echo(f"  {count} memories to migrate from {name}")
    typer.echo(f"{planned.to_migrate} memories to re-embed in all.")
    if planned.unsettled:
        typer.echo(f"{planned.unsettled} unfinished writes are finished first.")
    if planned.to_migrate:
        typer.echo(
            f"Every binding of these memories is embedded again with {planned.embedder}; "
            "with a paid embedding API that costs money."
        )
    if drop_old:
        old = sorted({*planned.old, *planned.retired})
        typer.echo(f"Then, if all migrate: drop {', '.join(old) or 'no collection'}.")


@contextmanager
def _reporting(feed: ProgressSocket | None, total: int) -> Iterator[None]:
    """The migration's span on the CLI's display, if it handed one over."""
    if feed is None:
        yield
        return
    feed.start(total)
    try:
        yield
    finally:
        feed.end()


def _show_report(report: ReembedReport) -> None:
    for name, count in sorted(report.found.items()):
        typer.echo(f"Found {count} memories in {name}.")
    typer.echo(f"Migrated {report.migrated} memories to {report.target}.")
    if report.reconciled.finished or report.reconciled.failed:
        typer.echo(
            f"Unfinished writes: {report.reconciled.finished} finished, "
            f"{report.reconciled.failed} failed."
        )
    for title, issues in (("Failed", report.failed), ("Skipped", report.skipped)):
        if issues:
            typer.echo(f"{title}: {len(issues)}")
            for line in describe_issues(issues, ISSUES_SHOWN):
                typer.echo(f"  {line}")
    if report.aborted:
        typer.echo(f"Stopped early: {report.aborted}")
    if report.dropped:
        typer.echo(f"Dropped: {', '.join(report.dropped)}")
    if report.drop_refused:
        typer.echo(f"Old collections kept: {report.drop_refused}")
    if report.migrated:
        typer.echo(
            f"Restart the memory service with these settings to search with {report.embedder}."
        )


if __name__ == "__main__":
    app()

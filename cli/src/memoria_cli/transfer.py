"""`memoria export` and `memoria import`: a user's memories as JSON Lines, one memory a line,
through a running gateway, with memoria_client (the format, its parsing and the import keys
are the client's: ``memoria_client.transfer``).

Import is safe to repeat: each line is created with an idempotency key derived from its
``memory_id`` (or, without one, from the line itself), so importing the same file again
finds the memories the first import created instead of copying them. Lines go to the
gateway a batch at a time (``POST /api/memories/batch``), each refused or saved on its own.
What is the CLI's own: the ``.part`` file, progress, the summary and exit codes.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TextIO

from memoria_cli.gateway_client import Connection, GatewayError, connect, refused
from memoria_cli.progress import Tracker, is_terminal, track
from memoria_client import (
    APIError,
    AsyncMemoria,
    AuthenticationError,
    Memory,
    UnreadableAnswer,
)
from memoria_client import transfer as client_transfer
from memoria_client.errors import describe
from memoria_client.transfer import (
    BATCH_TRIES,
    EXPORT_FIELDS,
    RESEND_DELAY_S,
    PendingImport,
    export_line,
    import_item,
)

__all__ = ["EXIT_FAILED", "EXIT_OK", "EXPORT_FIELDS", "run_export", "run_import"]

STDIO: Final = "-"
EXPORT_PAGE_SIZE: Final = 200
PARTIAL_SUFFIX: Final = ".part"
EXIT_OK: Final = 0
EXIT_FAILED: Final = 1


async def export_memories(
    client: AsyncMemoria,
    sink: TextIO,
    tracker: Tracker | None = None,
    *,
    page_size: int = EXPORT_PAGE_SIZE,
) -> int:
    """Write every memory of the client's user, newest first; return how many."""
    count = 0
    async for memory in _every_memory(client, page_size):
        sink.write(export_line(memory) + "\n")
        count += 1
        if tracker is not None:
            tracker.advance()
    return count


async def _every_memory(client: AsyncMemoria, page_size: int) -> AsyncIterator[Memory]:
    """The user's memories, newest first; a listing refused or unreadable stops the command
    (a refused token is ``connect``'s to say)."""
    try:
        async for memory in client.list_memories(page_size=page_size):
            yield memory
    except AuthenticationError:
        raise
    except APIError as exc:
        raise GatewayError(
            f"listing memories failed ({exc.status_code}): {describe(exc.detail)}"
        ) from exc
    except UnreadableAnswer as exc:
        raise GatewayError(f"the gateway sent a page this CLI cannot read: {exc}") from exc


@dataclass
class ImportSummary(client_transfer.ImportSummary):
    last_line: int = 0
    """The number of the last line read, blank ones included."""

    @property
    def counted(self) -> int:
        return self.created + self.present + self.failed


async def import_memories(
    client: AsyncMemoria, lines: Iterable[str], tracker: Tracker, summary: ImportSummary
) -> None:
    """Create each line's memory with memoria_client's import keys, counting into
    ``summary`` (the caller keeps it should the gateway stop answering midway). A bad or
    refused line is reported (``tracker.note``) with its number and skipped; a refused
    token stops the import. The loop is the CLI's own, not ``import_lines``, for the
    progress and the line a stop happened at."""
    mine = {memory.memory_id async for memory in _every_memory(client, EXPORT_PAGE_SIZE)}
    pending = PendingImport()
    for number, line in enumerate(lines, start=1):
        summary.last_line = number
        noted = len(summary.failures)
        item = import_item(number, line, mine, summary)
        _note_failures(tracker, summary, noted)
        tracker.advance()
        if item is not None and pending.add(number, item):
            await _send(client, pending, tracker, summary)
    if pending.items:
        await _send(client, pending, tracker, summary)


async def _send(
    client: AsyncMemoria, pending: PendingImport, tracker: Tracker, summary: ImportSummary
) -> None:
    summary.last_line = pending.lines[0]  # a stop now leaves this line and the next unsent
    noted = len(summary.failures)
    for attempt in range(1, BATCH_TRIES + 1):
        try:
            answer = await client.run(pending.call())
        except AuthenticationError:
            raise
        except APIError as exc:
            pending.fail(summary, refused(exc))
            break
        except UnreadableAnswer:
            # Sent, but what was created cannot be told: a repeat import settles it.
            pending.fail(summary, "the gateway's answer could not be read")
            break
        pending.count(summary, answer, last_try=attempt == BATCH_TRIES)
        if not pending.items:
            break
        await asyncio.sleep(RESEND_DELAY_S * attempt)
    _note_failures(tracker, summary, noted)


def _note_failures(tracker: Tracker, summary: ImportSummary, since: int) -> None:
    for number, reason in summary.failures[since:]:
        tracker.note(f"line {number}: {reason}")


# -- commands ----------------------------------------------------------------------------------


def cannot_read(source: str, exc: OSError | UnicodeDecodeError) -> str:
    """Why ``source`` cannot be read, in a few words (not Python's repr of the error)."""
    if isinstance(exc, UnicodeDecodeError):
        return f"{source} is not UTF-8 text (byte {exc.start} of a line)"
    if isinstance(exc, FileNotFoundError):
        return f"no such file: {source}"
    if isinstance(exc, IsADirectoryError):
        return f"{source} is a directory, not a file"
    return f"cannot read {source}: {exc.strerror or exc}"


def line_count(stream: TextIO) -> int | None:
    """The lines a file holds (read once more afterwards), or None for a pipe."""
    try:
        if not stream.seekable():
            return None
        count = sum(1 for _ in stream)
        stream.seek(0)
    except OSError:  # some character devices say seekable but are not
        return None
    return count


async def _export(
    connection: Connection, sink: TextIO, tracker: Tracker, environ: Mapping[str, str] | None
) -> int:
    async with connect(connection, environ) as client:
        return await export_memories(client, sink, tracker)


def _export_to_file(
    connection: Connection, target: Path, tracker: Tracker, environ: Mapping[str, str] | None
) -> int:
    partial = target.with_name(target.name + PARTIAL_SUFFIX)
    try:
        with partial.open("w", encoding="utf-8") as sink:
            count = asyncio.run(_export(connection, sink, tracker, environ))
        partial.replace(target)  # all or nothing: a failed export leaves no half file behind
    finally:
        partial.unlink(missing_ok=True)
    return count


def run_export(
    connection: Connection,
    output: str,
    *,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    environ: Mapping[str, str] | None = None,
) -> int:
    """`memoria export`: write to ``output`` (``-``: standard output); return the exit code.
    Progress goes to standard error: a bar on a terminal (unless the memories themselves go
    to that terminal), plain lines now and then otherwise."""
    out = sys.stdout if stdout is None else stdout
    err = sys.stderr if stderr is None else stderr
    bar = is_terminal(err) and not (output == STDIO and is_terminal(out))
    try:
        with track(err, "exporting", "memories", None, terminal=bar) as tracker:
            if output == STDIO:
                count = asyncio.run(_export(connection, out, tracker, environ))
            else:
                count = _export_to_file(connection, Path(output), tracker, environ)
    except GatewayError as exc:
        err.write(f"export failed: {exc}\n")
        return EXIT_FAILED
    except OSError as exc:
        err.write(f"export failed: cannot write {output}: {exc.strerror or exc}\n")
        return EXIT_FAILED
    where = "standard output" if output == STDIO else output
    err.write(f"exported {count} memories to {where}\n")
    return EXIT_OK


async def _import(
    connection: Connection,
    lines: Iterable[str],
    tracker: Tracker,
    summary: ImportSummary,
    environ: Mapping[str, str] | None,
) -> None:
    async with connect(connection, environ) as client:
        await import_memories(client, lines, tracker, summary)


def _import_from(
    connection: Connection,
    lines: TextIO,
    err: TextIO,
    summary: ImportSummary,
    environ: Mapping[str, str] | None,
) -> None:
    with track(err, "importing", "lines", line_count(lines)) as tracker:
        asyncio.run(_import(connection, lines, tracker, summary, environ))


def run_import(
    connection: Connection,
    source: str,
    *,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    environ: Mapping[str, str] | None = None,
) -> int:
    """`memoria import`: read ``source`` (``-``: standard input); return the exit code,
    non-zero when any line failed. What stops the import as a whole (no such file, gateway
    unreachable, token refused) is said in one line; the created/present/failed summary
    follows only if lines were counted before it."""
    out = sys.stdout if stdout is None else stdout
    err = sys.stderr if stderr is None else stderr
    summary = ImportSummary()
    try:
        if source == STDIO:
            _import_from(connection, sys.stdin if stdin is None else stdin, err, summary, environ)
        else:
            with Path(source).open(encoding="utf-8") as lines:
                _import_from(connection, lines, err, summary, environ)
    except GatewayError as exc:
        line = summary.last_line
        what = f"import stopped at line {line}" if line else "import failed"
        return _stopped(f"{what}: {exc}", summary, out, err)
    except (OSError, UnicodeDecodeError) as exc:
        return _stopped(f"import failed: {cannot_read(source, exc)}", summary, out, err)
    out.write(f"{summary}\n")
    return EXIT_FAILED if summary.failed else EXIT_OK


def _stopped(message: str, summary: ImportSummary, out: TextIO, err: TextIO) -> int:
    err.write(message + "\n")
    if summary.counted:  # what got in before the stop, so that nobody re-checks it by hand
        out.write(f"{summary}\n")
    return EXIT_FAILED

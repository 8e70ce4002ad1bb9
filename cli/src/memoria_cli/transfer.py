"""`memoria export` and `memoria import`: a user's memories as JSON Lines, one memory a line,
through a running gateway's HTTP API (``/api/memories``).

Import is safe to repeat: each line is created with an ``Idempotency-Key`` derived from its
``memory_id`` (or, without one, from the line itself), so importing the same file again
finds the memories the first import created instead of copying them.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Final, TextIO

import httpx
from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    model_validator,
)

from memoria_cli.gateway_client import Connection, GatewayError, connect, error_detail, send
from memoria_contracts.memory import (
    DEFAULT_MEMORY_TYPE,
    MAX_BINDING_CHARS,
    MAX_BINDINGS,
    Binding,
    ContentKind,
    Memory,
    MemoryType,
)
from memoria_runtime.progress import Tracker, is_terminal, track

STDIO: Final = "-"
MEMORIES_PATH: Final = "/api/memories"
IDEMPOTENCY_HEADER: Final = "Idempotency-Key"
IMPORT_KEY_PREFIX: Final = "import:"
EXPORT_PAGE_SIZE: Final = 200
EXPORT_FIELDS: Final = (
    "memory_id",
    "memory_type",
    "content_kind",
    "content",
    "bindings",
    "creation_datetime",
    "last_accessed",
    "updated_at",
)
CREATE_FIELDS: Final = ("content", "content_kind", "memory_type", "bindings", "creation_datetime")
PARTIAL_SUFFIX: Final = ".part"
MAX_SOURCE_ID_CHARS: Final = 100
"""Room for ``import:`` plus the id within the gateway's limit on keys."""
EXIT_OK: Final = 0
EXIT_FAILED: Final = 1

SourceId = Annotated[
    str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_SOURCE_ID_CHARS)
]


# -- export ---------------------------------------------------------------------------------


class ExportPage(BaseModel):
    memories: list[Memory]
    next_cursor: str | None = None


def export_line(memory: Memory) -> str:
    return json.dumps(
        memory.model_dump(mode="json", include=set(EXPORT_FIELDS)), ensure_ascii=False
    )


async def memory_pages(
    client: httpx.AsyncClient, *, page_size: int = EXPORT_PAGE_SIZE
) -> AsyncIterator[list[Memory]]:
    """Every memory of the client's user, newest first, a page at a time."""
    cursor: str | None = None
    while True:
        params: dict[str, str | int] = {"limit": page_size}
        if cursor is not None:
            params["cursor"] = cursor
        response = await send(client, "GET", MEMORIES_PATH, params=params)
        if response.is_error:
            raise GatewayError(
                f"listing memories failed ({response.status_code}): {error_detail(response)}"
            )
        try:
            page = ExportPage.model_validate_json(response.content)
        except ValidationError as exc:
            raise GatewayError(f"the gateway sent a page this CLI cannot read: {exc}") from exc
        yield page.memories
        if page.next_cursor is None:
            return
        if page.next_cursor == cursor:  # would loop forever
            raise GatewayError("the gateway sent the same page cursor twice")
        cursor = page.next_cursor


async def export_memories(
    client: httpx.AsyncClient,
    sink: TextIO,
    tracker: Tracker | None = None,
    *,
    page_size: int = EXPORT_PAGE_SIZE,
) -> int:
    """Write every memory of the client's user, newest first; return how many."""
    count = 0
    async for memories in memory_pages(client, page_size=page_size):
        for memory in memories:
            sink.write(export_line(memory) + "\n")
        count += len(memories)
        if tracker is not None:
            tracker.advance(len(memories))
    return count


# -- import ---------------------------------------------------------------------------------


class ImportRecord(BaseModel):
    """One line to import: the export format, with ``memory_id`` and timestamps optional, and
    the bindings too when the content is text."""

    # Unknown fields (relevance_score, fields of a newer export) are ignored, not refused.
    model_config = ConfigDict(extra="ignore")

    memory_id: SourceId | None = None
    memory_type: MemoryType = DEFAULT_MEMORY_TYPE
    content_kind: ContentKind | None = None
    content: Any = Field(description="Required; null is refused by the gateway.")
    bindings: list[Binding] = Field(min_length=1, max_length=MAX_BINDINGS)
    creation_datetime: AwareDatetime | None = None  # the gateway wants the offset too
    # Accepted so an export validates as it is; the gateway sets these itself.
    last_accessed: datetime | None = None
    updated_at: datetime | None = None

    @model_validator(mode="before")
    @classmethod
    def _text_is_its_own_key(cls, data: Any) -> Any:
        """A line of text without bindings ("content" only: notes written by hand or kept by
        another tool) is found by its text, the first key the chat gives a fact too. JSON
        content has no one text to search by, so it still needs its bindings."""
        if isinstance(data, dict) and "bindings" not in data:
            content = data.get("content")
            if isinstance(content, str) and content.strip():
                return data | {"bindings": [content.strip()[:MAX_BINDING_CHARS]]}
        return data

    def create_body(self) -> dict[str, Any]:
        body = self.model_dump(mode="json", include=set(CREATE_FIELDS))
        # Unset kind and date are left out: the gateway infers the one and uses now.
        return {k: v for k, v in body.items() if v is not None or k == "content"} | {
            "imported": True
        }


class LineError(ValueError):
    """A line that cannot be sent: not JSON, or not a memory."""


@dataclass
class ImportSummary:
    created: int = 0
    present: int = 0
    failed: int = 0
    last_line: int = 0
    """The number of the last line read, blank ones included."""

    @property
    def counted(self) -> int:
        return self.created + self.present + self.failed

    def __str__(self) -> str:
        return f"created {self.created}, already present {self.present}, failed {self.failed}"


def idempotency_key(data: Mapping[str, Any], record: ImportRecord) -> str:
    """From the exported id; else from the line's content, canonical so that spacing and key
    order do not make the same memory a new one."""
    if record.memory_id is not None:
        return IMPORT_KEY_PREFIX + record.memory_id
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return IMPORT_KEY_PREFIX + hashlib.sha256(canonical.encode()).hexdigest()


def parse_line(line: str) -> tuple[ImportRecord, str]:
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise LineError(f"not valid JSON ({exc.msg}, column {exc.colno})") from exc
    if not isinstance(data, dict):
        raise LineError("not a JSON object")
    try:
        record = ImportRecord.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc']) or 'line'}: {error['msg']}"
            for error in exc.errors()
        )
        raise LineError(problems) from exc
    return record, idempotency_key(data, record)


async def import_memories(
    client: httpx.AsyncClient, lines: Iterable[str], tracker: Tracker, summary: ImportSummary
) -> None:
    """Create each line's memory, counting into ``summary`` (the caller keeps it should the
    gateway stop answering midway). A bad line is reported (``tracker.note``) with its number
    and skipped. A line whose memory the user has already (an export re-imported into the
    account it came from) is counted as present: ids are per user, so another user's export
    never matches. The user's ids are listed once up front; reading each memory would touch
    its ``last_accessed``, which an import must not do."""
    mine = {m.memory_id async for page in memory_pages(client) for m in page}
    for number, line in enumerate(lines, start=1):
        summary.last_line = number
        problem = await _import_line(client, line, mine, summary)
        if problem is not None:
            summary.failed += 1
            tracker.note(f"line {number}: {problem}")
        tracker.advance()


async def _import_line(
    client: httpx.AsyncClient, line: str, mine: set[str], summary: ImportSummary
) -> str | None:
    """Create one line's memory, counting it; what is wrong with it, if anything."""
    if not line.strip():
        return None  # blank lines carry nothing, but still count for the numbering
    try:
        record, key = parse_line(line)
    except LineError as exc:
        return str(exc)
    if record.memory_id in mine:
        summary.present += 1
        return None
    response = await send(
        client, "POST", MEMORIES_PATH, json=record.create_body(), headers={IDEMPOTENCY_HEADER: key}
    )
    if response.status_code == httpx.codes.CREATED:
        summary.created += 1
    elif response.status_code == httpx.codes.OK:
        summary.present += 1
    else:
        return f"refused ({response.status_code}): {error_detail(response)}"
    return None


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

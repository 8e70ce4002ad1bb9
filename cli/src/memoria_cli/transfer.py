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
    client: httpx.AsyncClient, sink: TextIO, *, page_size: int = EXPORT_PAGE_SIZE
) -> int:
    """Write every memory of the client's user, newest first; return how many."""
    count = 0
    async for memories in memory_pages(client, page_size=page_size):
        for memory in memories:
            sink.write(export_line(memory) + "\n")
        count += len(memories)
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
    client: httpx.AsyncClient, lines: Iterable[str], errors: TextIO, summary: ImportSummary
) -> None:
    """Create each line's memory, counting into ``summary`` (the caller keeps it should the
    gateway stop answering midway). A bad line is reported with its number and skipped. A
    line whose memory the user has already (an export re-imported into the account it came
    from) is counted as present: ids are per user, so another user's export never matches.
    The user's ids are listed once up front; reading each memory would touch its
    ``last_accessed``, which an import must not do."""
    mine = {m.memory_id async for page in memory_pages(client) for m in page}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue  # blank lines carry nothing, but still count for the numbering
        try:
            record, key = parse_line(line)
        except LineError as exc:
            summary.failed += 1
            errors.write(f"line {number}: {exc}\n")
            continue
        if record.memory_id in mine:
            summary.present += 1
            continue
        response = await send(
            client,
            "POST",
            MEMORIES_PATH,
            json=record.create_body(),
            headers={IDEMPOTENCY_HEADER: key},
        )
        if response.status_code == httpx.codes.CREATED:
            summary.created += 1
        elif response.status_code == httpx.codes.OK:
            summary.present += 1
        else:
            summary.failed += 1
            errors.write(f"line {number}: refused ({response.status_code}): ")
            errors.write(f"{error_detail(response)}\n")


# -- commands -------------------------------------------------------------------------------


async def _export(connection: Connection, sink: TextIO, environ: Mapping[str, str] | None) -> int:
    async with connect(connection, environ) as client:
        return await export_memories(client, sink)


def _export_to_file(connection: Connection, target: Path, environ: Mapping[str, str] | None) -> int:
    partial = target.with_name(target.name + PARTIAL_SUFFIX)
    try:
        with partial.open("w", encoding="utf-8") as sink:
            count = asyncio.run(_export(connection, sink, environ))
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
    """`memoria export`: write to ``output`` (``-``: standard output); return the exit code."""
    out = sys.stdout if stdout is None else stdout
    err = sys.stderr if stderr is None else stderr
    try:
        if output == STDIO:
            count = asyncio.run(_export(connection, out, environ))
        else:
            count = _export_to_file(connection, Path(output), environ)
    except GatewayError as exc:
        err.write(f"export failed: {exc}\n")
        return EXIT_FAILED
    except OSError as exc:
        err.write(f"export failed: cannot write {output}: {exc}\n")
        return EXIT_FAILED
    where = "standard output" if output == STDIO else output
    err.write(f"exported {count} memories to {where}\n")
    return EXIT_OK


async def _import(
    connection: Connection,
    lines: Iterable[str],
    errors: TextIO,
    summary: ImportSummary,
    environ: Mapping[str, str] | None,
) -> None:
    async with connect(connection, environ) as client:
        await import_memories(client, lines, errors, summary)


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
    non-zero when any line failed."""
    out = sys.stdout if stdout is None else stdout
    err = sys.stderr if stderr is None else stderr
    summary = ImportSummary()
    try:
        if source == STDIO:
            asyncio.run(
                _import(connection, sys.stdin if stdin is None else stdin, err, summary, environ)
            )
        else:
            with Path(source).open(encoding="utf-8") as lines:
                asyncio.run(_import(connection, lines, err, summary, environ))
    except GatewayError as exc:
        err.write(f"import stopped: {exc}\n")
        out.write(f"{summary}\n")
        return EXIT_FAILED
    except (OSError, UnicodeDecodeError) as exc:
        err.write(f"import failed: cannot read {source}: {exc}\n")
        out.write(f"{summary}\n")
        return EXIT_FAILED
    out.write(f"{summary}\n")
    return EXIT_FAILED if summary.failed else EXIT_OK

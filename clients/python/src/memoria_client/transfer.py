"""Export and import as JSON Lines, the format of ``memoria export`` and ``memoria import``:
one memory a line. Files written by either tool are read by the other.

Import is safe to repeat: each line is created with the idempotency key
``import:<memory_id>`` (without an id: ``import:<sha256 of the line's JSON, keys sorted>``),
the keys the CLI uses, so a file imported again (by either tool) creates nothing twice.
Lines go :data:`IMPORT_BATCH` at a time through ``POST /api/memories/batch``, whose bindings
the memory service embeds together.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from memoria_client import calls
from memoria_client.calls import Call
from memoria_client.errors import describe
from memoria_client.models import BatchCreated, Memory

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
IMPORT_KEY_PREFIX: Final = "import:"
MAX_BINDINGS: Final = 16
MAX_BINDING_CHARS: Final = 300
IMPORT_BATCH: Final = 200
"""Lines per ``POST /api/memories/batch`` (the gateway takes up to 256)."""
BATCH_TRIES: Final = 3
"""Sends of a batch's items the memory service could not take in time (503): safe, as each
carries its key; the wait grows by RESEND_DELAY_S each time."""
RESEND_DELAY_S: Final = 1.0


def export_line(memory: Memory) -> str:
    """One memory as a line of ``memoria export`` (without the newline)."""
    return json.dumps(
        memory.model_dump(mode="json", include=set(EXPORT_FIELDS)), ensure_ascii=False
    )


IMPORTED_FIELDS: Final = ("content", "content_kind", "memory_type", "bindings", "creation_datetime")
"""The fields of a line that go to the gateway, as they are written: the gateway checks them
and says in its own words what it refuses."""
MAX_MEMORY_ID_CHARS: Final = 100


@dataclass(frozen=True)
class ImportRecord:
    """One line to import: the export format, only ``memory_id`` read here (it keys the
    import; optional). A text line without bindings is found by its own text."""

    memory_id: str | None
    fields: dict[str, Any]
    """What is sent for the line, ``imported`` included."""


class LineError(ValueError):
    """A line that cannot be sent: not JSON, not an object, or a ``memory_id`` no key fits."""


def idempotency_key(data: Mapping[str, Any], record: ImportRecord) -> str:
    if record.memory_id is not None:
        return IMPORT_KEY_PREFIX + record.memory_id
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return IMPORT_KEY_PREFIX + hashlib.sha256(canonical.encode()).hexdigest()


def parse_line(line: str) -> tuple[ImportRecord, str]:
    """The memory of one line and its idempotency key; ``LineError`` says what is wrong."""
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise LineError(f"not valid JSON ({exc.msg}, column {exc.colno})") from exc
    if not isinstance(data, dict):
        raise LineError("not a JSON object")
    memory_id = data.get("memory_id")
    if memory_id is not None:
        if not isinstance(memory_id, str) or not 1 <= len(memory_id.strip()) <= MAX_MEMORY_ID_CHARS:
            raise LineError(f"memory_id must be text of 1 to {MAX_MEMORY_ID_CHARS} characters")
        memory_id = memory_id.strip()
    fields = {name: data[name] for name in IMPORTED_FIELDS if name in data}
    content = fields.get("content")
    if "bindings" not in fields and isinstance(content, str) and content.strip():
        fields["bindings"] = [content.strip()[:MAX_BINDING_CHARS]]
    record = ImportRecord(memory_id=memory_id, fields={**fields, "imported": True})
    return record, idempotency_key(data, record)


@dataclass
class ImportSummary:
    created: int = 0
    present: int = 0
    failed: int = 0
    failures: list[tuple[int, str]] = field(default_factory=list)
    """(line number, why) for each line that failed."""

    def fail(self, number: int, reason: str) -> None:
        self.failed += 1
        self.failures.append((number, reason))

    def __str__(self) -> str:
        return f"created {self.created}, already present {self.present}, failed {self.failed}"


def import_item(
    number: int, line: str, mine: set[str], summary: ImportSummary
) -> dict[str, Any] | None:
    """The batch item for line ``number``, or None when the line is settled without one
    (blank; unreadable: counted failed; one of the user's own memories already: present)."""
    if not line.strip():
        return None  # blank lines carry nothing but still count for the numbering
    try:
        record, key = parse_line(line)
    except LineError as exc:
        summary.fail(number, str(exc))
        return None
    if record.memory_id in mine:
        # An export imported back into the account it came from: ids are per user, so
        # another account's export never matches, and nothing is read (which would touch
        # last_accessed).
        summary.present += 1
        return None
    return {**record.fields, "idempotency_key": key}


@dataclass
class PendingImport:
    """Lines read but not sent yet, by line number."""

    lines: list[int] = field(default_factory=list)
    items: list[dict[str, Any]] = field(default_factory=list)

    def add(self, number: int, item: dict[str, Any]) -> bool:
        """Keep the item; whether a batch is full now."""
        self.lines.append(number)
        self.items.append(item)
        return len(self.items) >= IMPORT_BATCH

    def call(self) -> Call[BatchCreated]:
        return calls.add_memories(self.items)

    def count(self, summary: ImportSummary, answer: BatchCreated, *, last_try: bool) -> None:
        """Count each line by its own result; a batch answered short fails its rest. Lines
        refused as unavailable stay pending to be sent again, unless this was the last try."""
        lines, items = [], []
        for number, item, result in zip(self.lines, self.items, answer.results, strict=False):
            if result.status == CREATED:
                summary.created += 1
            elif result.status == PRESENT:
                summary.present += 1
            elif result.status == UNAVAILABLE and not last_try:
                lines.append(number)
                items.append(item)
            else:
                reason = describe(_within_item(result.detail))
                summary.fail(number, f"refused ({result.status}): {reason}")
        for number in self.lines[len(answer.results) :]:
            summary.fail(number, "the gateway's answer left this line out")
        self.lines, self.items = lines, items

    def fail(self, summary: ImportSummary, reason: str) -> None:
        for number in self.lines:
            summary.fail(number, reason)
        self.clear()

    def clear(self) -> None:
        self.lines.clear()
        self.items.clear()


def _within_item(detail: Any) -> Any:
    """A batch item's field errors located as a single create's (``body.<field>``): the
    line number already says which item."""
    if not isinstance(detail, list):
        return detail
    located = []
    for error in detail:
        loc = error.get("loc") if isinstance(error, dict) else None
        if isinstance(loc, list) and loc[:2] == ["body", "memories"]:
            located.append({**error, "loc": ["body", *loc[3:]]})
        else:
            located.append(error)
    return located


CREATED: Final = 201
PRESENT: Final = 200
UNAVAILABLE: Final = 503

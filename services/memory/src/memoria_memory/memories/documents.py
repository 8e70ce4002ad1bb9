"""A memory as stored in the document store (the source of truth).

``state`` makes every multi-step write visible and repairable:

* ``writing`` — the document is written; its vector rows may not be (a save, or an update
  that changed bindings). Never returned by a search or a listing. One row per binding must
  exist (row ids derive from the memory id and the binding) and ``pending.stale`` rows must
  go before it is ``ready``.
* ``ready`` — document and vector rows agree: ``vector_ids`` are exactly its rows.
* ``deleting`` — a delete started: rows are being removed, then the document.

Whoever finds a document that is not ``ready`` (the writer itself after a retry, or the
reconciler after a crash) finishes the write with the same idempotent steps.
"""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from memoria_contracts.memory import ChangeSource, ContentKind, Memory, MemoryType
from memoria_memory.memories import clock

State = Literal["writing", "ready", "deleting"]
STAMPED_FIELDS: Final = ("creation_datetime", "last_accessed", "updated_at")
"""The document's times, stored as clock stamps."""
Operation = Literal["save", "update", "delete"]


class PendingWrite(BaseModel):
    """What an unfinished write still has to do, and what to record when it is done."""

    model_config = ConfigDict(frozen=True)

    op: Operation
    change_id: str
    started_at: str
    source: ChangeSource
    cycle_id: str | None = None
    stale: list[str] = Field(
        default_factory=list, description="Vector rows to remove (bindings an update dropped)."
    )
    before: Memory | None = Field(
        default=None, description="The memory before an update or a delete, for its history."
    )


class MemoryDocument(BaseModel):
    model_config = ConfigDict(validate_by_name=True, validate_by_alias=True)

    id: str = Field(alias="_id")
    user_id: str
    memory_type: MemoryType
    content_kind: ContentKind
    content: Any
    bindings: list[str]
    vector_ids: list[str] = Field(default_factory=list)
    vector_collection: str | None = None
    state: State
    pending: PendingWrite | None = None
    creation_datetime: str
    last_accessed: str
    updated_at: str
    cycle_id: str | None = None
    content_key: str | None = Field(
        default=None,
        description="ids.content_key_for(content): finds a memory that already says what a "
        "chat save would add. None on documents written before it existed.",
    )

    @classmethod
    def from_stored(cls, document: dict[str, Any]) -> MemoryDocument:
        return cls.model_validate(document)

    def to_stored(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)

    def to_memory(self, relevance: float | None = None) -> Memory:
        return Memory(
            memory_id=self.id,
            memory_type=self.memory_type,
            content_kind=self.content_kind,
            content=self.content,
            bindings=self.bindings,
            creation_datetime=clock.parse(self.creation_datetime),
            last_accessed=clock.parse(self.last_accessed),
            updated_at=clock.parse(self.updated_at),
            relevance_score=None if relevance is None else round(relevance, 4),
        )

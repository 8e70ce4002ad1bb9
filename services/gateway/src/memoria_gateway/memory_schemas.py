"""Bodies and answers of the HTTP memory API (``/api/memories``).

The memory service's replies carry ``type`` and ``success`` for the bus; HTTP clients get
the status code instead, so these models keep only what a client needs. There is no user id
anywhere here: it comes from the bearer token alone.
"""

from __future__ import annotations

from typing import Annotated, Any, Final

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WithJsonSchema,
    WrapValidator,
    model_validator,
)

from memoria_contracts.memory import (
    DEFAULT_MEMORY_TYPE,
    MAX_BINDING_CHARS,
    MAX_BINDINGS,
    Binding,
    ContentKind,
    Memory,
    MemoryChange,
    MemoryId,
    MemoryType,
    check_content_text,
)
from memoria_contracts.times import STORABLE_RANGE, StorableTime

IDEMPOTENCY_PREFIX: Final = "api:"
"""Put before every key the API passes on, so an HTTP client's key can never coincide with
a key the chat's actions use (``<cycle>:<step>:<n>``) and return that memory instead."""
MAX_IDEMPOTENCY_KEY_CHARS: Final = 200 - len(IDEMPOTENCY_PREFIX)
"""The contract's key allows 200 characters; the prefix takes its share."""

ClientIdempotencyKey = Annotated[
    str, StringConstraints(min_length=1, max_length=MAX_IDEMPOTENCY_KEY_CHARS)
]


class _Body(BaseModel):
    # A misspelt field ("binding") or one the client may not set ("user_id", "source") is
    # refused rather than silently dropped.
    model_config = ConfigDict(extra="forbid")


class MemoryCreate(_Body):
    """A new memory."""

    content: Any = Field(
        description="Text (content_kind 'text') or a JSON object or list ('json')."
    )
    content_kind: ContentKind | None = Field(
        default=None, description="Unset: 'text' for a string, else 'json'."
    )
    memory_type: MemoryType = DEFAULT_MEMORY_TYPE
    bindings: list[Binding] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_BINDINGS,
        description="Short phrases the memory is found by (each is embedded for search). "
        "Unset: a text memory is found by its own text; a JSON memory needs them.",
    )
    # With its offset: the memory service would read a naive time as its own local time.
    creation_datetime: StorableTime | None = Field(
        default=None,
        description="Kept when importing an export: ISO 8601 with a UTC offset, between "
        f"{STORABLE_RANGE}; unset means now.",
    )
    imported: bool = Field(
        default=False,
        description="True when the memory comes from an export (`memoria import`): its "
        "history then says 'import' instead of 'api'.",
    )

    @model_validator(mode="after")
    def _findable(self) -> MemoryCreate:
        # Said before anything about bindings: an empty memory is empty, whatever else.
        if self.content is None or (isinstance(self.content, str) and not self.content.strip()):
            raise ValueError("Content is empty.")
        if isinstance(self.content, str):
            check_content_text(self.content)  # before the binding made of it is checked
        if self.bindings is None and not isinstance(self.content, str):
            raise ValueError(
                "A JSON memory needs bindings: the short phrases it is to be found by."
            )
        return self

    def search_keys(self) -> list[str]:
        """The bindings given, else the text itself (:meth:`_findable` saw to one of both)."""
        if self.bindings is not None:
            return self.bindings
        return [str(self.content).strip()[:MAX_BINDING_CHARS]]


class MemoryPatch(_Body):
    """The fields to change; at least one of content, memory_type or bindings."""

    content: Any = None
    content_kind: ContentKind | None = Field(
        default=None, description="Unset: 'text' for a string content, else 'json'."
    )
    memory_type: MemoryType | None = None
    bindings: list[Binding] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_BINDINGS,
        description="Replace all bindings (they are embedded again).",
    )


class MemoryCreated(Memory):
    created: bool = Field(
        description="False when this Idempotency-Key had already created the memory."
    )


class MemoryListPage(BaseModel):
    memories: list[Memory] = Field(description="Newest first.")
    next_cursor: str | None = Field(
        default=None, description="Pass as ?cursor= for the next page; null on the last one."
    )


class MemorySearchResult(BaseModel):
    memories: list[Memory] = Field(
        description="Most relevant first (semantic, with relevance_score) or newest first."
    )


class MemoryChanged(BaseModel):
    memory: Memory = Field(description="The memory after the change.")
    old_content: Any
    new_content: Any


class MemoryRemoved(BaseModel):
    memory_id: MemoryId
    deleted_content: Any


class MemoryChanges(BaseModel):
    memory_id: MemoryId
    changes: list[MemoryChange] = Field(description="Oldest first: created, updated, deleted.")


class ErrorBody(BaseModel):
    """What every refusal but a 422 carries (422 has FastAPI's list of field errors)."""

    detail: str


MAX_BATCH_MEMORIES: Final = 256
"""Memories in one ``POST /api/memories/batch``: a few seconds of embedding, well within a
client's timeout, and a body of a few MB at most."""


class MemoryBatchItem(MemoryCreate):
    """One memory of a batch: the body of ``POST /api/memories`` plus its idempotency key."""

    idempotency_key: ClientIdempotencyKey | None = Field(
        default=None,
        description="As the Idempotency-Key header of POST /api/memories (the same key, in a "
        "batch or alone, never creates twice). Unset: a random key (every call creates).",
    )


class RefusedItem(BaseModel):
    """An item of a batch that is not a memory; only its own result says so."""

    errors: list[dict[str, Any]]


def _item_or_refusal(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    # One malformed item must not turn the whole batch into a 422: the others are saved.
    try:
        return handler(value)
    except ValidationError as exc:
        return RefusedItem(errors=exc.errors(include_url=False, include_input=False))


BATCH_ITEM_SCHEMA: Final = {
    "description": "A memory as `POST /api/memories` takes it, plus its `idempotency_key`. "
    "Any value is taken here: one that is no such memory is refused alone, as its result "
    "says (422), and the others are saved.",
    "anyOf": [MemoryBatchItem.model_json_schema(mode="validation"), {}],
}
BatchEntry = Annotated[
    MemoryBatchItem, WrapValidator(_item_or_refusal), WithJsonSchema(BATCH_ITEM_SCHEMA)
]
"""A :class:`MemoryBatchItem`; a :class:`RefusedItem` when it is not one. Said so in the
schema: any value is a valid item of the request, refused (or not) in its own result."""


class MemoryBatchCreate(_Body):
    """Up to ``MAX_BATCH_MEMORIES`` new memories, saved as one ``POST /api/memories`` each."""

    memories: list[BatchEntry] = Field(
        min_length=1,
        max_length=MAX_BATCH_MEMORIES,
        description=f"1 to {MAX_BATCH_MEMORIES} memories; each is saved or refused on its own.",
    )


class MemoryBatchResult(BaseModel):
    """What ``POST /api/memories`` would have answered for this item."""

    status: int = Field(
        description="201 created, 200 already created by this idempotency_key, 422 not a "
        "valid memory, 503 the memory service is unavailable (retry it with its key), 502 an "
        "unexpected answer."
    )
    memory: MemoryCreated | None = Field(default=None, description="With 200 and 201.")
    detail: Any = Field(
        default=None,
        description="Otherwise: why, as that route's error body says it (422: a list of "
        "field errors, located under body.memories.<index>).",
    )


class MemoryBatchCreated(BaseModel):
    results: list[MemoryBatchResult] = Field(description="One per memory sent, in its order.")
    created: int = Field(description="Results with status 201.")
    present: int = Field(description="Results with status 200.")
    failed: int = Field(description="The other results.")

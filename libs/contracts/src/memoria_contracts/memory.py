"""Long-term memories: the memory model and the requests the memory service
answers, with their replies.

Every reply has the tool-result shape: ``{"success": true, ...}`` or
``{"success": false, "error_message": ...}`` (:class:`MemoryFailure`). The user id is never a
field here: it is the envelope's, which comes from the authenticated session only.
"""

from __future__ import annotations

import json
import math
from datetime import datetime
from typing import Annotated, Any, Final, Literal

from pydantic import Field, StringConstraints, model_validator

from memoria_contracts.base import ContractModel, FailureReply, SuccessReply
from memoria_contracts.text import (
    CONTROL_FREE,
    NO_CONTROLS,
    TrimmedText,
    code_point,
    control_in,
)
from memoria_contracts.times import (
    EARLIEST_STORABLE,
    LATEST_STORABLE,
    STORABLE_RANGE,
    StorableTime,
)

MemoryType = Literal["user_profile", "preference", "goal", "constraint", "critical_info"]
MEMORY_TYPES: Final[tuple[MemoryType, ...]] = (
    "user_profile",
    "preference",
    "goal",
    "constraint",
    "critical_info",
)
DEFAULT_MEMORY_TYPE: Final[MemoryType] = "user_profile"

DEFAULT_MEMORY_TYPE_DESCRIPTIONS: Final[dict[MemoryType, str]] = {
    "user_profile": "Stable facts about the user (e.g. 'The user's name is Carlos', "
    "'The user lives in São Paulo').",
    "preference": "The user's subjective preferences and tastes (e.g. 'Prefers hotels with a "
    "gym', 'Likes Italian food').",
    "goal": "Something the user wants to achieve (e.g. 'Is planning a 10-day trip to Italy in "
    "December').",
    "constraint": "A restriction or condition to respect (e.g. 'Is allergic to peanuts', "
    "'Has a maximum budget of R$ 5,000 for the trip').",
    "critical_info": "Critical, specific and often short-lived information (e.g. 'The flight "
    "booking number is ABC123').",
}

ContentKind = Literal["text", "json"]
ChangeKind = Literal["created", "updated", "deleted"]
ChangeSource = Literal["chat", "api", "import", "reconciler"]
SearchMode = Literal["semantic", "chronological"]
EmbedPurpose = Literal["passage", "query"]
FailureCode = Literal["not_found", "invalid", "unavailable", "storage_full"]
"""``storage_full``: the disk under the memory store is full; nothing was changed."""

MAX_BINDINGS: Final = 16
MAX_BINDING_CHARS: Final = 300
MAX_CONTENT_CHARS: Final = 8000
MAX_CONTENT_DEPTH: Final = 64
"""Lists and objects inside a JSON content. The content travels inside envelopes (whose JSON
parser stops at 200 levels) and is stored in documents (at most 100 levels)."""
MAX_QUERIES: Final = 8
MAX_EMBED_TEXTS: Final = 64  # texts one memory.embed request may carry
MAX_SEARCH_LIMIT: Final = 100
MAX_PAGE: Final = 500
MAX_EXCLUDED: Final = 500

MemoryId = Annotated[str, StringConstraints(pattern=r"^mem_[A-Za-z0-9]{1,60}$")]
Binding = Annotated[str, TrimmedText(MAX_BINDING_CHARS)]
QueryText = Annotated[str, TrimmedText(MAX_BINDING_CHARS)]
IdempotencyKey = Annotated[
    str, StringConstraints(min_length=1, max_length=200), NO_CONTROLS, CONTROL_FREE
]
Vector = list[float]


def content_size(content: Any) -> int:
    """Characters a content takes, as stored (JSON contents count their JSON text)."""
    if isinstance(content, str):
        return len(content)
    return len(json.dumps(content, ensure_ascii=False))


_INT64: Final = 2**63


def check_content_text(text: str) -> None:
    """Text a content may hold (the content itself, or a string or key inside JSON)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("Content must be Unicode text (it has a lone surrogate).") from None
    found = control_in(text)
    if found is not None:
        raise ValueError(
            f"Content holds the control character {code_point(found)}; text may hold tab and "
            "newline, no other control character."
        )


def _check_json_value(value: Any, depth: int = 0) -> None:
    """What the bus and every document store can carry, checked before anything is sent: no
    lone surrogate (UTF-8 cannot encode it), no key starting with '$' (document stores read
    those as operators), 64-bit integers, finite numbers, a bounded depth."""
    if depth > MAX_CONTENT_DEPTH:
        raise ValueError(f"Content nests deeper than {MAX_CONTENT_DEPTH} levels.")
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError("Content keys must be strings.")
            check_content_text(key)
            if key.startswith("$"):
                raise ValueError(f"Content keys may not start with '$' ({key[:40]!r} does).")
            _check_json_value(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _check_json_value(item, depth + 1)
    elif isinstance(value, str):
        check_content_text(value)
    elif value is None or isinstance(value, bool):
        return
    elif isinstance(value, int):
        if not -_INT64 <= value < _INT64:
            raise ValueError("Content integers must fit in 64 bits.")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("Content numbers must be finite.")
    else:
        raise ValueError(f"Content holds JSON values only, not {type(value).__name__}.")


def _check_content(kind: ContentKind, content: Any) -> None:
    if kind == "text" and isinstance(content, str) and not content.strip():
        raise ValueError("Content is empty.")
    _check_json_value(content)
    if kind == "text" and not isinstance(content, str):
        raise ValueError("Content of a text memory must be text.")
    if kind == "json" and not isinstance(content, dict | list):
        raise ValueError("Content of a json memory must be a JSON object or a list.")
    if content_size(content) > MAX_CONTENT_CHARS:
        raise ValueError(f"Content is longer than {MAX_CONTENT_CHARS} characters.")


class Memory(ContractModel):
    """A memory as users, the UI and the LLM see it."""

    memory_id: MemoryId
    memory_type: MemoryType
    content_kind: ContentKind = "text"
    content: Any
    bindings: list[str]
    creation_datetime: datetime
    last_accessed: datetime
    updated_at: datetime
    relevance_score: float | None = Field(
        default=None, description="0–1, calibrated per embedder; only in semantic results."
    )


def near_the_best(memories: list[Memory], share: float) -> list[Memory]:
    """The memories whose relevance is at least ``share`` of the best one's: a memory far
    below the best match answers the search less than the cards around it, and a card of
    it reads as an answer ("Where do I live?" → the city, not the sister's bassoon)."""
    best = max((m.relevance_score or 0.0 for m in memories), default=0.0)
    if best <= 0.0 or share <= 0.0:
        return memories
    return [m for m in memories if (m.relevance_score or 0.0) >= share * best]


class MemoryChange(ContractModel):
    """One entry of a memory's history (audit log): what changed, when, and why."""

    change_id: str
    memory_id: MemoryId
    kind: ChangeKind
    at: datetime
    source: ChangeSource
    cycle_id: str | None = None
    old: Memory | None = None
    new: Memory | None = None


# -- requests -------------------------------------------------------------------------------


class MemoryEmbed(ContractModel):
    """Embed texts with the memory service's embedder (it owns the model, so vector
    dimensions never mix). ``passage`` for bindings, ``query`` for searches."""

    type: Literal["memory.embed"] = "memory.embed"
    texts: list[QueryText] = Field(min_length=1, max_length=MAX_EMBED_TEXTS)
    purpose: EmbedPurpose


SINCE: Final = "Only memories told at or after this time (their creation_datetime)."
UNTIL: Final = "Only memories told before this time (their creation_datetime)."


def check_window(since: datetime | None, until: datetime | None) -> None:
    """A time window on ``creation_datetime``: ``since`` inclusive, ``until`` exclusive,
    either open; one that ends before it starts is a mistake, not an empty answer."""
    for name, moment in (("since", since), ("until", until)):
        if moment is not None and not EARLIEST_STORABLE <= moment <= LATEST_STORABLE:
            raise ValueError(f"{name} must fall between {STORABLE_RANGE} (UTC).")
    if since is not None and until is not None and since > until:
        raise ValueError("since must not be later than until.")


class MemorySearch(ContractModel):
    """Semantic search by ``queries`` (or by ``vectors`` already embedded for them), or the
    latest memories (``chronological``). Unset limits come from the settings."""

    type: Literal["memory.search"] = "memory.search"
    mode: SearchMode = "semantic"
    queries: list[QueryText] = Field(default_factory=list, max_length=MAX_QUERIES)
    vectors: list[Vector] | None = Field(
        default=None, description="One per query, from memory.embed (purpose 'query')."
    )
    embedder: str | None = Field(default=None, description="The embedder of ``vectors``.")
    memory_type: MemoryType | None = None
    limit: int | None = Field(default=None, ge=1, le=MAX_SEARCH_LIMIT)
    min_relevance: float | None = Field(default=None, ge=0.0, le=1.0)
    exclude_ids: list[str] = Field(default_factory=list, max_length=MAX_EXCLUDED)
    since: StorableTime | None = Field(default=None, description=SINCE)
    until: StorableTime | None = Field(default=None, description=UNTIL)

    @model_validator(mode="after")
    def _queries_for_semantic(self) -> MemorySearch:
        if self.mode == "semantic" and not self.queries:
            raise ValueError("a semantic search needs at least one query")
        if self.vectors is not None and len(self.vectors) != len(self.queries):
            raise ValueError("vectors must match queries one to one")
        check_window(self.since, self.until)
        return self


class MemorySave(ContractModel):
    """Create a memory. The id is derived from the user and ``idempotency_key``, so a
    repeated save (redelivery, retry, re-import) finds the memory instead of duplicating it."""

    type: Literal["memory.save"] = "memory.save"
    idempotency_key: IdempotencyKey
    memory_type: MemoryType = DEFAULT_MEMORY_TYPE
    content_kind: ContentKind = "text"
    content: Any
    bindings: list[Binding] = Field(min_length=1, max_length=MAX_BINDINGS)
    vectors: list[Vector] | None = Field(
        default=None, description="One per binding, from memory.embed (purpose 'passage')."
    )
    embedder: str | None = None
    source: ChangeSource = "chat"
    creation_datetime: StorableTime | None = Field(
        default=None,
        description="When the memory was told: the user message's time for a chat save, the "
        "exported time for an import; else now.",
    )
    reuse_same_content: bool = Field(
        default=False,
        description="When a memory of the user already says the same (case, spacing and end "
        "punctuation aside), answer with it (created false) instead of keeping the fact "
        "twice. The chat's saves set it; the HTTP API's do not (each call creates).",
    )

    @model_validator(mode="after")
    def _valid(self) -> MemorySave:
        _check_content(self.content_kind, self.content)
        if self.vectors is not None and len(self.vectors) != len(self.bindings):
            raise ValueError("vectors must match bindings one to one")
        return self


class MemoryUpdate(ContractModel):
    """Change a memory's content, type or bindings (bindings re-embedded when they change)."""

    type: Literal["memory.update"] = "memory.update"
    memory_id: str
    content: Any = None
    content_kind: ContentKind | None = None
    memory_type: MemoryType | None = None
    bindings: list[Binding] | None = Field(default=None, min_length=1, max_length=MAX_BINDINGS)
    source: ChangeSource = "chat"

    @model_validator(mode="after")
    def _something_to_change(self) -> MemoryUpdate:
        if self.content is None and self.memory_type is None and self.bindings is None:
            raise ValueError("Nothing to change: give content, memory_type or bindings.")
        if self.content is not None:
            kind = self.content_kind or ("text" if isinstance(self.content, str) else "json")
            _check_content(kind, self.content)
        return self


class MemoryDelete(ContractModel):
    type: Literal["memory.delete"] = "memory.delete"
    memory_id: str
    source: ChangeSource = "chat"


class MemoryGet(ContractModel):
    type: Literal["memory.get"] = "memory.get"
    memory_id: str


class MemoryList(ContractModel):
    """The user's memories, newest first, a page at a time."""

    type: Literal["memory.list"] = "memory.list"
    memory_type: MemoryType | None = None
    limit: int = Field(default=50, ge=1, le=MAX_PAGE)
    cursor: str | None = Field(default=None, description="next_cursor of the previous page")
    since: StorableTime | None = Field(default=None, description=SINCE)
    until: StorableTime | None = Field(default=None, description=UNTIL)

    @model_validator(mode="after")
    def _window(self) -> MemoryList:
        check_window(self.since, self.until)
        return self


class MemoryHistoryQuery(ContractModel):
    type: Literal["memory.history"] = "memory.history"
    memory_id: str


# -- replies --------------------------------------------------------------------------------


class MemoryVectors(SuccessReply):
    type: Literal["memory.vectors"] = "memory.vectors"
    embedder: str
    vectors: list[Vector]


class MemoryFound(SuccessReply):
    type: Literal["memory.found"] = "memory.found"
    memories: list[Memory]


class MemorySaved(SuccessReply):
    type: Literal["memory.saved"] = "memory.saved"
    memory_id: MemoryId
    created: bool = Field(
        description="False when the save had already happened, or (reuse_same_content) a "
        "memory already said the same: ``memory`` is that one."
    )
    memory: Memory


class MemoryUpdated(SuccessReply):
    type: Literal["memory.updated"] = "memory.updated"
    memory_id: MemoryId
    old_content: Any
    new_content: Any
    memory: Memory


class MemoryDeleted(SuccessReply):
    type: Literal["memory.deleted"] = "memory.deleted"
    memory_id: MemoryId
    deleted_content: Any
    memory: Memory


class MemoryPage(SuccessReply):
    type: Literal["memory.page"] = "memory.page"
    memories: list[Memory]
    next_cursor: str | None = None


class MemoryHistory(SuccessReply):
    type: Literal["memory.history_page"] = "memory.history_page"
    memory_id: str
    changes: list[MemoryChange]


class MemoryFailure(FailureReply):
    """The request was refused or failed. ``not_found`` is also the answer for another
    user's memory: whether it exists is nobody else's business."""

    type: Literal["memory.failure"] = "memory.failure"
    code: FailureCode
    memory_id: str | None = None


MemoryRequest = (
    MemoryEmbed
    | MemorySearch
    | MemorySave
    | MemoryUpdate
    | MemoryDelete
    | MemoryGet
    | MemoryList
    | MemoryHistoryQuery
)
MemoryReply = (
    MemoryVectors
    | MemoryFound
    | MemorySaved
    | MemoryUpdated
    | MemoryDeleted
    | MemoryPage
    | MemoryHistory
    | MemoryFailure
)

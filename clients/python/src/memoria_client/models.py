"""What the gateway sends and takes, as typed models.

They mirror the documented wire format (docs/protocol.md) rather than import Memoria's own
contracts, so this package installs alone. The protocol grows additively: unknown fields are
ignored here, and unknown frame types are skipped by the chat (see ``parse_frame``).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

MemoryType = Literal["user_profile", "preference", "goal", "constraint", "critical_info"]
ContentKind = Literal["text", "json"]
SearchMode = Literal["semantic", "chronological"]
ChangeKind = Literal["created", "updated", "deleted"]


class _Model(BaseModel):
    # Newer gateways may add fields: ignore them rather than fail.
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)


class Memory(_Model):
    """One long-term memory. ``relevance_score`` (0-1) is set in semantic search results only."""

    memory_id: str
    memory_type: MemoryType
    content_kind: ContentKind = "text"
    content: Any
    bindings: list[str]
    creation_datetime: datetime
    last_accessed: datetime
    updated_at: datetime
    relevance_score: float | None = None


class CreatedMemory(Memory):
    """The answer to a create: ``created`` is False when the idempotency key had already
    created this memory (nothing new was made)."""

    created: bool


class BatchResult(_Model):
    """One memory of ``POST /api/memories/batch``: what a single create would have answered
    (201 created, 200 already there, else refused with ``detail``)."""

    status: int
    memory: CreatedMemory | None = None
    detail: Any = None


class BatchCreated(_Model):
    results: list[BatchResult]
    """One per memory sent, in order."""
    created: int
    present: int
    failed: int


class MemoryPage(_Model):
    memories: list[Memory]
    next_cursor: str | None = None


class MemoryList(_Model):
    """A search result: most relevant first (semantic) or newest first (chronological)."""

    memories: list[Memory]


class MemoryUpdate(_Model):
    memory: Memory
    old_content: Any
    new_content: Any


class DeletedMemory(_Model):
    memory_id: str
    deleted_content: Any


class MemoryChange(_Model):
    change_id: str
    memory_id: str
    kind: ChangeKind
    at: datetime
    source: str
    cycle_id: str | None = None
    old: Memory | None = None
    new: Memory | None = None


class MemoryHistory(_Model):
    memory_id: str
    changes: list[MemoryChange]


class Thread(_Model):
    thread_id: str
    title: str
    created_at: datetime
    updated_at: datetime
    message_count: int
    last_message: str | None = None


class ThreadList(_Model):
    threads: list[Thread]


class TraceEvent(_Model):
    """One event of a cycle trace; fields beyond these depend on ``type`` and are kept."""

    model_config = ConfigDict(extra="allow", frozen=True)

    event_id: str
    at: datetime
    stream: str
    type: str


class CycleTrace(_Model):
    cycle_id: str
    thread_id: str
    trace_id: str | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    end_reason: str | None = None
    actions: list[str] = Field(default_factory=list)
    truncated: bool = False
    events: list[TraceEvent] = Field(default_factory=list)


class Health(_Model):
    """``GET /healthz``: the gateway is ready (its broker answers). ``instance`` names the
    Memoria it serves (absent from older gateways)."""

    status: str | None = None
    instance: str | None = None
    connections: int | None = None


class Token(_Model):
    token: str
    user_id: str


# -- WebSocket frames (server to client) -----------------------------------------------------


class AcceptedFrame(_Model):
    """The message is durably queued; ``id`` is its message id (the first acceptance's id
    when ``duplicate``)."""

    type: Literal["accepted"] = "accepted"
    id: str
    thread_id: str
    queued: bool = False
    duplicate: bool = False


class Message(_Model):
    """A chat message: live over the socket, or stored (``Memoria.messages``).

    ``modal``: ``text``, ``textForReplace`` (a status line) or ``memory`` (a memory found;
    ``content`` is the memory). ``event_id`` is set on live frames only."""

    type: Literal["message"] = "message"
    id: str
    thread_id: str
    cycle_id: str | None = None
    chat_history: bool = Field(alias="chat-history")
    modal: str
    role: str
    content: Any
    model: str | None = None
    created_at: datetime
    event_id: str | None = None


class DeltaFrame(_Model):
    """A piece of the message ``id`` being streamed; the complete message follows."""

    type: Literal["delta"] = "delta"
    id: str
    thread_id: str
    cycle_id: str | None = None
    content: str
    event_id: str | None = None


class CycleEndFrame(_Model):
    type: Literal["cycle_end"] = "cycle_end"
    cycle_id: str | None = None
    thread_id: str
    actions: list[str]
    reason: str
    usage: dict[str, Any] | None = None
    event_id: str | None = None


class ErrorFrame(_Model):
    type: Literal["error"] = "error"
    code: str
    message: str
    retry_after: int | None = None


class ResumedFrame(_Model):
    type: Literal["resumed"] = "resumed"
    since: str
    replayed: int
    complete: bool


class SessionConfigFrame(_Model):
    type: Literal["session_config"] = "session_config"
    thread_id: str
    user_id: str
    config: dict[str, Any]
    overrides: dict[str, Any]
    agent_history: list[dict[str, Any]] = Field(default_factory=list, alias="agentHistory")


Frame = Annotated[
    AcceptedFrame
    | Message
    | DeltaFrame
    | CycleEndFrame
    | ErrorFrame
    | ResumedFrame
    | SessionConfigFrame,
    Field(discriminator="type"),
]
_FRAME: TypeAdapter[Frame] = TypeAdapter(Frame)
_FRAME_TYPES = frozenset(
    {"accepted", "message", "delta", "cycle_end", "error", "resumed", "session_config"}
)


def parse_frame(text: str | bytes) -> Frame | None:
    """A server frame, or None for a frame type this client does not know (the protocol may
    add types; clients ignore them). A known type that does not parse is an error."""
    try:
        return _FRAME.validate_json(text)
    except ValidationError:
        data = json.loads(text)
        if isinstance(data, dict) and data.get("type") not in _FRAME_TYPES:
            return None
        raise


MESSAGES: TypeAdapter[list[Message]] = TypeAdapter(list[Message])


# -- personas and a thread's session config ----------------------------------------------------


class Persona(_Model):
    id: str
    name: str
    description: str = ""


class PersonaList(_Model):
    """The personas a thread can switch to; ``default`` is the one of threads that chose none."""

    default: str
    personas: list[Persona]


class ThreadConfig(_Model):
    """A thread's session config: ``config`` is in effect (defaults with the thread's
    ``overrides`` on top); ``config["persona"]`` is its persona."""

    user_id: str | None = None
    config: dict[str, Any]
    overrides: dict[str, Any] = Field(default_factory=dict)

"""The chat message clients receive, with its keys spelled as clients expect them."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

Modal = Literal["text", "textForReplace", "memory"]
Role = Literal["user", "system", "assistant"]
RecordRole = Literal["user", "system", "assistant", "tool"]
"""A stored record's role: also ``tool``, a tool result kept for the LLM, which
clients are never sent, so the chat message keeps its three roles."""


def utcnow() -> datetime:
    return datetime.now(UTC)


class ChatMessage(BaseModel):
    """``{"chat-history": bool, "modal": ..., "role": ..., "content": any}``.

    ``chat-history`` says whether later LLM calls see the message; ``modal`` says how the UI
    shows it (``textForReplace`` is a status line that the next message replaces).
    """

    model_config = ConfigDict(
        frozen=True,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )

    chat_history: bool = Field(alias="chat-history")
    modal: Modal
    role: Role
    content: Any


CardKind = Literal["found", "saved", "updated"]
CardMatch = Literal["best", "related"]


class CardInfo(BaseModel):
    """How a memory card (``modal: memory``) came to be shown: found by a search (and how
    well it matched: the best match or related to it), saved, or updated (with what it
    replaced). Clients show it in words; the memory's ``relevance_score`` stays the number."""

    model_config = ConfigDict(frozen=True)

    kind: CardKind = "found"
    match: CardMatch | None = None
    replaced: Any = None
    """An update's old content."""

    @classmethod
    def found_in_order(cls, count: int) -> list[CardInfo]:
        """The notes of ``count`` cards a search shows best first: the best match, then
        related ones."""
        return [cls(kind="found", match="best" if n == 0 else "related") for n in range(count)]


class ToolCall(BaseModel):
    """One action the assistant called, as LLM APIs name a tool call."""

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class ChatRecord(ChatMessage):
    """A chat message with the identity it needs to be streamed, shown and persisted.

    Tool-role history: an action the cycle ran is kept as two records, an
    ``assistant`` one with ``tool_calls`` and a ``tool`` one with ``tool_call_id`` and
    ``name`` whose content is the compact result. They are history for the LLM, never chat
    bubbles: clients are not sent them (:attr:`tool_record`).
    """

    id: str
    cycle_id: str | None = None
    created_at: datetime = Field(default_factory=utcnow)
    model: str | None = Field(
        default=None,
        description="Who produced the text: a provider and model, 'offline planner', or None "
        "for the user's own words and runtime status lines.",
    )

    card: CardInfo | None = Field(
        default=None,
        description="A memory card's note (found, saved or updated; how well it matched); "
        "None for other messages and for cards shown before the note existed.",
    )

    role: RecordRole  # type: ignore[assignment]  # a record may be a tool result
    tool_calls: list[ToolCall] | None = Field(
        default=None, description="The actions an assistant record called (tool-role history)."
    )
    tool_call_id: str | None = Field(
        default=None, description="A tool record: the id of the call it answers."
    )
    name: str | None = Field(default=None, description="A tool record: the action's name.")

    @field_validator("tool_calls")
    @classmethod
    def _no_calls_is_none(cls, calls: list[ToolCall] | None) -> list[ToolCall] | None:
        # An empty list calls nothing: stored as null, so the history's filter of shown
        # messages (tool_calls null) and :attr:`tool_record` agree on it.
        return calls or None

    @property
    def tool_record(self) -> bool:
        """A tool call or result: history for the LLM, not a message for people."""
        return self.role == "tool" or bool(self.tool_calls)

    @property
    def transient(self) -> bool:
        """Status lines are shown once and never stored."""
        return self.modal == "textForReplace"

    @classmethod
    def memory_card(cls, record_id: str, cycle_id: str, memory: BaseModel) -> ChatRecord:
        """A memory shown in the chat as a card, kept in the history so that a later turn
        can refer to it ("the second one")."""
        return cls(
            id=record_id,
            cycle_id=cycle_id,
            chat_history=True,
            modal="memory",
            role="system",
            content=memory.model_dump(mode="json"),
        )

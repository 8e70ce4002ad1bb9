"""The chat message of SPEC R-1, exactly as the seed names its keys."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Modal = Literal["text", "textForReplace", "memory"]
Role = Literal["user", "system", "assistant"]


def utcnow() -> datetime:
    return datetime.now(UTC)


class ChatMessage(BaseModel):
    """``{"chat-history": bool, "modal": ..., "role": ..., "content": any}`` (seed 000).

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


class ChatRecord(ChatMessage):
    """A chat message with the identity it needs to be streamed, shown and persisted."""

    id: str
    cycle_id: str | None = None
    created_at: datetime = Field(default_factory=utcnow)
    model: str | None = Field(
        default=None,
        description="Who produced the text: a provider and model, 'offline planner', or None "
        "for the user's own words and runtime status lines.",
    )

    @property
    def transient(self) -> bool:
        """Status lines are shown once and never stored."""
        return self.modal == "textForReplace"

"""Turn stored chat messages into the conversation part of a prompt."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Literal

from memoria_contracts.chat import ChatRecord
from memoria_llm.port import PromptMessage


def _as_text(record: ChatRecord) -> str:
    content = record.content
    text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
    if record.modal == "memory":
        return f"[memory found] {text}"
    if record.role == "system":
        return f"[system] {text}"
    return text


def conversation(records: Iterable[ChatRecord]) -> list[PromptMessage]:
    """Messages in order, status lines dropped, consecutive turns of one side merged (some
    providers reject two user turns in a row). Memories and system notes are shown to the
    model as the assistant's side, since the runtime produced them, not the user."""
    merged: list[PromptMessage] = []
    for record in records:
        if record.transient:
            continue
        role: Literal["user", "assistant"] = "user" if record.role == "user" else "assistant"
        text = _as_text(record)
        if merged and merged[-1].role == role:
            merged[-1] = PromptMessage(role=role, content=f"{merged[-1].content}\n\n{text}")
        else:
            merged.append(PromptMessage(role=role, content=text))
    return merged

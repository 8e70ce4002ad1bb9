"""What "forget that" refers to: the memories the user's last statement in the thread wrote.

Read from the thread's history alone (its stored tool calls and results), so every decision
replica finds the same answer and no state is kept elsewhere. Memory steps that write keep
the ids they wrote in their tool call's arguments (``written_ids``, set by the action
worker's MemorySave and MemoryUpdate); an update chosen among candidates (the "which
memory?" fast path) shows its memory as a card whose id ends in :data:`UPDATED_CARD_SUFFIX`.
The newest such write is the last thing the user told, whatever turns came after it (a
question, a search, small talk).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from memoria_contracts.chat import ChatRecord

WRITING_ACTIONS: Final = frozenset({"MemorySave", "MemoryUpdate"})
WRITTEN_IDS: Final = "written_ids"
"""The key of a writing step's arguments that lists the memory ids it wrote."""
UPDATED_CARD_SUFFIX: Final = ".updated"


def last_told(history: Sequence[ChatRecord]) -> list[str] | None:
    """The ids the newest successful write of the history wrote (oldest record first), in
    order; ``[]`` when that write's ids were not kept (its arguments cut short), None when
    the history holds no write at all."""
    failed = {
        record.tool_call_id
        for record in history
        if record.role == "tool" and str(record.content).startswith("failed:")
    }
    answered = {record.tool_call_id for record in history if record.role == "tool"}
    for record in reversed(history):
        if record.modal == "memory" and record.id.endswith(UPDATED_CARD_SUFFIX):
            card = record.content if isinstance(record.content, dict) else {}
            memory_id = card.get("memory_id")
            return [memory_id] if isinstance(memory_id, str) else []
        for call in reversed(record.tool_calls or []):
            if call.name not in WRITING_ACTIONS or call.id in failed or call.id not in answered:
                continue
            ids = call.arguments.get(WRITTEN_IDS)
            if ids is None and "summary" not in call.arguments:
                continue  # wrote nothing it could name (e.g. a save refused)
            if not isinstance(ids, list):
                return []
            written = [i for i in ids if isinstance(i, str)]
            if written:
                return list(dict.fromkeys(written))
    return None

"""Deterministic compression of chat history (ADR 11), without an LLM.

Two levels: a structured summary keeps each cycle (turn) and gives each message one short
line (``user: …``, ``MemorySearch: found 3 memories``, ``assistant: …``), so big payloads —
memory cards, long answers — become one line; the archive gives each turn one line only
(the first sentence of what the user said, the actions run, the first sentence of the
answer). Same messages in, same text out: replicas agree and re-runs change nothing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from itertools import groupby

from memoria_contracts.chat import ChatRecord
from memoria_contracts.history import SummaryTurn
from memoria_contracts.text import one_line

LINE_CHARS = 160
"""Longest line of the structured summary."""
SENTENCE_CHARS = 120
"""Longest first sentence in an archive line."""
MEMORY_PREVIEW_CHARS = 40
MEMORY_PREVIEWS = 3
_SENTENCE_END = re.compile(r"(?<=[.!?])\s|\n")


def first_sentence(text: str, limit: int = SENTENCE_CHARS) -> str:
    return one_line(_SENTENCE_END.split(text.strip(), maxsplit=1)[0], limit)


def _text(record: ChatRecord) -> str:
    content = record.content
    if isinstance(content, str):
        return content
    if isinstance(content, dict) and isinstance(content.get("content"), str):
        return str(content["content"])  # a memory card: its text, not its metadata
    return json.dumps(content, ensure_ascii=False)


def _memories_line(cards: Sequence[ChatRecord]) -> str:
    previews = "; ".join(
        one_line(_text(card), MEMORY_PREVIEW_CHARS) for card in cards[:MEMORY_PREVIEWS]
    )
    more = f"; +{len(cards) - MEMORY_PREVIEWS} more" if len(cards) > MEMORY_PREVIEWS else ""
    return f"memories shown ({len(cards)}): {previews}{more}"


def _line(record: ChatRecord) -> str | None:
    if record.tool_calls and record.role == "assistant":
        return None  # the result's line names the action
    if record.role == "tool":
        return one_line(f"{record.name or 'action'}: {_text(record)}", LINE_CHARS)
    return one_line(f"{record.role}: {_text(record)}", LINE_CHARS)


def _turn_lines(records: Sequence[ChatRecord]) -> list[str]:
    lines: list[str] = []
    for is_card, group in groupby(records, key=lambda r: r.modal == "memory"):
        members = list(group)
        if is_card:
            lines.append(_memories_line(members))
        else:
            lines.extend(line for line in map(_line, members) if line)
    return lines


def _turns(records: Iterable[ChatRecord]) -> list[tuple[str | None, list[ChatRecord]]]:
    """Consecutive messages of one cycle, in order."""
    return [(cycle, list(group)) for cycle, group in groupby(records, key=lambda r: r.cycle_id)]


def structured(records: Iterable[ChatRecord]) -> list[SummaryTurn]:
    """The structured summary of ``records`` (oldest first): one entry per turn."""
    return [
        SummaryTurn(cycle_id=cycle, lines=lines)
        for cycle, members in _turns(records)
        if (lines := _turn_lines(members))
    ]


def archive_lines(records: Iterable[ChatRecord]) -> list[str]:
    """One line per turn: what the user said, the actions run, what the assistant said."""
    lines: list[str] = []
    for _, members in _turns(records):
        said = [first_sentence(_text(r)) for r in members if r.role == "user"]
        actions = [r.name or "action" for r in members if r.role == "tool"]
        answers = [
            first_sentence(_text(r))
            for r in members
            if r.role == "assistant" and r.modal == "text" and not r.tool_calls
        ]
        parts = []
        if said:
            parts.append(f"user: {' / '.join(said)}")
        if actions:
            parts.append(f"actions: {', '.join(actions)}")
        if answers:
            parts.append(f"assistant: {answers[-1]}")
        if parts:
            lines.append("- " + " | ".join(parts))
    return lines


def bounded_archive(existing: str, new_lines: Sequence[str], max_chars: int) -> str:
    """``existing`` with ``new_lines`` appended, the oldest whole lines dropped to fit."""
    lines = [*(existing.splitlines() if existing else []), *new_lines]
    kept: list[str] = []
    size = 0
    for line in reversed(lines):
        size += len(line) + 1
        if size > max_chars:
            break
        kept.append(line)
    return "\n".join(reversed(kept))

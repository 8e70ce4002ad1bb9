"""Turn stored chat messages into the conversation part of a prompt.

Tool-role history (ADR 11): an action a cycle ran is stored as an ``assistant`` record
with ``tool_calls`` and a ``tool`` record answering it by ``tool_call_id``. Both become
native tool turns here, the result placed right after its call (APIs require that), so the
model sees ``user → assistant (tool call) → tool (result) → assistant (answer)``. A call or
a result that cannot be paired — stored before ids existed, or whose partner fell outside
the history window — is shown as plain text instead (``[MemorySearch] 3 found``), since
providers reject an unanswered call or an orphan result.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Literal

from memoria_contracts.chat import ChatRecord
from memoria_contracts.history import HistorySummary, SummaryTurn
from memoria_contracts.text import as_text
from memoria_llm.port import PromptMessage, PromptToolCall

ARGUMENTS_TEXT_CHARS = 200
"""How much of a call's arguments its plain-text form shows."""


def _content_text(record: ChatRecord) -> str:
    content = record.content
    if content is None:
        return ""
    return as_text(content)


def _as_text(record: ChatRecord) -> str:
    text = _content_text(record)
    if record.role == "tool":
        return f"[{record.name or 'action'}] {text}"
    if record.tool_calls:
        calls = "; ".join(
            f"{call.name} {json.dumps(call.arguments, ensure_ascii=False)[:ARGUMENTS_TEXT_CHARS]}"
            for call in record.tool_calls
        )
        return f"{text}\n[called] {calls}".strip()
    if record.modal == "memory":
        return f"[memory found] {text}"
    if record.role == "system":
        return f"[system] {text}"
    return text


def _answered(records: Sequence[ChatRecord]) -> set[str]:
    """Ids of calls that have both their call and their result in ``records``."""
    called = {call.id for r in records for call in r.tool_calls or () if r.role == "assistant"}
    results = {r.tool_call_id for r in records if r.role == "tool" and r.tool_call_id}
    return called & results


def _native_call(record: ChatRecord, answered: set[str]) -> bool:
    calls = record.tool_calls or []
    return record.role == "assistant" and bool(calls) and all(c.id in answered for c in calls)


def _call_message(record: ChatRecord) -> PromptMessage:
    calls = tuple(
        PromptToolCall(id=call.id, name=call.name, arguments=dict(call.arguments))
        for call in record.tool_calls or ()
    )
    return PromptMessage(role="assistant", content=_as_text(record), tool_calls=calls)


def _result_message(record: ChatRecord) -> PromptMessage:
    return PromptMessage(
        role="tool",
        content=_content_text(record),
        tool_call_id=record.tool_call_id,
        name=record.name,
    )


def conversation(records: Iterable[ChatRecord]) -> list[PromptMessage]:
    """Messages in order, status lines dropped, consecutive text turns of one side merged
    (some providers reject two user turns in a row). Memories and system notes are shown to
    the model as the assistant's side, since the runtime produced them, not the user. Tool
    calls and results are kept apart from text turns and never merged."""
    kept = [record for record in records if not record.transient]
    answered = _answered(kept)
    results = {r.tool_call_id: r for r in kept if r.role == "tool" and r.tool_call_id in answered}
    merged: list[PromptMessage] = []
    for record in kept:
        if _native_call(record, answered):
            merged.append(_call_message(record))
            # Each result right after its call, whatever came between them in the thread
            # (a search's memory cards are published before the step's result).
            merged.extend(_result_message(results[c.id]) for c in record.tool_calls or ())
            continue
        if record.role == "tool" and record.tool_call_id in answered:
            continue  # already placed after its call
        role: Literal["user", "assistant"] = "user" if record.role == "user" else "assistant"
        text = _as_text(record)
        if merged and merged[-1].role == role and merged[-1].plain:
            merged[-1] = PromptMessage(role=role, content=f"{merged[-1].content}\n\n{text}")
        else:
            merged.append(PromptMessage(role=role, content=text))
    return merged


# -- summaries ---------------------------------------------------------------------------

ARCHIVE_HEADING = "Summary of the oldest part of this conversation:"
TURNS_HEADING = "Summary of the conversation before the messages below, one turn per block:"


def _turn_text(turn: SummaryTurn) -> str:
    return "\n".join(turn.lines)


def bounded_summary(summary: HistorySummary | None, max_chars: int) -> HistorySummary | None:
    """``summary`` cut to about ``max_chars``: the newest turns first, then what room is left
    for the end (newest part) of the archive. None when nothing fits or there is none."""
    if summary is None or max_chars <= 0:
        return None
    room = max_chars
    turns: list[SummaryTurn] = []
    for turn in reversed(summary.turns):
        size = len(_turn_text(turn)) + 2
        if size > room:
            break
        turns.append(turn)
        room -= size
    archive = summary.archive
    if len(archive) > room:
        cut = archive[len(archive) - room :]
        archive = cut.partition("\n")[2] if "\n" in cut else ""
    bounded = HistorySummary(turns=list(reversed(turns)), archive=archive)
    return None if bounded.empty else bounded


def summary_text(summary: HistorySummary | None) -> str:
    """The summary as a block of the system instruction; empty when there is none."""
    if summary is None or summary.empty:
        return ""
    blocks = []
    if summary.archive:
        blocks.append(f"{ARCHIVE_HEADING}\n{summary.archive}")
    if summary.turns:
        turns = "\n\n".join(_turn_text(turn) for turn in summary.turns)
        blocks.append(f"{TURNS_HEADING}\n{turns}")
    return "\n\n".join(blocks)

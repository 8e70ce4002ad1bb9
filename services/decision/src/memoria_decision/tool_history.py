"""Tool-role history (ADR 11): each step the cycle runs, as the thread will remember it.

A step becomes two chat-history records on chat.out, which the memory service stores: an
``assistant`` record calling the action (published with the request) and a ``tool`` record
with its compact result (published when it completes or times out). Clients are not sent
them. Steps of actions that end the cycle (Finalize, Question) get none: their answer is
the assistant's own message, already in the history.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from memoria_contracts.chat import ChatRecord, ToolCall
from memoria_contracts.events import ActionSpec
from memoria_contracts.text import one_line

RESULT_CHARS = 300
"""A result is one line for the model; what a step showed (memory cards) is stored apart."""
ARGUMENTS_CHARS = 300
"""Longest JSON of a call's arguments kept as they are."""
CALL_ID_DIGITS = 16


def call_id(cycle_id: str, step: int) -> str:
    """Deterministic, so a re-run step replaces its records, and short and plain, as some
    OpenAI-compatible servers limit tool call ids."""
    digest = hashlib.sha256(f"{cycle_id}:{step}".encode()).hexdigest()
    return f"call_{digest[:CALL_ID_DIGITS]}"


def records_calls(spec: ActionSpec | None) -> bool:
    """Whether a step of this action is kept as a tool call."""
    return spec is not None and not spec.ends_cycle


def compact_arguments(arguments: dict[str, Any] | None) -> dict[str, Any]:
    """A step's arguments as its call keeps them: as given when small, else their JSON
    cut to one line (a call is a line of history, not a payload)."""
    if not arguments:
        return {}
    text = json.dumps(arguments, ensure_ascii=False)
    if len(text) <= ARGUMENTS_CHARS:
        return dict(arguments)
    return {"summary": text[: ARGUMENTS_CHARS - 1] + "…"}


def call_record(
    cycle_id: str, step: int, action: str, arguments: dict[str, Any] | None = None
) -> ChatRecord:
    """Published with the request, without arguments (only the worker works them out), and
    again with them when the step completes: same id, so it replaces the first in place."""
    return ChatRecord(
        id=f"{cycle_id}.{step}.call",
        cycle_id=cycle_id,
        chat_history=True,
        modal="text",
        role="assistant",
        content="",
        tool_calls=[
            ToolCall(
                id=call_id(cycle_id, step), name=action, arguments=compact_arguments(arguments)
            )
        ],
    )


def result_record(cycle_id: str, step: int, action: str, status: str, summary: str) -> ChatRecord:
    line = one_line(summary if status == "ok" else f"failed: {summary}", RESULT_CHARS)
    return ChatRecord(
        id=f"{cycle_id}.{step}.result",
        cycle_id=cycle_id,
        chat_history=True,
        modal="text",
        role="tool",
        content=line,
        tool_call_id=call_id(cycle_id, step),
        name=action,
    )

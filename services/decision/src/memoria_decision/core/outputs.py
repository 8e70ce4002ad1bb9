"""What every cycle writes the same way: its records on ``chat.out``, and its end. Record ids
come from (cycle, step, what): a step run again after a crash replaces its records. A step
the model chose is kept as tool-role history, an ``assistant`` record calling the action
(again with the arguments the worker worked out) and a ``tool`` record with its result; steps
that end the cycle (Finalize, Question) get none: their answer is the assistant's own."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Final

from memoria_contracts.chat import CardInfo, ChatRecord, ToolCall
from memoria_contracts.events import CycleEndReason, StepRecord
from memoria_contracts.text import one_line
from memoria_decision.core import effects
from memoria_decision.core.state import CycleState, Released

RESULT_CHARS: Final = 300  # a result is one line for the model; cards are stored apart
ARGUMENTS_CHARS: Final = 300  # the longest JSON of a call's arguments kept as it is
CALL_ID_DIGITS: Final = 16
_LINE: Final = {"chat_history": False, "modal": "text", "role": "system"}
_TURN: Final = {"chat_history": True, "modal": "text", "role": "assistant"}


def post(state: CycleState, suffix: str, **fields: Any) -> effects.Post:
    record_id = f"{state.cycle_id}.{suffix}"
    return effects.Post(
        ChatRecord(id=record_id, cycle_id=state.cycle_id, created_at=state.work.now, **fields)
    )


def status(state: CycleState, step: int, key: str) -> effects.Post:
    """``step``'s status line, replaced on screen by what comes next."""
    line = _LINE | {"modal": "textForReplace"}
    return post(state, f"{step}.status", content=state.text(key), **line)


def reply(state: CycleState, text: str, *, step: int = 1) -> effects.Post:
    """The assistant's turn in fixed words, in the history (the next model must see it)."""
    return post(state, f"{step}.reply", content=text, **_TURN)


def notice(state: CycleState, name: str, text: str) -> effects.Post:
    """A visible system line, kept in the thread but not shown to the model."""
    return post(state, name, content=text, **_LINE)


def card(state: CycleState, suffix: str, memory: Any, note: CardInfo | None = None) -> ChatRecord:
    """A memory as MemorySearch shows it (in the history: "the second one" can follow)."""
    shown = ChatRecord.memory_card(f"{state.cycle_id}.{suffix}", state.cycle_id, memory)
    return shown.model_copy(update={"created_at": state.work.now, "card": note})


def call_id(cycle_id: str, step: int) -> str:
    """Deterministic, and short and plain: some OpenAI-compatible servers limit the ids."""
    digest = hashlib.sha256(f"{cycle_id}:{step}".encode()).hexdigest()
    return f"call_{digest[:CALL_ID_DIGITS]}"


def compact_arguments(arguments: dict[str, Any] | None) -> dict[str, Any]:
    """As given when small, else their JSON cut to one line (a call is a line of history)."""
    text = json.dumps(arguments or {}, ensure_ascii=False)
    if len(text) <= ARGUMENTS_CHARS:
        return dict(arguments or {})
    return {"summary": text[: ARGUMENTS_CHARS - 1] + "…"}


def call(
    state: CycleState, step: int, action: str, arguments: dict[str, Any] | None = None
) -> effects.Post:
    called = ToolCall(
        id=call_id(state.cycle_id, step), name=action, arguments=compact_arguments(arguments)
    )
    return post(state, f"{step}.call", content="", tool_calls=[called], **_TURN)


def result(state: CycleState, step: int, action: str, summary: str) -> effects.Post:
    """``summary``: the step's, or ``failed: …``."""
    line = one_line(summary, RESULT_CHARS)
    answered = {"tool_call_id": call_id(state.cycle_id, step), "name": action}
    return post(state, f"{step}.result", content=line, **(_TURN | {"role": "tool"}), **answered)


def with_step(state: CycleState, step: StepRecord) -> CycleState:
    return state.but(steps=(*state.steps, step))


def end(
    state: CycleState,
    reason: CycleEndReason,
    text: str | None = None,
    *,
    recorded: int | None = None,
    before: tuple[effects.Effect, ...] = (),
    derived: bool = False,
) -> effects.Transition:
    """In order: ``before`` and the notice ``text``; the step just ``recorded`` no longer
    timed; the mark that stops the cycle's steps (a late one, or one a timeout cut short);
    the ended state saved, unless the end is ``derived`` from the state and its event alone
    (a completed step's: its redelivery, finding the step pending, ends the cycle the same
    way); then its end announced and the thread released (:func:`released`)."""
    ended = state.but(status="ended", end_reason=reason, pending=None)
    told = (notice(state, "end", text),) if text is not None else ()
    untimed = (effects.ClearDeadline(recorded),) if recorded is not None else ()
    saved = () if derived else (effects.Save(ended),)
    return released(ended).after(*before, *told, *untimed, effects.MarkEnded(), *saved)


def released(state: CycleState) -> effects.Transition:
    """An ended cycle, announced once: the release records the announcement, so a crash
    before it announces again (clients replace by cycle id), never releases unannounced."""
    if state.end_announced:
        return effects.Transition(state, (effects.Release(None),))
    gone = Released(
        **state.model_dump(include={"cycle_id", "user_id", "thread_id", "message_id", "end_reason"})
    )
    announced = state.but(end_announced=True)
    return effects.Transition(announced, (effects.Announce(), effects.Release(gone)))

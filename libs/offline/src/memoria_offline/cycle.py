"""What the rules see of a cycle: the reading of the user's message, the steps taken, the
memories found so far, and whether the message confirms a pending "delete everything"."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, TypeVar

from memoria_contracts.chat import ChatRecord
from memoria_contracts.events import CycleContext, StepRecord
from memoria_contracts.text import saying
from memoria_offline import replies
from memoria_offline.answers import as_statement
from memoria_offline.facts import about, closest
from memoria_offline.intents import Intent, Reading, read
from memoria_offline.merge import kept_details
from memoria_text.relative_dates import TimeSpan, past_span, without_resolved_dates

SEARCH_ACTION: Final = "MemorySearch"
T = TypeVar("T")


@dataclass(frozen=True)
class CycleView:
    reading: Reading
    steps: list[StepRecord]
    found: list[str]
    """Ids of the memories shown in this cycle, best first (the order search returned)."""
    found_last: list[str]
    """Ids shown by the latest search step (empty when it found nothing)."""
    targets: list[str]
    """Of ``found``, the memories most closely about what the message names (``facts.about``):
    the only ones a correction or a forget may change."""
    texts: dict[str, list[str]]
    """Each found memory's content and bindings, by id."""
    asked_delete_all: bool
    """The assistant's previous turn asked whether to delete every memory."""
    asked_back: str | None
    """The user's question when the assistant's previous turn asked them for its answer."""
    said_at: datetime
    """When the user sent the message: what its relative dates are counted from."""
    told_no_model: bool
    """The conversation has already been told that no language model answers: the planner
    answered in it before (its first answer said so), or the user spoke in it before with no
    other model answering (a closing said so: closings are not history, so only the user's
    earlier turn shows it)."""

    @property
    def said_by(self) -> str | None:
        """The memory the message is about that already says what it says: a move or a
        correction told twice, with nothing left to change. Its dates aside: "I moved to
        Hamburg last month" said again another day is the memory "... last month (2026-10)",
        not a fact to keep twice. A target always has its texts (``facts.about``)."""
        if self.reading.substitution:
            return None  # a target holds the old value: not what the message says
        said = _said(self.reading.statement)
        # Any found memory, not only the targets: "Rita, não Rute" told again finds no
        # memory holding "Rute", but the one it made says "Rita".
        found = dict.fromkeys([*self.targets, *self.found])
        told = next((i for i in found if _said(self.texts.get(i, [""])[0]) == said), None)
        if told is not None or self.reading.intent != Intent.UPDATE:
            return told
        # A correction told again: applied to its target, it changes nothing ("actually, I
        # drink tea" against "I drink tea every morning").
        return next(
            (
                i
                for i in self.targets
                if _said(kept_details(self.texts[i][0], self.reading.statement))
                == _said(self.texts[i][0])
            ),
            None,
        )

    @property
    def already_said(self) -> bool:
        return self.said_by is not None

    @property
    def window(self) -> TimeSpan | None:
        """The time a question about what the user told names ("what did I tell you last
        week?"), counted from when they asked."""
        told = self.reading.told_when
        return None if told is None else past_span(told, self.said_at)

    @property
    def delete_all_confirmed(self) -> bool:
        return self.asked_delete_all and self.reading.intent == Intent.CONFIRM

    @property
    def done(self) -> list[str]:
        return [step.action for step in self.steps]

    @property
    def failed(self) -> bool:
        return any(step.status == "failed" for step in self.steps)


def _said(text: str) -> str:
    return saying(without_resolved_dates(text))


def _cards(context: CycleContext) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(message id, memory id, card) of each memory card a search of the cycle has shown
    (not the cards of what a step saved or updated)."""
    for record in context.transcript:
        content = record.content
        if record.modal != "memory" or not isinstance(content, dict):
            continue
        if record.card is not None and record.card.kind != "found":
            continue
        memory_id = content.get("memory_id")
        if isinstance(memory_id, str):
            yield record.id, memory_id, content


def _found_by_step(context: CycleContext) -> dict[int, list[str]]:
    """Memory ids shown per step. A step's messages are ``<cycle>.<step>.<n>``."""
    by_step: dict[int, list[str]] = {}
    for message_id, memory_id, _ in _cards(context):
        step = message_id.rsplit(".", 2)[-2] if message_id.count(".") >= 2 else ""
        if step.isdigit():
            by_step.setdefault(int(step), []).append(memory_id)
    return by_step


def _texts_of_found(context: CycleContext) -> dict[str, list[str]]:
    """Each memory card's content and bindings, by memory id."""
    texts: dict[str, list[str]] = {}
    for _, memory_id, card in _cards(context):
        bindings = card.get("bindings")
        keys = [str(b) for b in bindings] if isinstance(bindings, list) else []
        texts[memory_id] = [str(card.get("content", "")), *keys]
    return texts


def _last_answer(history: Sequence[ChatRecord]) -> int | None:
    """The index in ``history`` of the assistant's last answer: its last text, a step's call
    or result aside. What the user replies to, so the conversation itself says what
    was asked and no state is kept anywhere else."""
    for index in range(len(history) - 1, -1, -1):
        record = history[index]
        if record.role == "assistant" and record.modal == "text" and not record.tool_record:
            return index
    return None


def _question_asked_back(context: CycleContext) -> str | None:
    """The user's question when the question this message came after, as decision hands it
    over (it keeps the question pending, with an expiry), is the planner's own ask for what
    memory lacked ("I don't have that in my memory yet. Could you tell me?")."""
    question = context.pending_question
    if question is None or not replies.is_ask_missing(question.assistant_question):
        return None
    return question.user_question


def _last_told(history: Sequence[ChatRecord]) -> str | None:
    """What the planner's newest answer that saved or changed a memory says it wrote: the
    last thing the user told, whatever turns came after (a question, a search, small talk)."""
    answers = (
        str(record.content)
        for record in reversed(history)
        if record.role == "assistant" and record.modal == "text" and not record.tool_record
    )
    return next((written for answer in answers if (written := replies.last_written(answer))), None)


def _reading(context: CycleContext, asked_back: str | None, asked_delete_all: bool) -> Reading:
    """The message's reading; a reply no rule understood that answers the planner's ask for
    what memory lacked (``asked_back``, when decision reads it as the answer) is a fact to
    save, in the words of the question. "Forget
    that" forgets what the user told last; with nothing told, the user is asked what (the
    words "forget that" are nothing to search for)."""
    reading = read(str(context.original_message.content))
    if reading.refers_back and asked_delete_all:
        return Reading(Intent.CANCEL, reading.statement)  # "forget it" to "delete everything?"
    if reading.refers_back:
        written = _last_told(context.history)
        if written:
            return Reading(Intent.DELETE, written)
        return Reading(Intent.SMALL_TALK, reading.statement, forget_what=True)
    if not reading.unread or asked_back is None:
        return reading
    statement = as_statement(asked_back, reading.statement)
    return Reading(Intent.SAVE, statement, facts=(statement,))


def _told_no_model(context: CycleContext) -> bool:
    records = [*context.history, *context.transcript]
    answered = {r.model for r in records if r.role == "assistant" and r.model}
    if replies.LABEL in answered:
        return True
    earlier_turn = any(
        r.role == "user" and not r.tool_record and r.id != context.original_message.id
        for r in context.history
    )
    return earlier_turn and not answered


def _last_search_step(steps: list[StepRecord]) -> int:
    searches = [step.step for step in steps if step.action == SEARCH_ACTION]
    return max(searches, default=0)


def targets_of(reading: Reading, memories: Sequence[tuple[T, Sequence[str]]]) -> list[T]:
    """The found memories a correction may change (``facts.closest``), or a forget may
    (``facts.about``)."""
    if reading.intent == Intent.UPDATE:
        return closest(reading.statement, memories, reading.old_value)
    return about(reading.statement, memories)


def view(context: CycleContext) -> CycleView:
    history = context.history
    answer = _last_answer(history)
    last_answer = None if answer is None else str(history[answer].content)
    asked_back = _question_asked_back(context)
    # Decision's reading: the message answers it (a fragment filling it, or a statement of
    # it), rather than refusing, asking something new or telling something else.
    answers_back = context.pending_question is not None and context.pending_question.answered
    asked_delete_all = last_answer is not None and replies.is_delete_all_question(last_answer)
    reading = _reading(context, asked_back if answers_back else None, asked_delete_all)
    by_step = _found_by_step(context)
    found = list(dict.fromkeys(i for step in sorted(by_step) for i in by_step[step]))
    texts = _texts_of_found(context)
    return CycleView(
        reading=reading,
        steps=list(context.steps),
        found=found,
        found_last=by_step.get(_last_search_step(context.steps), []),
        targets=targets_of(reading, [(i, texts.get(i, [])) for i in found]),
        texts=texts,
        asked_delete_all=asked_delete_all,
        asked_back=asked_back,
        said_at=context.original_message.created_at,
        told_no_model=_told_no_model(context),
    )

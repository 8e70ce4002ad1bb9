"""The route of a message, decided once from it and the thread's pending action:

* a **choice** pending (which memory an update or a "forget that" meant): a pick runs it, a
  number with no such candidate asks again, a "no" cancels, anything else drops it;
* a **confirmation** pending (delete everything?): only a clear yes runs it, a no cancels,
  anything else drops it;
* a **question** pending: the message goes to the model, told whether it answers it
  (:mod:`.answers`); a refusal ("forget it") is no "forget that", a command still runs;
* nothing pending: a **command** (list all, delete all, forget that, cancel) is a fast path, a
  yes or a pick after its question expired is told so, anything else goes to the model.

A message that does not tell its language ("ok", "3") gets the language of its question.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Final

from memoria_contracts.chat import ChatRecord
from memoria_contracts.events import Language, PendingQuestion
from memoria_contracts.text import one_line
from memoria_decision.core.answers import answers
from memoria_decision.core.state import PendingAction, PendingKind, Route, RouteKind
from memoria_text import i18n
from memoria_text.commands import Command, Reply, read_choice, read_reply, recognize

EXCERPT_CHARS: Final = 80  # of each candidate's content, in the "which memory?" question
_QUESTIONS: Final[dict[PendingKind, str]] = {
    "delete_all": "delete_all_question",
    "choose_update": "update_choice_question",
    "choose_forget": "forget_choice_question",
}
_ANY_CANDIDATES: Final = [(f"mem_{n}", "") for n in range(1, 10)]
"""Stand-ins for the candidates of an expired "which one?" question: a number is a pick."""


def route_for(
    message: str,
    pending: PendingAction | None,
    language: Language,
    *,
    asked: PendingKind | None = None,
) -> Route:
    """The route of ``message``; ``language``: the one detected for it; ``asked``: which of
    the runtime's questions the thread's last answer was (:func:`asked_in`)."""
    if pending is None:
        return _too_late(message, language, asked) or _new(message, None, language)
    if i18n.language_of(message) is None:
        language = pending.language
    answer = partial(Route, resolves=pending.id)
    reply = read_reply(message, pending.language)
    if pending.kind in ("choose_update", "choose_forget"):
        candidates = [(c.memory_id, excerpt(c.content)) for c in pending.candidates]
        choice = read_choice(message, candidates)
        said = choice.language or pending.language
        if choice.index is not None:
            picked = (pending.candidates[choice.index].memory_id,)
            kind: RouteKind = (
                "update_chosen" if pending.kind == "choose_update" else "forget_chosen"
            )
            return answer(kind=kind, language=said, choice=pending, targets=picked)
        if choice.out_of_range:  # "3" of two: a slip, not a change of subject
            return answer(kind="ask_choice", language=said, choice=pending)
        if reply.kind == Reply.DECLINE:
            return answer(kind="cancel", language=reply.language, declined=True, choice=pending)
    elif pending.kind == "delete_all" and reply.kind == Reply.CONFIRM:
        return answer(kind="delete_all", language=reply.language)
    elif pending.kind == "delete_all" and reply.kind == Reply.DECLINE:
        return answer(kind="cancel", language=reply.language, declined=True)
    return _new(message, pending, language)


def _new(message: str, pending: PendingAction | None, language: Language) -> Route:
    """A command, or the model's; what it leaves unanswered is dropped (a question silently)."""
    route = partial(Route, resolves=pending.id if pending else None)
    question = None
    if pending is not None and pending.kind == "question":
        asked_about = str(pending.content or "")
        question = PendingQuestion(
            user_question=asked_about,
            assistant_question=pending.asked or "",
            answered=answers(message, asked_about),
        )
    dropped = pending.kind if pending is not None and question is None else None
    command = recognize(message)
    refused = question is not None and read_reply(message, language).kind == Reply.DECLINE
    if command is None or refused:
        return route(kind="model", language=language, dropped=dropped, question=question)
    if command.kind == Command.DELETE_ALL:  # asked again: the new question replaces the old
        return route(kind="ask_delete_all", language=command.language)
    if command.kind == Command.LIST_ALL:
        return route(kind="list_all", language=command.language, dropped=dropped)
    if command.kind == Command.FORGET_LAST:
        return route(kind="forget_last", language=command.language, dropped=dropped)
    return Route(kind="cancel", language=command.language)  # nothing pending to cancel


def _too_late(message: str, language: Language, asked: PendingKind | None) -> Route | None:
    """A yes, or a pick, right after one of the runtime's questions whose pending action is
    gone: it confirms nothing, and no model may read it as a go-ahead either."""
    if asked == "delete_all":
        reply = read_reply(message, language)
        if reply.kind == Reply.CONFIRM:
            return Route(kind="expired", language=reply.language, expired=asked)
    elif asked is not None:
        choice = read_choice(message, _ANY_CANDIDATES)
        if choice.index is not None or choice.out_of_range:
            return Route(kind="expired", language=choice.language or language, expired=asked)
    return None


def asked_in(history: Sequence[ChatRecord]) -> PendingKind | None:
    """Which of the runtime's questions the thread's last answer (a tool record aside) was."""
    said = next(
        (
            str(r.content)
            for r in reversed(history)
            if r.role == "assistant" and r.modal == "text" and not r.tool_record
        ),
        "",
    )
    for kind, key in _QUESTIONS.items():
        if said and any(said.startswith(q.split("{", 1)[0]) for q in i18n.TEXTS[key].values()):
            return kind
    return None


def excerpt(content: object) -> str:
    """A memory's content on one short line, as the "which memory?" question shows it."""
    return one_line(content, EXCERPT_CHARS)

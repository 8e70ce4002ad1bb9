"""The commands recognized before any LLM call: in English and Portuguese, only when
the message is clearly and only that command; the answers to a pending confirmation, and
the pick of a memory after "which one?"."""

from __future__ import annotations

import pytest

from memoria_decision.core.routes import route_for
from memoria_decision.core.state import PendingAction, UpdateCandidate
from memoria_text.commands import (
    Choice,
    Command,
    Reply,
    read_choice,
    read_reply,
    recognize,
)


@pytest.mark.parametrize(
    ("message", "command", "language"),
    [
        ("delete all my memories", Command.DELETE_ALL, "en"),
        ("Delete ALL of my memories, please.", Command.DELETE_ALL, "en"),
        ("Can you delete all my memories?", Command.DELETE_ALL, "en"),
        ("please erase every memory you have about me", Command.DELETE_ALL, "en"),
        ("forget everything you know about me", Command.DELETE_ALL, "en"),
        ("wipe your memory", Command.DELETE_ALL, "en"),
        ("apague todas as minhas memórias", Command.DELETE_ALL, "pt"),
        ("Apague TODAS as minhas memórias!", Command.DELETE_ALL, "pt"),
        ("Pode apagar todas as minhas memórias, por favor?", Command.DELETE_ALL, "pt"),
        ("esqueça tudo que você sabe sobre mim", Command.DELETE_ALL, "pt"),
        ("quero apagar todas as memórias", Command.DELETE_ALL, "pt"),
        ("list all my memories", Command.LIST_ALL, "en"),
        ("Show me my memories", Command.LIST_ALL, "en"),
        ("what are my memories?", Command.LIST_ALL, "en"),
        ("liste minhas memórias", Command.LIST_ALL, "pt"),
        ("Liste todas as minhas memórias", Command.LIST_ALL, "pt"),
        ("mostre-me minhas memórias", Command.LIST_ALL, "pt"),
        ("quais são as minhas memórias?", Command.LIST_ALL, "pt"),
        ("cancel", Command.CANCEL, "en"),
        ("Never mind.", Command.CANCEL, "en"),
        ("cancelar", Command.CANCEL, "pt"),
        ("deixa pra lá", Command.CANCEL, "pt"),
        ("forget that", Command.FORGET_LAST, "en"),
        ("Forget it.", Command.FORGET_LAST, "en"),
        ("please delete that", Command.FORGET_LAST, "en"),
        ("forget what I just said", Command.FORGET_LAST, "en"),
        ("Esqueça isso", Command.FORGET_LAST, "pt"),
        ("esquece isso!", Command.FORGET_LAST, "pt"),
        ("esquece", Command.FORGET_LAST, "pt"),
        ("apaga isso", Command.FORGET_LAST, "pt"),
        ("pode esquecer o que eu disse, por favor", Command.FORGET_LAST, "pt"),
    ],
)
def test_commands_in_english_and_portuguese(message: str, command: Command, language: str) -> None:
    recognized = recognize(message)
    assert recognized is not None
    assert (recognized.kind, recognized.language) == (command, language)


@pytest.mark.parametrize(
    "message",
    [
        "don't delete all my memories",
        "do not delete all my memories",
        "how do I delete all memories?",
        "how can I list all my memories?",
        "delete all my memories about work",
        "delete all my memories except the allergy",
        "list all my memories and delete them",
        "I deleted all my photos",
        "should I delete all my memories?",
        "não apague todas as minhas memórias",
        "como apago todas as minhas memórias?",
        "apague todas as minhas memórias sobre trabalho",
        "Esqueça tudo",  # "everything" of what? the model (or the offline planner) asks
        "What do you know about me?",
        "cancel my subscription",
        "cancel the meeting on Friday",
        "remember that I want to cancel my gym membership",
        "yes",
        "sim",
    ],
)
def test_anything_more_or_less_than_the_command_is_not_it(message: str) -> None:
    assert recognize(message) is None


@pytest.mark.parametrize(
    ("message", "reply", "language"),
    [
        ("yes", Reply.CONFIRM, "en"),
        ("Yes!", Reply.CONFIRM, "en"),
        ("yes, delete them all", Reply.CONFIRM, "en"),
        ("confirm", Reply.CONFIRM, "en"),
        ("sim", Reply.CONFIRM, "pt"),
        ("Sim, pode apagar", Reply.CONFIRM, "pt"),
        ("confirmo", Reply.CONFIRM, "pt"),
        ("no", Reply.DECLINE, "en"),
        ("cancel", Reply.DECLINE, "en"),
        ("No, keep them", Reply.DECLINE, "en"),
        ("não", Reply.DECLINE, "pt"),
        ("cancelar", Reply.DECLINE, "pt"),
        ("Não, obrigado", Reply.DECLINE, "pt"),
        ("claro", Reply.CONFIRM, "pt"),
        ("Sim, pode apagar tudo", Reply.CONFIRM, "pt"),
        ("of course", Reply.CONFIRM, "en"),
        ("melhor não", Reply.DECLINE, "pt"),
        ("ok", Reply.OTHER, "pt"),  # not a clear yes: nothing destructive on a guess
        ("maybe", Reply.OTHER, "pt"),
        ("yes but keep the one about peanuts", Reply.OTHER, "pt"),
        ("what is my name?", Reply.OTHER, "pt"),
    ],
)
def test_answers_to_a_pending_confirmation(message: str, reply: Reply, language: str) -> None:
    read = read_reply(message, asked_in="pt")
    assert (read.kind, read.language) == (reply, language)


PENDING = PendingAction(id="pa_1", kind="delete_all", language="en", asked_in_cycle="cyc_1")


def test_routes_without_a_pending_action() -> None:
    assert route_for("delete all my memories", None, "en").kind == "ask_delete_all"
    assert route_for("list all my memories", None, "en").kind == "list_all"
    cancel = route_for("cancelar", None, "en")
    assert (cancel.kind, cancel.declined, cancel.language) == ("cancel", False, "pt")
    model = route_for("yes", None, "en")  # a yes to nothing is an ordinary message
    assert (model.kind, model.resolves, model.dropped) == ("model", None, None)


def test_routes_with_a_pending_action() -> None:
    confirmed = route_for("sim", PENDING, "pt")
    assert (confirmed.kind, confirmed.resolves, confirmed.language) == ("delete_all", "pa_1", "pt")
    declined = route_for("cancel", PENDING, "en")
    assert (declined.kind, declined.resolves, declined.declined) == ("cancel", "pa_1", True)
    other = route_for("what is my name?", PENDING, "en")
    assert (other.kind, other.resolves, other.dropped) == ("model", "pa_1", "delete_all")
    listed = route_for("list all my memories", PENDING, "en")
    assert (listed.kind, listed.resolves, listed.dropped) == ("list_all", "pa_1", "delete_all")
    asked_again = route_for("delete all my memories", PENDING, "en")
    assert (asked_again.kind, asked_again.resolves, asked_again.dropped) == (
        "ask_delete_all",
        "pa_1",
        None,
    )


@pytest.mark.parametrize("message", ["forget that", "forget it", "Esqueça isso", "esquece isso"])
def test_forget_that_forgets_the_last_told_unless_a_question_is_pending(message: str) -> None:
    """With nothing pending, "forget that" forgets the last thing the user told (it was
    "nothing to cancel", or a search for the words "forget that"); as the reply to a pending
    question, it declines it."""
    assert route_for(message, None, "en").kind == "forget_last"
    declined = route_for(message, PENDING, "en")
    assert (declined.kind, declined.declined) == ("cancel", True)


def test_delete_that_while_delete_all_is_pending_drops_it_and_forgets_the_last_told() -> None:
    """ "Apaga isso" is no "yes" to deleting everything: the question is dropped."""
    route = route_for("apaga isso", PENDING, "en")
    assert (route.kind, route.dropped, route.language) == ("forget_last", "delete_all", "pt")


@pytest.mark.parametrize(
    "message", ["forget my address", "forget about the trip to Rome", "esqueça meu endereço"]
)
def test_forgetting_something_named_is_no_forget_that(message: str) -> None:
    assert recognize(message) is None


def test_a_reply_that_does_not_tell_its_language_takes_the_questions() -> None:
    """ "ok" tells nothing: the notice that drops the Portuguese question is in Portuguese."""
    asked_in_pt = PENDING.model_copy(update={"language": "pt"})
    dropped = route_for("ok", asked_in_pt, "en")
    assert (dropped.kind, dropped.dropped, dropped.language) == ("model", "delete_all", "pt")
    switched = route_for("what is my name?", asked_in_pt, "en")
    assert switched.language == "en"  # the user changed language: so does the notice


def test_a_yes_after_the_question_expired_confirms_nothing() -> None:
    expired = route_for("sim", None, "pt", asked="delete_all")
    assert (expired.kind, expired.language, expired.expired) == ("expired", "pt", "delete_all")
    assert route_for("sim", None, "pt").kind == "model"  # a yes to anything else
    late_pick = route_for("2", None, "en", asked="choose_forget")
    assert (late_pick.kind, late_pick.expired, late_pick.dropped) == (
        "expired",
        "choose_forget",
        None,
    )
    assert route_for("what is my name?", None, "en", asked="choose_update").kind == "model"


# -- which memory did you mean? ------------------------------------------------------------

CANDIDATES = [("mem_c1", "I drink coffee every morning"), ("mem_c2", "Coffee: black, no sugar")]


@pytest.mark.parametrize(
    ("message", "index", "language"),
    [
        ("2", 1, None),
        ("#1", 0, None),
        ("number 2", 1, None),
        ("the second", 1, "en"),
        ("the second one", 1, "en"),
        ("2nd", 1, "en"),
        ("first", 0, "en"),
        ("a segunda", 1, "pt"),
        ("A primeira.", 0, "pt"),
        ("2ª", 1, "pt"),
        ("a nº 2", 1, None),
        ("opção 2", 1, None),
        ("mem_c2", 1, None),
        ('the one that says "black, no sugar"', 1, None),
        ("«todas as manhãs»", None, None),  # quoted, but in neither candidate
        ('"coffee"', None, None),  # quoted, in both: not a pick
    ],
)
def test_read_choice(message: str, index: int | None, language: str | None) -> None:
    choice = read_choice(message, CANDIDATES)
    assert (choice.index, choice.language) == (index, language)
    assert not choice.out_of_range


@pytest.mark.parametrize(
    ("message", "language"), [("3", None), ("the third", "en"), ("a terceira", "pt"), ("0", None)]
)
def test_a_number_with_no_such_candidate_is_out_of_range(
    message: str, language: str | None
) -> None:
    choice = read_choice(message, CANDIDATES)
    assert (choice.index, choice.out_of_range, choice.language) == (None, True, language)


def test_a_pick_by_its_quoted_id_or_text() -> None:
    assert read_choice('"mem_c2"', CANDIDATES) == Choice(1)
    assert read_choice("'MEM_C1'", CANDIDATES) == Choice(0)


@pytest.mark.parametrize(
    "message", ["tea", "update my coffee preference to tea", "2 coffees please", "cancel", "yes"]
)
def test_anything_else_picks_nothing(message: str) -> None:
    assert read_choice(message, CANDIDATES) == Choice(None)


def test_routes_of_a_pending_choice() -> None:
    chosen = route_for("a segunda", pending_choice(), "pt")
    assert (chosen.kind, chosen.targets, chosen.resolves, chosen.language) == (
        "update_chosen",
        ("mem_c2",),
        "pa_1",
        "pt",
    )
    assert route_for("3", pending_choice(), "en").kind == "ask_choice"
    cancelled = route_for("cancelar", pending_choice(), "pt")
    assert (cancelled.kind, cancelled.declined, cancelled.language) == ("cancel", True, "pt")
    other = route_for("what's the weather?", pending_choice(), "en")
    assert (other.kind, other.dropped, other.resolves) == ("model", "choose_update", "pa_1")
    # "yes" is no pick: a pending choice is not a yes/no question
    assert route_for("yes", pending_choice(), "en").kind == "model"
    quoted = route_for('the one that says "black, no sugar"', pending_choice(), "en")
    assert (quoted.kind, quoted.targets) == ("update_chosen", ("mem_c2",))


@pytest.mark.parametrize(
    ("kind", "chosen"), [("choose_update", "update_chosen"), ("choose_forget", "forget_chosen")]
)
def test_a_pending_choice_travels_with_its_route(kind: str, chosen: str) -> None:
    """The store's copy is cleared: the route keeps the question it answered."""
    pending = pending_choice().model_copy(update={"kind": kind})
    picked = route_for("2", pending, "en")
    assert (picked.kind, picked.targets, picked.choice) == (chosen, ("mem_c2",), pending)
    again = route_for("3", pending, "en")
    assert (again.kind, again.choice) == ("ask_choice", pending)
    cancelled = route_for("cancel", pending, "en")
    assert (cancelled.kind, cancelled.declined, cancelled.choice) == ("cancel", True, pending)


def pending_choice(language: str = "en") -> PendingAction:
    return PendingAction(
        id="pa_1",
        kind="choose_update",
        language=language,
        asked_in_cycle="cyc_1",
        candidates=tuple(UpdateCandidate(memory_id=i, content=c) for i, c in CANDIDATES),
        content="I drink tea",
        content_kind="text",
    )

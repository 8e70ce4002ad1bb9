"""Decision's core, without Redis: every state a cycle can be stored in (and the opening one,
and none), met by every event that can reach it, redelivered, duplicated and late ones
included; then the cycle's story, step by step. Fast paths and pending actions:
test_core_fast_paths.py and test_pending_question.py."""

from __future__ import annotations

import itertools

import pytest
from core_cycles import (
    AT,
    CONFIG,
    RELEASED,
    SETTINGS,
    answers,
    arrived,
    completion,
    config,
    done,
    ended,
    fresh,
    kinds,
    message,
    of,
    page,
    posted,
    recorded,
    run,
    said,
    session_state,
    waiting,
)

from memoria_contracts.chat import CardInfo, ChatRecord
from memoria_contracts.events import (
    ChoiceCandidate,
    HistoryQuery,
    Language,
    PendingQuestion,
    StepRecord,
    UpdateChoice,
)
from memoria_contracts.history import HistorySummary
from memoria_contracts.memory import Memory, MemoryFailure, MemoryFound, MemorySearch
from memoria_contracts.personas import AgentHistoryEntry
from memoria_contracts.session import SessionConfigGet, SessionConfigState, SessionPersonaApplied
from memoria_decision.core import effects, events, outputs
from memoria_decision.core.machine import decide
from memoria_decision.core.routes import asked_in
from memoria_decision.core.state import CycleState, PendingAction, PendingStep, Route, Stored
from memoria_runtime.session_defaults import session_defaults
from memoria_text import i18n

E = effects
END = [E.MarkEnded, E.Save, E.Announce, E.Release]
DERIVED_END = [E.MarkEnded, E.Announce, E.Release]
"""A completed step's end is not saved on its own: its redelivery ends the cycle again."""


def end_kinds(*, notice: bool, recorded: bool = False, derived: bool = False) -> list[type]:
    told = [E.Post] if notice else []
    return [*told, *([E.ClearDeadline] if recorded else []), *(DERIVED_END if derived else END)]


def saved_end(moved: E.Transition) -> CycleState:
    """The ended state, as announced and released."""
    assert isinstance(moved.state, CycleState) and moved.state.status == "ended"
    return moved.state


# -- a new message and its redeliveries ----------------------------------------------------


def test_a_message_first_reads_its_threads_history_summary_and_config() -> None:
    moved = decide(None, arrived(), CONFIG)
    (ask,) = moved.effects
    assert isinstance(ask, E.AskMemory) and ask.purpose == "opening"
    assert ask.requests == (
        HistoryQuery(limit=50, exclude_cycle_id="cyc_1", summary=True, session=True),
    )
    assert isinstance(moved.state, CycleState) and moved.state.status == "opening"
    assert moved.state.started_at == AT


def test_a_message_whose_thread_is_busy_waits_behind_it() -> None:
    moved = decide(None, arrived(owns=False), CONFIG)
    assert kinds(moved) == [E.Note, E.Requeue]
    assert of(moved, E.Requeue) == [E.Requeue(b"framed")]


def test_a_new_cycle_is_stored_echoed_and_decided() -> None:
    state, carried = run(None, arrived(), answers(opening=page()))
    assert [type(e) for e in carried] == [
        E.AskMemory,
        E.Create,
        E.Post,  # the echo
        E.Post,  # Thinking…
        E.Choose,
        E.Save,
        E.SetDeadline,
        E.RequestAction,
    ]
    echo, thinking = [e.record for e in carried if isinstance(e, E.Post)]
    assert echo == message()
    assert (thinking.id, thinking.content, thinking.created_at) == (
        "cyc_1.1.status",
        "Thinking...",
        AT,
    )
    assert isinstance(state, CycleState) and state.echoed and state.status == "running"
    assert state.pending == PendingStep(step=1, action="Finalize", request_event_id="evt_2")
    assert not any(isinstance(e, E.RefreshLock) for e in carried)  # taken just now


def test_a_message_stored_first_by_another_delivery_carries_on_from_there() -> None:
    stored = waiting(1)
    state, carried = run(None, arrived(), answers(opening=page(), created=stored))
    assert [type(e) for e in carried] == [E.AskMemory, E.Create, E.SetDeadline, E.RequestAction]
    assert state == stored.but(echoed=True).working(now=AT)


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        (fresh(), [E.RefreshLock, E.Post, E.Choose]),
        (fresh(Route(kind="cancel", language="en")), [E.Post, *END]),
        (waiting(2), [E.SetDeadline, E.RequestAction]),
        (waiting(2, tool_call=True), [E.SetDeadline, E.Post, E.RequestAction]),
        (recorded(1), [E.RefreshLock, E.Post, E.Choose]),
        (recorded(CONFIG.max_steps), end_kinds(notice=True, derived=True)),
        (ended(announced=False), [E.Announce, E.Release]),
        (ended(announced=True), [E.Release]),
    ],
    ids=["fresh", "fast", "waiting", "waiting-tool", "recorded", "recorded-last", "ended", "told"],
)
def test_a_redelivered_message_carries_on_from_what_its_state_says(
    state: CycleState, expected: list[type]
) -> None:
    moved = decide(state, events.Redelivered(AT), CONFIG)
    assert kinds(moved) == expected
    not_echoed = decide(state.but(echoed=False), events.Redelivered(AT), CONFIG)
    assert kinds(not_echoed) == [E.Post, *expected]
    assert isinstance(not_echoed.state, CycleState) and not_echoed.state.echoed


def test_a_redelivery_after_a_recorded_step_decides_without_saving_it_again() -> None:
    moved = decide(recorded(1), events.Redelivered(AT), CONFIG)
    assert not of(moved, E.Save) and of(moved, E.Choose) == [E.Choose(2)]


def test_an_ended_cycle_is_announced_once_and_released_with_its_tombstone() -> None:
    moved = decide(ended(announced=False), events.Redelivered(AT), CONFIG)
    (release,) = of(moved, E.Release)
    assert release.released == RELEASED.model_copy(update={"end_reason": "done"})
    assert isinstance(moved.state, CycleState) and moved.state.end_announced
    again = decide(moved.state, events.Redelivered(AT), CONFIG)
    assert again.effects == (E.Release(None),)


def test_a_released_cycle_or_none_changes_nothing() -> None:
    for state in (RELEASED, None):
        for event in (events.Redelivered(AT), completion(1), events.StepOverdue(AT, 1)):
            assert kinds(decide(state, event, CONFIG)) == [E.Note]


# -- opening: history, session, language, persona, recall ------------------------------------


def test_a_reply_without_the_config_asks_for_it_on_its_own() -> None:
    """A memory service from before the field leaves it out: the cycle still gets its config."""
    opening = decide(None, arrived(), CONFIG).state
    moved = decide(
        opening,
        events.Answered(AT, "opening", (page(session=None).model_copy(update={"session": None}),)),
        CONFIG,
    )
    (ask,) = moved.effects
    assert isinstance(ask, E.AskMemory) and ask.purpose == "session"
    assert ask.requests == (SessionConfigGet(thread_id="t1", defaults_if_missing=True),)
    limited = session_state(memory_limit=7)
    state, _ = run(moved.state, events.Answered(AT, "session", (limited,)), answers())
    assert isinstance(state, CycleState) and state.session == limited.config


def test_an_unanswered_history_reads_the_config_alone_and_says_so() -> None:
    refused = events.Unanswered("storage: history unreadable", timeout=False)
    state, carried = run(
        None, arrived(), answers(opening=refused, session=session_state(memory_limit=5))
    )
    asked = [e.purpose for e in carried if isinstance(e, E.AskMemory)]
    assert asked == ["opening", "session"]
    assert isinstance(state, CycleState) and state.session is not None
    assert state.session.memory_limit == 5 and state.history == ()
    notices = [
        r for r in (e.record for e in carried if isinstance(e, E.Post)) if r.id.endswith(".history")
    ]
    assert [n.content for n in notices] == [i18n.text("history_unavailable", "en")]


def test_a_silent_memory_service_is_not_asked_twice() -> None:
    """Asking again for the config alone would make the user wait the timeout twice."""
    silent = events.Unanswered("timed out", timeout=True)
    state, carried = run(None, arrived(), answers(opening=silent))
    assert [e.purpose for e in carried if isinstance(e, E.AskMemory)] == ["opening"]
    assert isinstance(state, CycleState)
    assert state.session == session_defaults(SETTINGS, "t1")


def test_an_unreadable_config_means_the_defaults() -> None:
    opening = decide(None, arrived(), CONFIG).state
    state, _ = run(
        opening.but(history=()) if isinstance(opening, CycleState) else None,
        events.Answered(AT, "session", (MemoryFailure(code="unavailable", error_message="x"),)),
        answers(),
    )
    assert isinstance(state, CycleState) and state.session == session_defaults(SETTINGS, "t1")


def test_the_history_summary_is_cut_to_the_prompts_bound() -> None:
    summary = HistorySummary(archive="\n".join(f"line {n}" for n in range(1000)))
    answer = page().model_copy(update={"summary": summary})
    state, _ = run(None, arrived(), answers(opening=answer), cfg=config(summary_chars=100))
    assert isinstance(state, CycleState) and state.history_summary is not None
    assert len(state.history_summary.archive) <= 100


@pytest.mark.parametrize(
    ("text", "earlier", "language"),
    [
        ("Olá, tudo bem?", (), "pt"),
        ("Lena", ("Qual é o nome da minha filha?",), "pt"),
        ("Lena", (), "en"),
    ],
)
def test_the_cycles_language_comes_from_the_message_or_the_users_earlier_ones(
    text: str, earlier: tuple[str, ...], language: str
) -> None:
    history = [said("user", t, f"h{n}") for n, t in enumerate(earlier)]
    state, _ = run(None, arrived(text), answers(opening=page(*history)))
    assert isinstance(state, CycleState) and state.language == language


def test_recall_is_off_by_default() -> None:
    _, carried = run(None, arrived("what can't I eat?"), answers(opening=page()))
    assert "recall" not in [e.purpose for e in carried if isinstance(e, E.AskMemory)]


PEANUTS = Memory(
    memory_id="mem_nuts1",
    memory_type="constraint",
    content="Is allergic to peanuts",
    bindings=["food allergy"],
    creation_datetime=AT,
    last_accessed=AT,
    updated_at=AT,
    relevance_score=0.9,
)


def test_recall_searches_with_the_message_and_the_sessions_limits() -> None:
    session = session_state(proactive_retrieval=True, memory_limit=2, memory_min_relevance=0.3)
    long_message = "what   can't\nI eat? " + "x" * 400
    state, carried = run(
        None,
        arrived(long_message),
        answers(opening=page(session=session), recall=MemoryFound(memories=[PEANUTS])),
    )
    (recall,) = [e for e in carried if isinstance(e, E.AskMemory) and e.purpose == "recall"]
    (search,) = recall.requests
    assert isinstance(search, MemorySearch)
    assert (search.mode, search.limit, search.min_relevance) == ("semantic", 2, 0.3)
    assert search.queries[0].startswith("what can't I eat? x") and len(search.queries[0]) == 300
    assert isinstance(state, CycleState)
    card = state.transcript[-1]
    assert card.id == "cyc_1.0.1" and card.created_at == AT
    assert (card.modal, card.role, card.chat_history) == ("memory", "system", True)
    assert card.content["memory_id"] == "mem_nuts1"
    shown = [e.record.id for e in carried if isinstance(e, E.Post)]
    assert shown[:2] == ["msg_1", "cyc_1.0.1"]  # the echo, then the card, before Thinking…


def test_recalled_cards_are_those_near_the_best_match_each_saying_how_it_matched() -> None:
    session = session_state(proactive_retrieval=True)
    near = PEANUTS.model_copy(update={"memory_id": "mem_shell", "relevance_score": 0.5})
    far = PEANUTS.model_copy(update={"memory_id": "mem_bassoon", "relevance_score": 0.1})
    found = MemoryFound(memories=[PEANUTS, near, far])  # 0.1 < 0.2 × 0.9: cut
    state, _ = run(
        None, arrived("what can't I eat?"), answers(opening=page(session=session), recall=found)
    )
    assert isinstance(state, CycleState)
    cards = [r for r in state.transcript if r.modal == "memory"]
    assert [c.content["memory_id"] for c in cards] == ["mem_nuts1", "mem_shell"]
    assert [c.card for c in cards] == [
        CardInfo(kind="found", match="best"),
        CardInfo(kind="found", match="related"),
    ]
    everything, _ = run(
        None,
        arrived("what can't I eat?"),
        answers(opening=page(session=session), recall=found),
        cfg=config(relative_relevance=0.0),
    )
    assert isinstance(everything, CycleState)
    assert len([r for r in everything.transcript if r.modal == "memory"]) == 3


@pytest.mark.parametrize(
    "reply",
    [
        events.Unanswered("unexpected_reply: x", timeout=False),
        MemoryFailure(code="unavailable", error_message="down"),
    ],
)
def test_a_failed_recall_leaves_the_cycle_without_memories(reply: object) -> None:
    session = session_state(proactive_retrieval=True)
    state, _ = run(
        None, arrived("what can't I eat?"), answers(opening=page(session=session), recall=reply)
    )
    assert isinstance(state, CycleState) and state.transcript == (message("what can't I eat?"),)


def test_a_command_is_no_topic_to_recall() -> None:
    session = session_state(proactive_retrieval=True)
    _, carried = run(
        None,
        arrived("list all my memories"),
        answers(
            opening=page(session=session), list=MemoryFailure(code="unavailable", error_message="x")
        ),
    )
    assert "recall" not in [e.purpose for e in carried if isinstance(e, E.AskMemory)]


def switched() -> SessionConfigState:
    entry = AgentHistoryEntry(seq=1, persona="tutor", previous="memoria", at=AT, by="ana")
    return session_state(persona="tutor").model_copy(update={"agent_history": [entry]})


def test_after_a_persona_switch_the_first_decision_records_it_then_chooses() -> None:
    state, carried = run(
        None, arrived(), answers(opening=page(session=switched()), persona=session_state())
    )
    assert isinstance(state, CycleState) and state.persona is not None
    assert state.persona.persona.id == "tutor"
    assert state.persona.reset is not None and state.persona.reset.previous_id == "memoria"
    persona = [e for e in carried if isinstance(e, E.AskMemory) and e.purpose == "persona"]
    assert [r for p in persona for r in p.requests] == [
        SessionPersonaApplied(thread_id="t1", applied=state.persona_record)
    ]
    kinds_after = [type(e) for e in carried][carried.index(persona[0]) + 1 :]
    assert kinds_after[0] is E.Choose and state.persona_recorded


def test_an_unrecorded_switch_still_applies_and_is_said() -> None:
    silent = events.Unanswered("timed out", timeout=True)
    state, carried = run(None, arrived(), answers(opening=page(session=switched()), persona=silent))
    assert any(isinstance(e, E.Note) and "not recorded" in e.why for e in carried)
    assert isinstance(state, CycleState) and state.persona is not None and state.pending is not None


def test_a_fast_path_uses_up_no_persona_switch() -> None:
    _, carried = run(None, arrived("cancel"), answers(opening=page(session=switched())))
    assert "persona" not in [e.purpose for e in carried if isinstance(e, E.AskMemory)]


def test_a_persona_no_longer_configured_answers_as_the_default() -> None:
    state, _ = run(None, arrived(), answers(opening=page(session=session_state(persona="gone"))))
    assert isinstance(state, CycleState) and state.persona is not None
    assert state.persona.persona.id == CONFIG.default_persona


# -- decisions -----------------------------------------------------------------------------


def test_a_chosen_action_becomes_the_pending_step_and_its_request() -> None:
    spent = {"m": (10, 2)}
    moved = decide(recorded(1), events.Chosen(AT, "MemorySave", True, "evt_9", spent), CONFIG)
    assert kinds(moved) == [E.Save, E.SetDeadline, E.Post, E.RequestAction]
    assert isinstance(moved.state, CycleState)
    assert moved.state.tokens == spent  # saved with the step it chose
    assert of(moved, E.Save) == [E.Save(moved.state)]
    assert moved.state.pending == PendingStep(
        step=2, action="MemorySave", request_event_id="evt_9", tool_call=True
    )
    (call,) = posted(moved)
    assert call.id == "cyc_1.2.call" and call.tool_calls is not None
    assert (call.tool_calls[0].name, call.tool_calls[0].arguments) == ("MemorySave", {})


@pytest.mark.parametrize(
    ("event", "reason", "words"),
    [
        (events.Undecided(AT, "llm_error", "timed out"), "llm_error", "timed out"),
        (events.Undecided(AT, "no_workers"), "no_workers", "worker"),
    ],
)
def test_no_decision_ends_the_cycle_with_a_notice(
    event: events.Event, reason: str, words: str
) -> None:
    moved = decide(recorded(1), event, CONFIG)
    assert kinds(moved) == end_kinds(notice=True)
    (notice,) = posted(moved)
    assert words in str(notice.content) and notice.id == "cyc_1.end"
    assert saved_end(moved).end_reason == reason


def test_a_cycle_adds_up_what_its_decisions_and_steps_spent_by_model() -> None:
    chosen = events.Chosen(AT, "MemorySearch", True, "evt_2", {"m": (10, 2)})
    moved = decide(recorded(1).spending({"m": (5, 1)}), chosen, CONFIG)
    assert isinstance(moved.state, CycleState) and moved.state.tokens == {"m": (15, 3)}
    stepped = decide(moved.state, completion(2, tokens={"w": (100, 20), "m": (1, 1)}), CONFIG)
    assert isinstance(stepped.state, CycleState)
    assert stepped.state.tokens == {"m": (16, 4), "w": (100, 20)}
    again = decide(stepped.state, completion(2, tokens={"w": (100, 20)}), CONFIG)
    assert isinstance(again.state, CycleState)
    assert again.state.tokens == stepped.state.tokens  # a duplicate completion counts once


def test_a_failed_decision_still_counts_what_it_spent() -> None:
    moved = decide(recorded(1), events.Undecided(AT, "llm_error", "down", {"m": (7, 0)}), CONFIG)
    assert saved_end(moved).tokens == {"m": (7, 0)}


def test_no_step_allowed_ends_a_model_route_at_once() -> None:
    moved = decide(fresh(), events.Redelivered(AT), config(max_steps=0))
    assert kinds(moved) == end_kinds(notice=True, derived=True)
    assert saved_end(moved).end_reason == "max_steps"
    assert posted(moved)[0].content == i18n.text("max_steps", "en", steps=0)


# -- completions ---------------------------------------------------------------------------


def test_the_awaited_completion_is_recorded_and_leads_to_the_next_decision() -> None:
    kept = said("assistant", "x", "c.1", "cyc_1")
    shown = kept.model_copy(update={"id": "c.2", "chat_history": False})
    moved = decide(waiting(1), completion(1, messages=[kept, shown]), CONFIG)
    assert kinds(moved) == [E.ClearDeadline, E.Save, E.RefreshLock, E.Post, E.Choose]
    assert isinstance(moved.state, CycleState) and moved.state.pending is None
    assert moved.state.steps == (done(1),)
    assert moved.state.transcript == (message(), kept)  # only what the model may read


def test_a_tool_step_posts_its_call_with_arguments_and_its_result_first() -> None:
    event = completion(1, arguments={"queries": ["x"]})
    moved = decide(waiting(1, tool_call=True), event, CONFIG)
    assert kinds(moved)[:2] == [E.Post, E.Post]
    call, result = posted(moved)[:2]
    assert call.tool_calls is not None and call.tool_calls[0].arguments == {"queries": ["x"]}
    assert (result.role, result.content, result.tool_call_id) == (
        "tool",
        "found 1",
        call.tool_calls[0].id,
    )
    failed = decide(
        waiting(1, tool_call=True), completion(1, status="failed", error="boom"), CONFIG
    )
    (only,) = posted(failed)[:1]
    assert only.content == "failed: boom"


def test_the_last_allowed_step_ends_the_cycle_instead_of_deciding() -> None:
    last = CONFIG.max_steps
    moved = decide(waiting(last), completion(last), CONFIG)
    assert kinds(moved) == end_kinds(notice=True, recorded=True, derived=True)
    assert saved_end(moved).end_reason == "max_steps"
    assert of(moved, E.ClearDeadline) == [E.ClearDeadline(last)]


def test_a_step_that_ends_the_cycle_ends_it_saving_the_step() -> None:
    moved = decide(waiting(1), completion(1, ends=True), CONFIG)
    assert kinds(moved) == end_kinds(notice=False, recorded=True, derived=True)
    end = saved_end(moved)
    assert end.steps == (done(1),) and end.end_reason == "done" and end.pending is None


def test_a_failed_final_step_ends_with_what_failed() -> None:
    moved = decide(waiting(1), completion(1, ends=True, status="failed", error="boom"), CONFIG)
    assert kinds(moved) == end_kinds(notice=True, recorded=True, derived=True)
    assert "boom" in str(posted(moved)[0].content)
    assert saved_end(moved).end_reason == "action_failed"


def test_a_step_that_needs_a_choice_asks_it_then_ends() -> None:
    choice = UpdateChoice(
        candidates=[ChoiceCandidate(memory_id=f"mem_{n}", content=f"c{n}") for n in (1, 2)],
        content="new",
    )
    moved = decide(waiting(1), completion(1, ends=True, choice=choice), CONFIG)
    assert kinds(moved) == [
        E.PutPending,
        E.Post,
        *end_kinds(notice=False, recorded=True, derived=True),
    ]
    (put,) = of(moved, E.PutPending)
    assert put.action.kind == "choose_update" and put.action.content == "new"
    assert [c.memory_id for c in put.action.candidates] == ["mem_1", "mem_2"]
    assert posted(moved)[0].id == "cyc_1.1.reply"


def test_the_previous_steps_completion_again_republishes_the_pending_request() -> None:
    moved = decide(waiting(2), completion(1), CONFIG)
    assert kinds(moved) == [E.SetDeadline, E.RequestAction]
    assert moved.state == waiting(2).working(now=AT)


@pytest.mark.parametrize("ends", [False, True])
def test_a_completion_recorded_by_a_delivery_that_died_is_acted_on_unsaved(ends: bool) -> None:
    moved = decide(recorded(1), completion(1, ends=ends), CONFIG)
    if ends:
        assert kinds(moved) == end_kinds(notice=False, derived=True)
        assert saved_end(moved).steps == (done(1),)
    else:
        assert kinds(moved) == [E.RefreshLock, E.Post, E.Choose]


@pytest.mark.parametrize(
    ("state", "step"),
    [(waiting(3), 1), (waiting(2), 5), (recorded(2), 1), (fresh(), 1), (recorded(1), 2)],
    ids=["older", "future", "before-recorded", "no-step-yet", "not-requested"],
)
def test_a_stale_completion_is_ignored(state: CycleState, step: int) -> None:
    moved = decide(state, completion(step), CONFIG)
    assert kinds(moved) == [E.Note]
    assert moved.state == state.working(now=AT)


@pytest.mark.parametrize("announced", [False, True])
def test_a_late_completion_of_an_ended_cycle_only_makes_sure_of_the_release(
    announced: bool,
) -> None:
    moved = decide(ended(announced=announced), completion(1, ends=True), CONFIG)
    assert kinds(moved) == ([E.Release] if announced else [E.Announce, E.Release])


def test_a_duplicate_final_completion_announces_nothing_again() -> None:
    first = decide(waiting(1), completion(1, ends=True), CONFIG)
    again = decide(first.state, completion(1, ends=True), CONFIG)
    assert again.effects == (E.Release(None),)


def test_a_duplicate_completion_saved_before_the_decision_decides_the_same_step() -> None:
    first = decide(waiting(1), completion(1), CONFIG)
    again = decide(first.state, completion(1), CONFIG)
    assert of(first, E.Choose) == of(again, E.Choose) == [E.Choose(2)]
    assert not of(again, E.Save)
    assert isinstance(again.state, CycleState) and isinstance(first.state, CycleState)
    assert again.state.steps == first.state.steps  # recorded once


# -- timeouts ------------------------------------------------------------------------------


@pytest.mark.parametrize("tool_call", [False, True])
def test_an_overdue_step_fails_and_ends_the_cycle(tool_call: bool) -> None:
    moved = decide(waiting(2, tool_call=tool_call), events.StepOverdue(AT, 2), CONFIG)
    assert kinds(moved) == [*([E.Post] if tool_call else []), *end_kinds(notice=True)]
    end = saved_end(moved)
    assert end.end_reason == "step_timeout"
    assert end.steps[-1] == StepRecord(
        step=2, action="MemorySearch", status="failed", summary="timed out"
    )
    assert "120s" in str(posted(moved)[-1].content)
    if tool_call:
        assert posted(moved)[0].content == "failed: timed out"


@pytest.mark.parametrize(
    "state",
    [waiting(3), recorded(2), fresh(), ended(announced=False), ended(announced=True)],
    ids=["other-step", "recorded", "fresh", "ended", "announced"],
)
def test_a_deadline_of_a_step_no_longer_awaited_is_ignored(state: CycleState) -> None:
    moved = decide(state, events.StepOverdue(AT, 2), CONFIG)
    assert kinds(moved) == [E.Note]


# -- what holds for every pair -------------------------------------------------------------

CHOICE = PendingAction(
    id="pa_0", kind="choose_update", language="en", asked_in_cycle="cyc_0", content="tea"
)
STATES: dict[str, Stored | None] = {
    "none": None,
    "opening": decide(None, arrived(), CONFIG).state,
    "fresh": fresh(),
    "fresh-fast": fresh(Route(kind="delete_all", language="en", targets=("mem_1",))),
    "not-echoed": fresh(echoed=False),
    "waiting": waiting(2),
    "waiting-tool": waiting(2, tool_call=True),
    "waiting-last": waiting(CONFIG.max_steps),
    "recorded": recorded(1),
    "recorded-last": recorded(CONFIG.max_steps),
    "ended": ended(announced=False),
    "announced": ended(announced=True),
    "released": RELEASED,
}
EVENTS: dict[str, events.Event] = {
    "arrived": arrived(),
    "redelivered": events.Redelivered(AT),
    "opening": events.Answered(AT, "opening", (page(),)),
    "opening-silent": events.Answered(AT, "opening", (events.Unanswered("x", timeout=True),)),
    "session": events.Answered(AT, "session", (session_state(),)),
    "recall": events.Answered(AT, "recall", (MemoryFound(memories=[PEANUTS]),)),
    "persona": events.Answered(AT, "persona", (session_state(),)),
    "deleted": events.Answered(AT, "delete", (MemoryFailure(code="not_found", error_message="x"),)),
    "created": events.Created(AT, None),
    "created-before": events.Created(AT, waiting(1)),
    "chosen": events.Chosen(AT, "Finalize", False, "evt_2", {}),
    "decision-failed": events.Undecided(AT, "llm_error", "down"),
    "no-workers": events.Undecided(AT, "no_workers"),
    "completed-1": completion(1),
    "completed-2": completion(2),
    "completed-2-final": completion(2, ends=True),
    "completed-last": completion(CONFIG.max_steps),
    "asked": completion(2, action="Question", ends=True),
    "overdue-1": events.StepOverdue(AT, 1),
    "overdue-2": events.StepOverdue(AT, 2),
}


@pytest.mark.parametrize(("state_name", "event_name"), list(itertools.product(STATES, EVENTS)))
def test_every_transition_is_pure_and_well_ordered(state_name: str, event_name: str) -> None:
    state, event = STATES[state_name], EVENTS[event_name]
    before = None if state is None else state.model_dump()
    moved = decide(state, event, CONFIG)
    assert (None if state is None else state.model_dump()) == before  # the input is unchanged
    assert decide(state, event, CONFIG) == moved  # the same input, the same answer
    found = moved.effects
    assert found, "every event leads somewhere, if only to a note"
    # What leads to another event comes last, and alone of its kind.
    for effect in found[:-1]:
        assert not isinstance(effect, E.LEADS_ON)
    # Records are the cycle's, written at the event's time (the core reads no clock).
    for effect in found:
        if isinstance(effect, E.Post) and effect.record.role != "user":
            assert effect.record.cycle_id == "cyc_1" and effect.record.created_at == AT
    # An ending: the mark, the ended state, its announcement, the release; nothing after.
    kinds_found = [type(e) for e in found]
    if E.MarkEnded in kinds_found:
        assert kinds_found[kinds_found.index(E.MarkEnded) :] in (END, DERIVED_END)
    if isinstance(found[-1], E.Release):
        assert isinstance(moved.state, CycleState)
        assert moved.state.status == "ended" and moved.state.end_announced
        assert moved.state.pending is None
    # Nothing runs a cycle on once it ended.
    over = not isinstance(state, CycleState) or state.status == "ended"
    if over and not isinstance(event, events.Arrived):
        runs_on = (*E.LEADS_ON, E.RequestAction, E.SetDeadline)
        assert not any(isinstance(e, runs_on) for e in found)


# -- what each effect carries ---------------------------------------------------------------


def test_the_context_a_step_gets_is_the_whole_cycle() -> None:
    summary = HistorySummary(archive="earlier")
    question = PendingQuestion(user_question="q", assistant_question="a", answered=True)
    route = Route(kind="model", language="pt", question=question)
    state = waiting(2).but(
        history=(said("user", "old", "h1"),), history_summary=summary, language="pt", route=route
    )
    context = state.context()
    assert context.original_message == message()
    assert (context.history, context.transcript) == (list(state.history), [message()])
    assert (context.steps, context.language) == ([done(1)], "pt")
    assert (context.history_summary, context.session) == (summary, state.session)
    assert context.pending_question == question


def test_the_default_session_is_the_threads() -> None:
    assert CONFIG.defaults("t9").config.thread_id == "t9"


def test_the_last_step_allowed_is_still_decided() -> None:
    last = CONFIG.max_steps
    moved = decide(waiting(last - 1), completion(last - 1), CONFIG)
    assert of(moved, E.Choose) == [E.Choose(last)]
    assert of(moved, E.ClearDeadline) == [E.ClearDeadline(last - 1)]
    (save,) = of(moved, E.Save)
    assert save.state.steps == tuple(done(n) for n in range(1, last))


def test_a_chosen_step_is_saved_pending_then_timed_and_requested() -> None:
    moved = decide(recorded(1), events.Chosen(AT, "Finalize", False, "evt_9", {}), CONFIG)
    (save,) = of(moved, E.Save)
    assert save.state.pending is not None and save.state.pending.step == 2
    assert of(moved, E.SetDeadline) == [E.SetDeadline(2)]


def test_a_new_cycle_is_stored_as_it_runs() -> None:
    opening = decide(None, arrived(), CONFIG)
    moved = decide(opening.state, events.Answered(AT, "opening", (page(),)), CONFIG)
    (create,) = of(moved, E.Create)
    assert create.state == moved.state
    assert create.state.status == "running" and create.state.route is not None


def test_the_history_read_is_the_configured_length() -> None:
    (ask,) = decide(None, arrived(), config(history_limit=7)).effects
    assert isinstance(ask, E.AskMemory)
    assert [q.limit for q in ask.requests if isinstance(q, HistoryQuery)] == [7]


def test_an_arriving_message_is_read_in_its_own_language() -> None:
    opening = decide(None, arrived("Olá, tudo bem com você?"), CONFIG).state
    assert isinstance(opening, CycleState) and opening.language == "pt"
    waits = decide(None, arrived(owns=False), CONFIG).state
    assert isinstance(waits, CycleState)  # the requeue is carried out for this message


@pytest.mark.parametrize("state", [RELEASED, None])
def test_what_is_no_running_cycle_stays_as_it_is(state: Stored | None) -> None:
    assert decide(state, completion(1), CONFIG).state == state


@pytest.mark.parametrize(
    ("state", "event"),
    [
        (waiting(1), events.Chosen(AT, "Finalize", False, "evt_2", {})),
        (waiting(1), events.Undecided(AT, "no_workers")),
        (fresh(), events.Created(AT, None)),  # stored and echoed already
        (waiting(1), events.Answered(AT, "persona", (session_state(),))),
        (waiting(3), events.StepOverdue(AT, 2)),
    ],
)
def test_an_event_the_cycle_does_not_wait_for_changes_nothing(
    state: CycleState, event: events.Event
) -> None:
    moved = decide(state, event, CONFIG)
    assert kinds(moved) == [E.Note]
    assert moved.state == state.working(now=AT)


def test_a_message_stored_first_elsewhere_is_carried_on_with_the_settings() -> None:
    stored = recorded(CONFIG.max_steps)
    _, carried = run(None, arrived(), answers(opening=page(), created=stored))
    assert E.MarkEnded() in carried  # the last step was taken: the cycle ends


def test_a_dropped_confirmation_is_told_before_the_decision() -> None:
    pending = PendingAction(id="pa_0", kind="delete_all", language="en", asked_in_cycle="cyc_0")
    _, carried = run(None, arrived("what is my name?", pending=pending), answers(opening=page()))
    (notice,) = [
        e.record for e in carried if isinstance(e, E.Post) and e.record.id.endswith(".pending")
    ]
    assert notice.content == i18n.text("pending_dropped", "en")
    assert notice.role == "system" and not notice.chat_history


@pytest.mark.parametrize("language", ["en", "pt"])
def test_a_yes_after_the_runtimes_question_expired_confirms_nothing(language: Language) -> None:
    asked = i18n.text("delete_all_question", language, minutes=10)
    history = [said("user", "delete all", "h1"), said("assistant", asked, "h2")]
    yes = "yes" if language == "en" else "sim"
    state, carried = run(None, arrived(yes), answers(opening=page(*history)))
    assert isinstance(state, CycleState) and state.routed.kind == "expired"
    assert not any(isinstance(e, E.Choose) for e in carried)


def test_a_persona_switch_a_turn_later_is_the_same_reset_once_more() -> None:
    from memoria_contracts.personas import PersonaApplied

    applied = PersonaApplied(seq=1, cycle_id="cyc_0", previous="memoria", turn=0)
    stored = switched().model_copy(update={"persona_applied": applied})
    state, _ = run(None, arrived(), answers(opening=page(session=stored), persona=session_state()))
    assert isinstance(state, CycleState) and state.persona is not None
    reset = state.persona.reset
    assert reset is not None and (reset.turn, reset.previous_name) == (1, "Memoria")
    gone = switched().model_copy(
        update={
            "agent_history": [
                AgentHistoryEntry(seq=1, persona="tutor", previous="retired", at=AT, by="ana")
            ]
        }
    )
    state, _ = run(None, arrived(), answers(opening=page(session=gone), persona=session_state()))
    assert isinstance(state, CycleState) and state.persona is not None
    assert state.persona.reset is not None and state.persona.reset.previous_name == "retired"


def test_the_persona_recorded_leads_to_the_first_step_choice() -> None:
    _, carried = run(
        None, arrived(), answers(opening=page(session=switched()), persona=session_state())
    )
    assert E.Choose(1) in carried


def test_a_failed_step_and_an_overdue_one_are_told_by_name() -> None:
    failed = decide(
        waiting(1, action="MemorySave"),
        completion(1, action="MemorySave", ends=True, status="failed", error="x"),
        CONFIG,
    )
    assert "MemorySave" in str(posted(failed)[0].content)
    overdue = decide(
        waiting(2, tool_call=True, action="MemorySave"), events.StepOverdue(AT, 2), CONFIG
    )
    result, notice = posted(overdue)
    assert (result.id, result.name, result.tool_call_id) == (
        "cyc_1.2.result",
        "MemorySave",
        outputs.call_id("cyc_1", 2),
    )
    assert "MemorySave" in str(notice.content)


def test_a_tool_steps_result_names_its_action() -> None:
    moved = decide(
        waiting(1, tool_call=True, action="MemorySave"), completion(1, action="MemorySave"), CONFIG
    )
    (result,) = posted(moved)[:1]
    assert (result.name, result.role) == ("MemorySave", "tool")


def test_a_choice_is_asked_under_the_step_that_found_it_with_its_contents() -> None:
    choice = UpdateChoice(
        candidates=[ChoiceCandidate(memory_id=f"mem_{n}", content=f"c{n}") for n in (1, 2)],
        content="new",
        content_kind="text",
    )
    moved = decide(waiting(2), completion(2, ends=True, choice=choice), CONFIG)
    (put,) = of(moved, E.PutPending)
    assert [c.content for c in put.action.candidates] == ["c1", "c2"]
    assert put.action.content_kind == "text"
    assert posted(moved)[0].id == "cyc_1.2.reply"


def test_a_question_in_several_messages_is_kept_whole() -> None:
    parts = [
        said("assistant", "I could not find it.", "m1", "cyc_1"),
        said("assistant", "Where do you live?", "m2", "cyc_1"),
    ]
    moved = decide(
        waiting(1, action="Question"),
        completion(1, action="Question", ends=True, messages=parts),
        CONFIG,
    )
    (put,) = of(moved, E.PutPending)
    assert put.action.asked == "I could not find it. Where do you live?"


def test_records_are_the_cycles_in_fixed_shapes() -> None:
    state = fresh().working(now=AT)
    call = outputs.call(state, 3, "MemorySearch").record
    assert (call.id, call.content, call.role, call.chat_history) == (
        "cyc_1.3.call",
        "",
        "assistant",
        True,
    )
    card = outputs.card(state, "1.0", PEANUTS)
    assert (card.id, card.cycle_id, card.created_at) == ("cyc_1.1.0", "cyc_1", AT)
    reply = outputs.reply(state, "hi", step=2).record
    assert (reply.id, reply.role, reply.modal, reply.chat_history) == (
        "cyc_1.2.reply",
        "assistant",
        "text",
        True,
    )


@pytest.mark.parametrize(
    ("arguments", "kept"),
    [
        (None, {}),
        ({}, {}),
        ({"memory_ids": ["mem_1", "mem_2"]}, {"memory_ids": ["mem_1", "mem_2"]}),
        ({"q": "ç" * 140}, {"q": "ç" * 140}),  # 150 characters as JSON, not 850 escaped
    ],
)
def test_small_arguments_are_kept_as_they_are(
    arguments: dict[str, object] | None, kept: dict[str, object]
) -> None:
    assert outputs.compact_arguments(arguments) == kept


def test_big_arguments_are_cut_to_one_line() -> None:
    exact = {"q": "x" * (outputs.ARGUMENTS_CHARS - 9)}  # its JSON is the limit exactly
    assert outputs.compact_arguments(exact) == exact
    big = {"queries": ["x" * 100 for _ in range(10)]}
    cut = outputs.compact_arguments(big)
    assert list(cut) == ["summary"]
    assert len(cut["summary"]) == outputs.ARGUMENTS_CHARS and cut["summary"].endswith("x…")
    assert cut["summary"].startswith('{"queries": ["xxx')


@pytest.mark.parametrize(
    ("said_last", "asked"),
    [
        (i18n.text("delete_all_question", "en", minutes=10), "delete_all"),
        (i18n.text("delete_all_question", "pt", minutes=3), "delete_all"),
        (
            i18n.text("update_choice_question", "pt", content="x", candidates="1. a", minutes=10),
            "choose_update",
        ),
        (i18n.text("forget_choice_question", "en", candidates="1. a", minutes=10), "choose_forget"),
        ("Done.", None),
    ],
)
def test_which_of_the_runtimes_questions_the_thread_ended_on(
    said_last: str, asked: str | None
) -> None:
    history = [said("user", "hi", "h1"), said("assistant", said_last, "h2")]
    tool = outputs.result(fresh().working(now=AT), 1, "MemorySearch", "found 1").record
    card = ChatRecord.memory_card("h4", "cyc_0", PEANUTS)
    assert asked_in([*history, tool, card, said("user", "sim", "h5")]) == asked
    status = said("assistant", said_last, "h3").model_copy(update={"modal": "textForReplace"})
    assert asked_in([status]) is None
    assert asked_in([said("system", said_last, "h6")]) is None
    assert asked_in([]) is None

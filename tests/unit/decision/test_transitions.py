"""The thought cycle's state machine, without Redis: every state a cycle can be stored in,
met by every event that can reach it, redelivered, duplicated and late ones included."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from memoria_contracts.chat import ChatRecord
from memoria_contracts.events import (
    ActionCompleted,
    ActionOutcome,
    ChoiceCandidate,
    CycleEndReason,
    StepRecord,
    UpdateChoice,
)
from memoria_decision.fast_paths import Ending
from memoria_decision.routes import Route
from memoria_decision.state import CycleState, PendingStep
from memoria_decision.transitions import (
    ActionChosen,
    AnnounceEnd,
    AskChoice,
    Completed,
    Decide,
    DecisionFailed,
    Echo,
    Effect,
    EndCycle,
    Event,
    FastPathEnded,
    Ignore,
    Limits,
    NoWorkers,
    PostNotice,
    PostToolRecords,
    PostToolResult,
    Redelivered,
    ReleaseThread,
    RepublishStep,
    RequestStep,
    Routed,
    RouteMessage,
    RunFastPath,
    Started,
    StepOverdue,
    Transition,
    transition,
)

LIMITS = Limits(max_steps=3, step_timeout_s=120.0)
MESSAGE = ChatRecord(
    id="msg_1", cycle_id="cyc_1", chat_history=True, modal="text", role="user", content="hi"
)


def fresh(**changes: Any) -> CycleState:
    """A cycle just stored and echoed: no route, no step."""
    state = CycleState(
        cycle_id="cyc_1",
        user_id="ana",
        thread_id="t1",
        message_id="msg_1",
        trace={},
        language="en",
        original=MESSAGE,
        history=[],
        transcript=[MESSAGE],
        echoed=True,
    )
    return state.model_copy(update=changes)


def done(step: int, action: str = "MemorySearch") -> StepRecord:
    return StepRecord(step=step, action=action, status="ok", summary="found 1")


def waiting(step: int, *, tool_call: bool = False) -> CycleState:
    """Step ``step`` requested, its completion awaited."""
    pending = PendingStep(
        step=step, action="MemorySearch", request_event_id="evt_1", tool_call=tool_call
    )
    return fresh(steps=[done(n) for n in range(1, step)], pending=pending)


def recorded(step: int) -> CycleState:
    """Step ``step`` recorded, nothing done about it yet (the delivery died there)."""
    return fresh(steps=[done(n) for n in range(1, step + 1)])


def ended(*, announced: bool) -> CycleState:
    return fresh(steps=[done(1)], status="ended", end_reason="done", end_announced=announced)


def completion(
    step: int,
    *,
    ends: bool = False,
    status: str = "ok",
    error: str | None = None,
    choice: UpdateChoice | None = None,
    messages: list[ChatRecord] | None = None,
) -> Completed:
    outcome = ActionOutcome(
        status=status,
        ends_cycle=ends,
        summary="found 1",
        error=error,
        choice=choice,
        messages=messages or [],
    )
    return Completed(
        ActionCompleted(step=step, action="MemorySearch", outcome=outcome, worker="w1")
    )


def kinds(effects: list[Effect]) -> list[type]:
    return [type(effect) for effect in effects]


def end_kinds(*, notice: bool) -> list[type]:
    return [*([PostNotice] if notice else []), EndCycle, AnnounceEnd, ReleaseThread]


def ending(moved: Transition) -> EndCycle:
    return next(e for e in moved.effects if isinstance(e, EndCycle))


# -- a new cycle and its redeliveries ------------------------------------------------------


def test_a_new_cycle_is_routed_first() -> None:
    moved = transition(fresh(), Started(), LIMITS)
    assert moved.effects == [RouteMessage()]


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        (fresh(), [RouteMessage]),
        (waiting(2), [RepublishStep]),
        (waiting(2, tool_call=True), [RepublishStep]),
        (recorded(1), [Decide]),
        (recorded(LIMITS.max_steps), end_kinds(notice=True)),
        (ended(announced=False), [AnnounceEnd, ReleaseThread]),
        (ended(announced=True), [ReleaseThread]),
    ],
    ids=["fresh", "waiting", "waiting-tool", "recorded", "recorded-last", "ended", "announced"],
)
def test_a_redelivered_message_carries_on_from_what_its_state_says(
    state: CycleState, expected: list[type]
) -> None:
    moved = transition(state, Redelivered(), LIMITS)
    assert kinds(moved.effects) == expected
    not_echoed = transition(state.model_copy(update={"echoed": False}), Redelivered(), LIMITS)
    assert kinds(not_echoed.effects) == [Echo, *expected]
    assert not_echoed.state.echoed  # saved with whatever the cycle saves next


def test_a_redelivery_after_a_recorded_step_decides_without_saving_it_again() -> None:
    moved = transition(recorded(1), Redelivered(), LIMITS)
    assert moved.effects == [Decide(step=2, recorded=None)]


def test_an_ended_cycle_is_announced_once_and_released_with_the_announcement() -> None:
    moved = transition(ended(announced=False), Redelivered(), LIMITS)
    release = moved.effects[-1]
    assert isinstance(release, ReleaseThread) and release.announced is not None
    assert release.announced.end_announced and moved.state.end_announced
    again = transition(moved.state, Redelivered(), LIMITS)
    assert again.effects == [ReleaseThread(None)]


# -- routing -------------------------------------------------------------------------------


def test_the_model_route_goes_on_to_the_first_decision() -> None:
    moved = transition(fresh(), Routed(Route(kind="model", language="en")), LIMITS)
    assert moved.effects == [Decide(step=1, recorded=None)]


def test_a_fast_route_runs_in_code() -> None:
    route = Route(kind="list_all", language="en")
    moved = transition(fresh(), Routed(route), LIMITS)
    assert moved.effects == [RunFastPath(route)]


@pytest.mark.parametrize("kind", ["model", "list_all"])
def test_a_dropped_pending_action_is_told_before_the_message_is_handled(kind: str) -> None:
    route = Route(kind=kind, language="en", resolves="pa_1", dropped="delete_all")
    moved = transition(fresh(), Routed(route), LIMITS)
    notice = moved.effects[0]
    assert isinstance(notice, PostNotice) and notice.name == "pending"
    assert kinds(moved.effects)[1:] == [Decide if kind == "model" else RunFastPath]


def test_no_step_allowed_ends_a_model_route_at_once() -> None:
    moved = transition(
        fresh(), Routed(Route(kind="model", language="en")), Limits(0, step_timeout_s=1.0)
    )
    assert kinds(moved.effects) == end_kinds(notice=True)
    assert ending(moved).ended.end_reason == "max_steps"


@pytest.mark.parametrize("notice", [None, "The memory service is not answering."])
def test_a_fast_path_ends_the_cycle_with_its_one_step(notice: str | None) -> None:
    step = StepRecord(step=1, action="ListMemories", status="ok", summary="listed 2")
    reason: CycleEndReason = "action_failed" if notice else "done"
    moved = transition(fresh(), FastPathEnded(Ending(step, reason, notice)), LIMITS)
    assert kinds(moved.effects) == end_kinds(notice=notice is not None)
    end = ending(moved)
    assert end.ended.steps == [step] and end.ended.end_reason == reason
    assert end.recorded is None and end.ended.status == "ended"
    assert not end.ended.end_announced  # announced after this save, saved with the release


# -- decisions -----------------------------------------------------------------------------


def test_a_chosen_action_becomes_the_pending_step_and_its_request() -> None:
    spent = {"m": (10, 2)}
    moved = transition(recorded(1), ActionChosen("Finalize", False, "evt_9", spent), LIMITS)
    assert moved.effects == [RequestStep(spent)]
    assert moved.state.pending == PendingStep(
        step=2, action="Finalize", request_event_id="evt_9", tool_call=False
    )


@pytest.mark.parametrize(
    ("event", "reason", "words"),
    [(DecisionFailed("timed out"), "llm_error", "timed out"), (NoWorkers(), "no_workers", "")],
)
def test_no_decision_ends_the_cycle_with_a_notice(event: Event, reason: str, words: str) -> None:
    moved = transition(recorded(1), event, LIMITS)
    assert kinds(moved.effects) == end_kinds(notice=True)
    notice = moved.effects[0]
    assert isinstance(notice, PostNotice) and words in notice.text
    assert ending(moved).ended.end_reason == reason
    assert ending(moved).recorded is None  # saved by the decision's first batch


# -- completions ---------------------------------------------------------------------------


def test_the_awaited_completion_is_recorded_and_leads_to_the_next_decision() -> None:
    kept = ChatRecord(
        id="c.1", cycle_id="cyc_1", chat_history=True, modal="text", role="assistant", content="x"
    )
    shown = kept.model_copy(update={"id": "c.2", "chat_history": False})
    moved = transition(waiting(1), completion(1, messages=[kept, shown]), LIMITS)
    assert moved.effects == [Decide(step=2, recorded=1)]
    assert moved.state.pending is None
    assert moved.state.steps == [done(1)]
    assert moved.state.transcript == [MESSAGE, kept]  # only what the model may read


def test_a_tool_step_posts_its_records_before_anything_else() -> None:
    event = completion(1)
    moved = transition(waiting(1, tool_call=True), event, LIMITS)
    assert moved.effects == [PostToolRecords(event.completed), Decide(step=2, recorded=1)]


def test_the_last_allowed_step_ends_the_cycle_instead_of_deciding() -> None:
    moved = transition(waiting(LIMITS.max_steps), completion(LIMITS.max_steps), LIMITS)
    assert kinds(moved.effects) == end_kinds(notice=True)
    assert ending(moved).ended.end_reason == "max_steps"
    assert ending(moved).recorded == LIMITS.max_steps


def test_a_step_that_ends_the_cycle_ends_it_saving_the_step() -> None:
    moved = transition(waiting(1), completion(1, ends=True), LIMITS)
    assert kinds(moved.effects) == end_kinds(notice=False)
    end = ending(moved)
    assert end.recorded == 1 and end.ended.steps == [done(1)]
    assert end.ended.end_reason == "done" and end.ended.pending is None


def test_a_failed_final_step_ends_with_what_failed() -> None:
    moved = transition(waiting(1), completion(1, ends=True, status="failed", error="boom"), LIMITS)
    assert kinds(moved.effects) == end_kinds(notice=True)
    notice = moved.effects[0]
    assert isinstance(notice, PostNotice) and "boom" in notice.text
    assert ending(moved).ended.end_reason == "action_failed"


def test_a_step_that_needs_a_choice_asks_it_then_ends() -> None:
    choice = UpdateChoice(
        candidates=[ChoiceCandidate(memory_id=f"mem_{n}", content=f"c{n}") for n in (1, 2)],
        content="new",
    )
    moved = transition(waiting(1), completion(1, ends=True, choice=choice), LIMITS)
    assert kinds(moved.effects) == [AskChoice, *end_kinds(notice=False)]
    ask = moved.effects[0]
    assert isinstance(ask, AskChoice) and ask.step == 1 and ask.choice == choice
    assert [c.memory_id for c in ask.candidates] == ["mem_1", "mem_2"]


def test_the_previous_steps_completion_again_republishes_the_pending_request() -> None:
    moved = transition(waiting(2), completion(1), LIMITS)
    assert moved.effects == [RepublishStep()]


@pytest.mark.parametrize("ends", [False, True])
def test_a_completion_recorded_by_a_delivery_that_died_is_acted_on_unsaved_no_more(
    ends: bool,
) -> None:
    moved = transition(recorded(1), completion(1, ends=ends), LIMITS)
    if ends:
        assert kinds(moved.effects) == end_kinds(notice=False)
        assert ending(moved).recorded is None and ending(moved).ended.steps == [done(1)]
    else:
        assert moved.effects == [Decide(step=2, recorded=None)]


@pytest.mark.parametrize(
    ("state", "step"),
    [(waiting(3), 1), (waiting(2), 5), (recorded(2), 1), (fresh(), 1), (recorded(1), 2)],
    ids=["older", "future", "before-recorded", "no-step-yet", "not-requested"],
)
def test_a_stale_completion_is_ignored(state: CycleState, step: int) -> None:
    moved = transition(state, completion(step), LIMITS)
    assert kinds(moved.effects) == [Ignore]
    assert moved.state == state


@pytest.mark.parametrize("announced", [False, True])
def test_a_late_completion_of_an_ended_cycle_only_makes_sure_of_the_release(
    announced: bool,
) -> None:
    moved = transition(ended(announced=announced), completion(1, ends=True), LIMITS)
    expected = [ReleaseThread] if announced else [AnnounceEnd, ReleaseThread]
    assert kinds(moved.effects) == expected


def test_a_duplicate_final_completion_announces_nothing_again() -> None:
    first = transition(waiting(1), completion(1, ends=True), LIMITS)
    again = transition(first.state, completion(1, ends=True), LIMITS)
    assert again.effects == [ReleaseThread(None)]


def test_a_duplicate_completion_saved_before_the_decision_decides_the_same_step() -> None:
    first = transition(waiting(1), completion(1), LIMITS)
    again = transition(first.state, completion(1), LIMITS)
    assert first.effects == [Decide(step=2, recorded=1)]
    assert again.effects == [Decide(step=2, recorded=None)]
    assert again.state.steps == first.state.steps  # recorded once


# -- timeouts ------------------------------------------------------------------------------


@pytest.mark.parametrize("tool_call", [False, True])
def test_an_overdue_step_fails_and_ends_the_cycle(tool_call: bool) -> None:
    moved = transition(waiting(2, tool_call=tool_call), StepOverdue(2), LIMITS)
    results = [PostToolResult] if tool_call else []
    assert kinds(moved.effects) == [*results, *end_kinds(notice=True)]
    end = ending(moved)
    assert end.ended.end_reason == "step_timeout" and end.recorded is None
    assert end.ended.steps[-1] == StepRecord(
        step=2, action="MemorySearch", status="failed", summary="timed out"
    )
    notice = next(e for e in moved.effects if isinstance(e, PostNotice))
    assert "120s" in notice.text


@pytest.mark.parametrize(
    "state",
    [waiting(3), recorded(2), fresh(), ended(announced=False), ended(announced=True)],
    ids=["other-step", "recorded", "fresh", "ended", "announced"],
)
def test_a_deadline_of_a_step_no_longer_awaited_is_ignored(state: CycleState) -> None:
    moved = transition(state, StepOverdue(2), LIMITS)
    assert kinds(moved.effects) == [Ignore]
    assert moved.state == state


# -- what holds for every pair -------------------------------------------------------------

STATES = {
    "fresh": fresh(),
    "not-echoed": fresh(echoed=False),
    "waiting": waiting(2),
    "waiting-tool": waiting(2, tool_call=True),
    "waiting-last": waiting(LIMITS.max_steps),
    "recorded": recorded(1),
    "recorded-last": recorded(LIMITS.max_steps),
    "ended": ended(announced=False),
    "announced": ended(announced=True),
}
EVENTS: dict[str, Event] = {
    "started": Started(),
    "redelivered": Redelivered(),
    "completed-1": completion(1),
    "completed-2": completion(2),
    "completed-2-final": completion(2, ends=True),
    "completed-last": completion(LIMITS.max_steps),
    "overdue-1": StepOverdue(1),
    "overdue-2": StepOverdue(2),
    "routed-model": Routed(Route(kind="model", language="en")),
    "routed-fast": Routed(Route(kind="cancel", language="en")),
    "fast-path-ended": FastPathEnded(
        Ending(StepRecord(step=1, action="Cancel", status="ok", summary="nothing to cancel"))
    ),
    "chosen": ActionChosen("Finalize", False, "evt_2", {}),
    "decision-failed": DecisionFailed("down"),
    "no-workers": NoWorkers(),
}
LEADS_ON = (RouteMessage, RunFastPath, Decide)


@pytest.mark.parametrize(("state_name", "event_name"), list(itertools.product(STATES, EVENTS)))
def test_every_transition_is_pure_and_well_ordered(state_name: str, event_name: str) -> None:
    state, event = STATES[state_name], EVENTS[event_name]
    before = state.model_dump()
    moved = transition(state, event, LIMITS)
    assert state.model_dump() == before  # the input is never changed
    assert transition(state, event, LIMITS) == moved  # and the same input, the same answer
    effects = moved.effects
    assert effects, "every event leads somewhere, if only to being ignored"
    # What leads to another event comes last, and alone of its kind.
    for effect in effects[:-1]:
        assert not isinstance(effect, LEADS_ON)
    # An ending is saved, then announced (unless it was), then released, nothing after.
    if any(isinstance(e, EndCycle) for e in effects):
        tail = kinds(effects)[kinds(effects).index(EndCycle) :]
        assert tail == [EndCycle, AnnounceEnd, ReleaseThread]
    if isinstance(effects[-1], ReleaseThread):
        assert moved.state.status == "ended" and moved.state.end_announced
        assert moved.state.pending is None
    # Nothing runs the cycle on once it ended.
    if state.status == "ended":
        assert not any(isinstance(e, (*LEADS_ON, RequestStep, RepublishStep)) for e in effects)

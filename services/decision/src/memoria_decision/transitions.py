"""The thought cycle as a state machine: (cycle state, event) → (next state, effects).

:func:`transition` is pure: no Redis, no clock, no model. It says what an event means for a
cycle and what must be done about it; :mod:`memoria_decision.cycle` does it (and decides how
to batch it). Read it as the cycle's story:

* A message's cycle exists already (a redelivery): echo the message if that never happened,
  then carry on from what the state says happened last (:func:`_resume`).
* A cycle without steps is first **routed** (:class:`RouteMessage`): a fast path runs in code
  and ends the cycle (:class:`FastPathEnded`); the model route goes on to a decision.
* A **decision** (:class:`Decide`) asks the model for the next action, unless the cycle has
  taken all its steps. What it chose (:class:`ActionChosen`) becomes the pending step and its
  request; a failed model or no workers end the cycle.
* An **action completed**: the pending step's completion is recorded and leads to the end or
  to the next decision; an earlier one is answered by republishing the pending request (the
  worker may have missed it); the last recorded step's, again, carries on from its outcome (the
  delivery that recorded it died before acting on it); anything else is stale.
* A **step overdue**: the step still pending fails and ends the cycle.
* An **ended** cycle, whatever comes: announce its end if that never happened, and release
  the thread (the release is idempotent).

Ending is three effects in order: save the ended state (:class:`EndCycle`), announce it
(:class:`AnnounceEnd`), release the thread with the announced state (:class:`ReleaseThread`).
Effects that lead to another event (routing, a fast path, a decision) come last.
"""

from __future__ import annotations

from dataclasses import dataclass

from memoria_contracts.events import ActionCompleted, CycleEndReason, StepRecord, UpdateChoice
from memoria_decision.fast_paths import Ending
from memoria_decision.pending import PendingKind, UpdateCandidate
from memoria_decision.routes import Route
from memoria_decision.state import CycleState, PendingStep
from memoria_runtime import i18n

DROPPED_NOTICES: dict[PendingKind, str] = {
    "delete_all": "pending_dropped",
    "choose_update": "update_choice_dropped",
    "choose_forget": "forget_choice_dropped",
}


@dataclass(frozen=True)
class Limits:
    """The settings the machine reads."""

    max_steps: int
    step_timeout_s: float


# -- events --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Started:
    """A new cycle stored, its message echoed."""


@dataclass(frozen=True)
class Redelivered:
    """The user's message again, its cycle already stored."""


@dataclass(frozen=True)
class Completed:
    """A worker's ``action.completed`` for this cycle."""

    completed: ActionCompleted


@dataclass(frozen=True)
class StepOverdue:
    """The deadline of ``step`` passed (and this replica claimed it)."""

    step: int


@dataclass(frozen=True)
class Routed:
    """The cycle's route, decided from the message and the thread's pending action."""

    route: Route


@dataclass(frozen=True)
class FastPathEnded:
    ending: Ending


@dataclass(frozen=True)
class ActionChosen:
    """The model named the next action; ``request_event_id`` is its request's envelope id."""

    action: str
    tool_call: bool
    request_event_id: str
    spent: dict[str, tuple[int, int]]
    """The decision's tokens by model, added to the cycle's usage with the step."""


@dataclass(frozen=True)
class DecisionFailed:
    detail: str


@dataclass(frozen=True)
class NoWorkers:
    """No worker advertised any action, even after waiting for one."""


Event = (
    Started
    | Redelivered
    | Completed
    | StepOverdue
    | Routed
    | FastPathEnded
    | ActionChosen
    | DecisionFailed
    | NoWorkers
)

# -- effects -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Echo:
    """The user's message on ``chat.out`` (every socket shows it, the history stores it)."""


@dataclass(frozen=True)
class PostNotice:
    """A system line kept in the thread, not shown to the model."""

    name: str
    text: str


@dataclass(frozen=True)
class PostToolRecords:
    """A completed step's call (with the arguments the worker worked out) and its result."""

    completed: ActionCompleted


@dataclass(frozen=True)
class PostToolResult:
    step: int
    action: str
    status: str
    summary: str


@dataclass(frozen=True)
class AskChoice:
    """Ask which memory an update meant; the question becomes the thread's pending action."""

    candidates: list[UpdateCandidate]
    choice: UpdateChoice
    step: int


@dataclass(frozen=True)
class RouteMessage:
    """Decide the route of the cycle (→ :class:`Routed`)."""


@dataclass(frozen=True)
class RunFastPath:
    """Run a route that needs no model (→ :class:`FastPathEnded`)."""

    route: Route


@dataclass(frozen=True)
class Decide:
    """Save the step just recorded, if any (``recorded``, its deadline cleared), and ask the
    model for the next action (→ :class:`ActionChosen`, :class:`DecisionFailed` or
    :class:`NoWorkers`)."""

    step: int
    recorded: int | None


@dataclass(frozen=True)
class RequestStep:
    """Save the state with its pending step, set the step's deadline, publish its request."""

    spent: dict[str, tuple[int, int]]


@dataclass(frozen=True)
class RepublishStep:
    """Publish the pending step's request again (workers drop a duplicate)."""


@dataclass(frozen=True)
class EndCycle:
    """Mark the cycle ended (workers' steps stop) and save ``ended``; ``recorded``: a step
    recorded in it whose deadline is still set."""

    ended: CycleState
    recorded: int | None


@dataclass(frozen=True)
class AnnounceEnd:
    """``cycle.ended`` on ``chat.out``, with the cycle's usage."""


@dataclass(frozen=True)
class ReleaseThread:
    """Release the thread to its next message, saving ``announced`` in the same atomic step
    (None: the end was announced and saved before)."""

    announced: CycleState | None


@dataclass(frozen=True)
class Ignore:
    """Nothing to do; ``why`` is logged."""

    why: str


Effect = (
    Echo
    | PostNotice
    | PostToolRecords
    | PostToolResult
    | AskChoice
    | RouteMessage
    | RunFastPath
    | Decide
    | RequestStep
    | RepublishStep
    | EndCycle
    | AnnounceEnd
    | ReleaseThread
    | Ignore
)


@dataclass(frozen=True)
class Transition:
    state: CycleState
    effects: list[Effect]


def transition(state: CycleState, event: Event, limits: Limits) -> Transition:
    """What ``event`` does to the cycle in ``state``. ``state`` is left unchanged."""
    if state.status == "ended" and not isinstance(event, Redelivered | StepOverdue):
        return _released(state)  # a late or repeated event: make sure the thread was released
    match event:
        case Started():
            return _resume(state, limits)
        case Redelivered():
            return _redelivered(state, limits)
        case Completed(completed):
            return _completed(state, completed, limits)
        case StepOverdue(step):
            return _overdue(state, step, limits)
        case Routed(route):
            return _routed(state, route, limits)
        case FastPathEnded(ending):
            return _end(_with_step(state, ending.step), ending.reason, ending.notice)
        case ActionChosen(action, tool_call, request_event_id, spent):
            pending = PendingStep(
                step=state.next_step,
                action=action,
                request_event_id=request_event_id,
                tool_call=tool_call,
            )
            return Transition(state.model_copy(update={"pending": pending}), [RequestStep(spent)])
        case DecisionFailed(detail):
            return _end(state, "llm_error", i18n.text("llm_error", state.language, detail=detail))
        case NoWorkers():
            return _end(state, "no_workers", i18n.text("no_workers", state.language))


def _redelivered(state: CycleState, limits: Limits) -> Transition:
    """The echo is saved with the cycle's next state, not on its own: a crash before that
    echoes again, with the same id (a replacement)."""
    if state.echoed:
        return _resume(state, limits)
    resumed = _resume(state.model_copy(update={"echoed": True}), limits)
    return Transition(resumed.state, [Echo(), *resumed.effects])


def _resume(state: CycleState, limits: Limits) -> Transition:
    """Carry on from whatever the state says happened last."""
    if state.status == "ended":
        return _released(state)
    if state.pending is not None:
        return Transition(state, [RepublishStep()])
    if not state.steps:
        return Transition(state, [RouteMessage()])
    return _next_decision(state, limits, recorded=None)


def _routed(state: CycleState, route: Route, limits: Limits) -> Transition:
    effects: list[Effect] = []
    if route.dropped is not None:
        effects.append(
            PostNotice("pending", i18n.text(DROPPED_NOTICES[route.dropped], state.language))
        )
    if route.kind != "model":
        return Transition(state, [*effects, RunFastPath(route)])
    decided = _next_decision(state, limits, recorded=None)
    return Transition(decided.state, [*effects, *decided.effects])


def _completed(state: CycleState, completed: ActionCompleted, limits: Limits) -> Transition:
    pending = state.pending
    if pending is not None and pending.step == completed.step:
        # Saved (and its deadline cleared) with the first write of what it leads to.
        records: list[Effect] = [PostToolRecords(completed)] if pending.tool_call else []
        after = _after_step(_recorded(state, completed), completed, limits, recorded=completed.step)
        return Transition(after.state, [*records, *after.effects])
    if pending is not None and pending.step == completed.step + 1:
        return Transition(state, [RepublishStep()])
    if pending is None and state.steps and state.steps[-1].step == completed.step:
        # The delivery that recorded this step died before acting on it: carry on from its
        # outcome, which may be the end (deciding again there would run a second Finalize).
        return _after_step(state, completed, limits, recorded=None)
    return Transition(state, [Ignore(f"stale completion of step {completed.step}")])


def _after_step(
    state: CycleState, completed: ActionCompleted, limits: Limits, *, recorded: int | None
) -> Transition:
    """What a recorded step leads to: the end of the cycle, or the next decision."""
    outcome = completed.outcome
    if outcome.ends_cycle and outcome.status == "failed":
        notice = i18n.text(
            "action_failed", state.language, action=completed.action, detail=outcome.error
        )
        return _end(state, "action_failed", notice, recorded=recorded)
    if outcome.ends_cycle and outcome.choice is not None:
        # An update that needs the user to say which memory: asked in fixed words, and kept
        # as the thread's pending action for the next message.
        candidates = [
            UpdateCandidate(memory_id=c.memory_id, content=c.content)
            for c in outcome.choice.candidates
        ]
        ended = _end(state, "done", recorded=recorded)
        ask = AskChoice(candidates, outcome.choice, completed.step)
        return Transition(ended.state, [ask, *ended.effects])
    if outcome.ends_cycle:
        return _end(state, "done", recorded=recorded)
    return _next_decision(state, limits, recorded=recorded)


def _next_decision(state: CycleState, limits: Limits, *, recorded: int | None) -> Transition:
    step = state.next_step
    if step > limits.max_steps:
        notice = i18n.text("max_steps", state.language, steps=limits.max_steps)
        return _end(state, "max_steps", notice, recorded=recorded)
    return Transition(state, [Decide(step, recorded)])


def _overdue(state: CycleState, step: int, limits: Limits) -> Transition:
    pending = state.pending
    if state.status == "ended" or pending is None or pending.step != step:
        return Transition(state, [Ignore(f"step {step} is not pending")])
    # The result goes in the history before the step is recorded: a crash in between
    # publishes it again, with the same id.
    result: list[Effect] = (
        [PostToolResult(step, pending.action, "failed", "timed out")] if pending.tool_call else []
    )
    failed = StepRecord(step=step, action=pending.action, status="failed", summary="timed out")
    notice = i18n.text(
        "step_timeout", state.language, action=pending.action, seconds=limits.step_timeout_s
    )
    ended = _end(_with_step(state, failed), "step_timeout", notice)
    return Transition(ended.state, [*result, *ended.effects])


def _end(
    state: CycleState,
    reason: CycleEndReason,
    notice: str | None = None,
    *,
    recorded: int | None = None,
) -> Transition:
    ended = state.model_copy(update={"status": "ended", "end_reason": reason, "pending": None})
    released = _released(ended)
    notices: list[Effect] = [PostNotice("end", notice)] if notice else []
    return Transition(released.state, [*notices, EndCycle(ended, recorded), *released.effects])


def _released(state: CycleState) -> Transition:
    """An ended cycle: its end announced (once: the announcement is saved with the release,
    so a crash before it announces again and never releases without having announced)."""
    if state.end_announced:
        return Transition(state, [ReleaseThread(None)])
    announced = state.model_copy(update={"end_announced": True})
    return Transition(announced, [AnnounceEnd(), ReleaseThread(announced)])


def _recorded(state: CycleState, completed: ActionCompleted) -> CycleState:
    outcome = completed.outcome
    record = StepRecord(
        step=completed.step,
        action=completed.action,
        status=outcome.status,
        summary=outcome.error or outcome.summary,
    )
    kept = [m for m in outcome.messages if m.chat_history]
    return state.model_copy(
        update={
            "steps": [*state.steps, record],
            "transcript": [*state.transcript, *kept],
            "pending": None,
        }
    )


def _with_step(state: CycleState, step: StepRecord) -> CycleState:
    return state.model_copy(update={"steps": [*state.steps, step]})

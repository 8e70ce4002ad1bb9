"""The thought cycle: ``decide(state, event) → (next state, effects)``, every decision and no
I/O (no Redis, no clock, no model). The shell (:mod:`memoria_decision.executor`) carries the
effects out in order and hands back what they found as the next event. Read top to bottom:

1. **A message arrives** (:func:`_arrived`): its thread busy, it waits behind; else the
   thread's history, summary and session config are read.
2. **The cycle begins** (:func:`_begin`): language, persona (and the reset due after a
   switch), **route** (:mod:`.routes`: a fast path, or the model, told whether the message
   answers the assistant's last question), memories recalled with the message; then it is
   stored, the message echoed, the pending action it answered cleared.
3. A **fast path** (:mod:`.fast_paths`): memory requests and fixed replies, one step.
4. A **decision** (:func:`_decide`): ``Thinking…``, the persona switch recorded on the first,
   the model's choice, which becomes the pending step and its request.
5. **An action completed** (:func:`_completed`): the step recorded, leading to the next
   decision or to the end, with what the user is left to answer. **Overdue**, it fails.
6. **The end** (:mod:`.outputs`): announced once, the thread released; a late or repeated
   event of an ended cycle changes nothing.
"""

from __future__ import annotations

from typing import Final

from memoria_contracts.chat import CardInfo, ChatRecord
from memoria_contracts.events import ActionCompleted, HistoryPage, HistoryQuery, StepRecord
from memoria_contracts.memory import MAX_BINDING_CHARS, MemoryFound, MemorySearch, near_the_best
from memoria_contracts.personas import ActivePersona, PersonaReset, detect_switch
from memoria_contracts.session import SessionConfigGet, SessionConfigState, SessionPersonaApplied
from memoria_decision.core import effects, events, fast_paths, outputs
from memoria_decision.core.routes import asked_in, route_for
from memoria_decision.core.state import (
    Config,
    CycleState,
    PendingStep,
    Stored,
    UpdateCandidate,
    Work,
)
from memoria_llm.conversation import bounded_summary
from memoria_text import i18n

Transition = effects.Transition
QUESTION_ACTION: Final = "Question"  # ends a cycle asking the user: its question stays pending
RECALL_STEP: Final = 0  # recalled memories are cards <cycle>.0.<n>, a step before the first
DROPPED: Final = {
    "delete_all": "pending_dropped",
    "choose_update": "update_choice_dropped",
    "choose_forget": "forget_choice_dropped",
}


def decide(state: Stored | None, event: events.Event, config: Config) -> Transition:
    """What ``event`` does to the cycle in ``state`` (None: none was stored)."""
    if isinstance(event, events.Arrived):
        return _arrived(event, config)
    if not isinstance(state, CycleState):
        return Transition(state, (effects.Note(f"no running cycle for {type(event).__name__}"),))
    state = state.working(now=event.at)
    if state.status == "ended" and not isinstance(event, events.Redelivered | events.StepOverdue):
        return outputs.released(state)  # a late or repeated event: was the thread released?
    opening, running = state.status == "opening", state.status == "running"
    idle = running and state.pending is None  # between steps: what a decision may lead to
    match event:
        case events.Redelivered() if not opening:
            return _redelivered(state, config)
        case events.Answered(purpose="opening", replies=(reply,)) if opening:
            return _opened(state, reply, config)
        case events.Answered(purpose="session", replies=(reply,)) if opening:
            stored = (
                reply if isinstance(reply, SessionConfigState) else config.defaults(state.thread_id)
            )
            return _begin(state, stored, config)
        case events.Answered(purpose="recall", replies=(reply,)) if opening:
            return _create(
                state.but(transcript=(*state.transcript, *_recalled(state, reply, config)))
            )
        case events.Answered(purpose="persona", replies=(reply,)) if idle:
            # Unrecorded, the reset still applies; the next cycle detects the switch again.
            chose = Transition(state.but(persona_recorded=True), (effects.Choose(state.next_step),))
            return chose.after(*_note(reply, "persona switch not recorded"))
        case events.Answered() if idle and not state.steps and state.routed.kind != "model":
            return fast_paths.answered(state, event, config)
        case events.Created(stored=None) if running and not state.echoed:
            return _created(state, config)
        case events.Created(stored=stored) if running and not state.echoed:
            return decide(stored, events.Redelivered(event.at), config)
        case events.Chosen() if idle:
            return _chosen(state, event)
        case events.Undecided(reason=reason, detail=detail, spent=spent) if idle:
            return outputs.end(state.spending(spent), reason, state.text(reason, detail=detail))
        case events.Completed(completed=completed) if not opening:
            return _completed(state, completed, config)
        case events.StepOverdue(step=step) if not opening:
            return _overdue(state, step, config)
    return Transition(state, (effects.Note(f"unexpected {type(event).__name__}"),))


# -- 1. a message arrives ---------------------------------------------------------------------


def _arrived(event: events.Arrived, config: Config) -> Transition:
    message = event.message
    state = CycleState(
        cycle_id=message.cycle_id or message.id,
        user_id=event.user_id,
        thread_id=event.thread_id,
        message_id=message.id,
        trace=event.trace,
        language=i18n.detect_language(str(message.content)),
        original=message,
        started_at=event.at,
        status="opening",
        transcript=(message,),
        work=Work(pending=event.pending, lock_fresh=True),
    )
    if not event.owns:  # only after a lock expired: another cycle runs, it waits behind it
        return Transition(state, (effects.Note("thread busy"), effects.Requeue(event.framed)))
    query = HistoryQuery(
        limit=config.history_limit, exclude_cycle_id=state.cycle_id, summary=True, session=True
    )
    return Transition(state, (effects.AskMemory("opening", (query,)),))


def _opened(state: CycleState, reply: events.Reply, config: Config) -> Transition:
    """The history read: on to the beginning, asking for the session config on its own when
    the answer lacks it. Unanswered, the cycle goes on without the history (and says so); a
    timeout is not followed by another request (the user would wait as long again)."""
    if isinstance(reply, HistoryPage):
        summary = bounded_summary(reply.summary, config.summary_chars)
        read = state.but(history=tuple(reply.messages), history_summary=summary)
        if reply.session is not None:
            return _begin(read, reply.session, config)
        return Transition(read, (_ask_session(read),))
    missing = state.working(history_missing=True)
    notes = _note(reply, "no history from the memory service")
    if isinstance(reply, events.Unanswered) and reply.timeout:
        return _begin(missing, config.defaults(state.thread_id), config).after(*notes)
    return Transition(missing, (*notes, _ask_session(missing)))


def _ask_session(state: CycleState) -> effects.AskMemory:
    get = SessionConfigGet(thread_id=state.thread_id, defaults_if_missing=True)
    return effects.AskMemory("session", (get,))


# -- 2. the cycle begins ----------------------------------------------------------------------


def _begin(state: CycleState, stored: SessionConfigState, config: Config) -> Transition:
    """Language (from the message; when it does not tell, from the user's earlier ones),
    persona and route; then the memories recalled with the message, or the cycle stored."""
    message = str(state.original.content)
    earlier = (str(r.content) for r in reversed(state.history) if r.role == "user")
    language = i18n.detect_language(message, earlier)
    route = route_for(message, state.work.pending, language, asked=asked_in(state.history))
    found = detect_switch(stored.agent_history, stored.persona_applied, state.cycle_id)
    session, wanted = stored.config, stored.config.persona
    persona = config.personas.get(wanted) or config.personas[config.default_persona]
    reset = None
    if found.seq is not None and found.previous is not None and found.turn is not None:
        previous = config.personas.get(found.previous)
        reset = PersonaReset(
            seq=found.seq,
            previous_id=found.previous,
            previous_name=previous.name if previous else found.previous,
            turn=found.turn,
        )
    begun = state.but(
        language=route.language,
        session=session,
        persona=ActivePersona(persona=persona, reset=reset),
        persona_record=found.record,
        route=route,
    )
    query = " ".join(message.split())[:MAX_BINDING_CHARS]
    if route.kind != "model" or not session.proactive_retrieval or not query:
        return _create(begun)
    search = MemorySearch(
        mode="semantic",
        queries=[query],
        limit=session.memory_limit,
        min_relevance=session.memory_min_relevance,
    )
    return Transition(begun, (effects.AskMemory("recall", (search,)),))


def _recalled(state: CycleState, reply: events.Reply, config: Config) -> list[ChatRecord]:
    """The memories recalled with the message as cards, best first: those near the best
    match (a memory far below it answers the message less than the cards around it)."""
    found = reply.memories if isinstance(reply, MemoryFound) else []
    near = near_the_best(found, config.relative_relevance)
    notes = CardInfo.found_in_order(len(near))
    return [
        outputs.card(state, f"{RECALL_STEP}.{n}", memory, note)
        for n, (memory, note) in enumerate(zip(near, notes, strict=True), 1)
    ]


def _create(state: CycleState) -> Transition:
    running = state.but(status="running")
    return Transition(running, (effects.Create(running),))


def _created(state: CycleState, config: Config) -> Transition:
    """Stored: the message echoed (saved as echoed with the next state), memories shown."""
    shown = [effects.Post(record) for record in state.transcript]
    if state.work.history_missing:
        shown.append(outputs.notice(state, "history", state.text("history_unavailable")))
    return _route(state.but(echoed=True), config).after(*shown)


def _route(state: CycleState, config: Config) -> Transition:
    """The pending action answered cleared (a redelivery clears it again), then the route."""
    route = state.routed
    first: list[effects.Effect] = []
    if route.resolves is not None:
        first.append(effects.ClearPending(route.resolves))
    if route.dropped is not None:
        first.append(outputs.notice(state, "pending", state.text(DROPPED[route.dropped])))
    if route.kind == "model":
        return _decide(state, config, recorded=None).after(*first)
    return fast_paths.start(state, route, config).after(*first)


def _redelivered(state: CycleState, config: Config) -> Transition:
    """Carry on from what the state says happened last; echo the message if that never did."""
    echo = () if state.echoed else (effects.Post(state.original),)
    state = state.but(echoed=True)
    if state.status == "ended":
        return outputs.released(state).after(*echo)
    if state.pending is not None:
        return Transition(state, (*echo, *_request(state)))
    if not state.steps:
        return _route(state, config).after(*echo)
    return _decide(state, config, recorded=None).after(*echo)


# -- 4. decisions -----------------------------------------------------------------------------


def _decide(state: CycleState, config: Config, *, recorded: int | None) -> Transition:
    """The next decision, unless the cycle took all its steps. ``recorded``: the step just
    recorded, saved first (and its deadline cleared: a slow decision would time it out)."""
    step = state.next_step
    if step > config.max_steps:
        text = state.text("max_steps", steps=config.max_steps)
        return outputs.end(state, "max_steps", text, recorded=recorded, derived=True)
    saved = (effects.ClearDeadline(recorded), effects.Save(state)) if recorded is not None else ()
    refresh = () if state.work.lock_fresh else (effects.RefreshLock(),)
    then: effects.Effect = effects.Choose(step)
    if state.persona_record is not None and not state.persona_recorded:
        # The cycle's first prompt uses up the switch it applies.
        applied = SessionPersonaApplied(thread_id=state.thread_id, applied=state.persona_record)
        then = effects.AskMemory("persona", (applied,))
    return Transition(state, (*saved, *refresh, outputs.status(state, step, "thinking"), then))


def _chosen(state: CycleState, event: events.Chosen) -> Transition:
    """The chosen action becomes the pending step, saved before its deadline and request."""
    pending = PendingStep(
        step=state.next_step,
        action=event.action,
        request_event_id=event.request_event_id,
        tool_call=event.tool_call,
    )
    waiting = state.but(pending=pending).spending(event.spent)
    return Transition(waiting, (effects.Save(waiting), *_request(waiting)))


def _request(state: CycleState) -> tuple[effects.Effect, ...]:
    """The pending step's deadline, call record (same id: a replacement) and request."""
    step = state.pending
    if step is None:
        return ()
    called = (outputs.call(state, step.step, step.action),) if step.tool_call else ()
    return (effects.SetDeadline(step.step), *called, effects.RequestAction())


# -- 5. steps completed, and overdue ----------------------------------------------------------


def _completed(state: CycleState, completed: ActionCompleted, config: Config) -> Transition:
    """The awaited step: its records posted before it is recorded (fixed ids: posted again,
    the same, if the process dies before saving), then what it leads to. The previous
    step's completion: its request may have been missed, so it is published again. The last
    recorded step's: the delivery that recorded it died before acting on it, and its outcome
    may be the end (deciding again there would run a second Finalize)."""
    pending, outcome, step = state.pending, completed.outcome, completed.step
    if pending is not None and pending.step == step:
        records: list[effects.Effect] = []
        if pending.tool_call and outcome.arguments:
            records.append(outputs.call(state, step, completed.action, outcome.arguments))
        summary = outcome.error or outcome.summary
        if pending.tool_call:
            said = summary if outcome.status == "ok" else f"failed: {summary}"
            records.append(outputs.result(state, step, completed.action, said))
        record = StepRecord(
            step=step, action=completed.action, status=outcome.status, summary=summary
        )
        kept = (m for m in outcome.messages if m.chat_history)
        recorded = state.but(
            steps=(*state.steps, record), transcript=(*state.transcript, *kept), pending=None
        ).spending(completed.tokens)
        return _after_step(recorded, completed, config, recorded=step).after(*records)
    if pending is not None and pending.step == step + 1:
        return Transition(state, _request(state))
    if pending is None and state.steps and state.steps[-1].step == step:
        return _after_step(state, completed, config, recorded=None)
    return Transition(state, (effects.Note(f"stale completion of step {step}"),))


def _after_step(
    state: CycleState, completed: ActionCompleted, config: Config, *, recorded: int | None
) -> Transition:
    """The next decision, or the end, with what the user is left to answer: which memory an
    update meant (asked in fixed words), or the question the cycle ended with."""
    outcome = completed.outcome
    if not outcome.ends_cycle:
        return _decide(state, config, recorded=recorded)
    if outcome.status == "failed":
        text = state.text("action_failed", action=completed.action, detail=outcome.error)
        return outputs.end(state, "action_failed", text, recorded=recorded, derived=True)
    asked: tuple[effects.Effect, ...] = ()
    if outcome.choice is not None:
        choice = outcome.choice
        candidates = [
            UpdateCandidate(memory_id=c.memory_id, content=c.content) for c in choice.candidates
        ]
        asked = fast_paths.ask_choice(
            state, "choose_update", candidates, config, step=completed.step, update=choice
        )
    elif completed.action == QUESTION_ACTION:
        said = " ".join(str(m.content) for m in outcome.messages if m.role == "assistant")
        said = said or outcome.summary
        question = state.asking("question", content=str(state.original.content), asked=said)
        asked = (effects.PutPending(question),)
    return outputs.end(state, "done", recorded=recorded, before=asked, derived=True)


def _overdue(state: CycleState, step: int, config: Config) -> Transition:
    """The step still awaited fails and ends the cycle; its result goes in the history first
    (a crash in between publishes it again, with the same id)."""
    pending = state.pending
    if pending is None or pending.step != step:  # an ended cycle has none
        return Transition(state, (effects.Note(f"step {step} is not pending"),))
    failed = StepRecord(step=step, action=pending.action, status="failed", summary="timed out")
    result = outputs.result(state, step, pending.action, "failed: timed out")
    seconds = config.step_timeout_s
    text = state.text("step_timeout", action=pending.action, seconds=seconds)
    before = (result,) if pending.tool_call else ()
    return outputs.end(outputs.with_step(state, failed), "step_timeout", text, before=before)


def _note(reply: events.Reply, what: str) -> tuple[effects.Effect, ...]:
    if isinstance(reply, HistoryPage | SessionConfigState):
        return ()
    detail = reply.detail if isinstance(reply, events.Unanswered) else type(reply).__name__
    return (effects.Note(f"{what}: {detail}"),)

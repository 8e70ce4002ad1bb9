"""Cycles as decision's core sees them, built without Redis: states, events, and a driver that
feeds a transition's outcome back as the shell would (with replies the test gives)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from memoria_contracts.chat import ChatRecord
from memoria_contracts.events import (
    ActionCompleted,
    ActionOutcome,
    HistoryPage,
    StepRecord,
    UpdateChoice,
)
from memoria_contracts.session import SessionConfigOverrides, SessionConfigState
from memoria_decision.core import effects, events
from memoria_decision.core.machine import decide
from memoria_decision.core.state import (
    Config,
    CycleState,
    PendingAction,
    PendingStep,
    Released,
    Route,
    Stored,
)
from memoria_runtime.personas import load_personas
from memoria_runtime.session_defaults import session_defaults
from memoria_runtime.settings import Settings

SETTINGS = Settings.load(_env_file=None)
AT = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)
SENT = datetime(2026, 12, 1, 9, 29, 58, tzinfo=UTC)
PERSONAS = load_personas(SETTINGS.cycle)


def config(**changes: Any) -> Config:
    base = Config(
        max_steps=3,
        step_timeout_s=120.0,
        history_limit=50,
        summary_chars=2000,
        default_session=session_defaults(SETTINGS, "t1"),
        personas={persona.id: persona for persona in PERSONAS},
        default_persona=PERSONAS.default_id,
        pending_ttl_s=600,
        relative_relevance=SETTINGS.memory.memory_relative_relevance,
    )
    return Config(**{**base.__dict__, **changes})


CONFIG = config()


def said(role: str, text: str, record_id: str, cycle_id: str = "cyc_0") -> ChatRecord:
    return ChatRecord(
        id=record_id,
        cycle_id=cycle_id,
        chat_history=True,
        modal="text",
        role=role,
        content=text,
        created_at=SENT,
    )


def message(text: str = "hi", message_id: str = "msg_1") -> ChatRecord:
    return said("user", text, message_id, f"cyc_{message_id.removeprefix('msg_')}")


def arrived(
    text: str = "hi", *, pending: PendingAction | None = None, owns: bool = True
) -> events.Arrived:
    return events.Arrived(
        at=AT,
        message=message(text),
        user_id="ana",
        thread_id="t1",
        trace={},
        owns=owns,
        pending=pending,
        framed=b"framed",
    )


def session_state(**changes: Any) -> SessionConfigState:
    session = session_defaults(SETTINGS, "t1").model_copy(update=changes)
    return SessionConfigState(config=session, overrides=SessionConfigOverrides())


def page(*history: ChatRecord, session: SessionConfigState | None = None) -> HistoryPage:
    return HistoryPage(messages=list(history), session=session or session_state())


def fresh(route: Route | None = None, **changes: Any) -> CycleState:
    """A cycle just stored and echoed, routed to the model unless ``route`` says else."""
    original = message()
    state = CycleState(
        cycle_id="cyc_1",
        user_id="ana",
        thread_id="t1",
        message_id="msg_1",
        trace={},
        language="en",
        original=original,
        started_at=AT,
        transcript=(original,),
        echoed=True,
        session=session_defaults(SETTINGS, "t1"),
        route=route or Route(kind="model", language="en"),
    )
    return state.model_copy(update=changes)


def done(step: int, action: str = "MemorySearch") -> StepRecord:
    return StepRecord(step=step, action=action, status="ok", summary="found 1")


def waiting(step: int, *, tool_call: bool = False, action: str = "MemorySearch") -> CycleState:
    """Step ``step`` requested, its completion awaited."""
    pending = PendingStep(step=step, action=action, request_event_id="evt_1", tool_call=tool_call)
    return fresh(steps=tuple(done(n) for n in range(1, step)), pending=pending)


def recorded(step: int) -> CycleState:
    """Step ``step`` recorded, nothing done about it yet (the delivery died there)."""
    return fresh(steps=tuple(done(n) for n in range(1, step + 1)))


def ended(*, announced: bool) -> CycleState:
    return fresh(steps=(done(1),), status="ended", end_reason="done", end_announced=announced)


RELEASED = Released(cycle_id="cyc_1", user_id="ana", thread_id="t1", message_id="msg_1")


def completion(
    step: int,
    *,
    action: str = "MemorySearch",
    ends: bool = False,
    status: str = "ok",
    error: str | None = None,
    choice: UpdateChoice | None = None,
    messages: Iterable[ChatRecord] = (),
    arguments: dict[str, Any] | None = None,
    tokens: dict[str, tuple[int, int]] | None = None,
) -> events.Completed:
    outcome = ActionOutcome(
        status=status,
        ends_cycle=ends,
        summary="found 1",
        error=error,
        choice=choice,
        messages=list(messages),
        arguments=arguments,
    )
    return events.Completed(
        AT,
        ActionCompleted(
            step=step, action=action, outcome=outcome, worker="w1", tokens=tokens or {}
        ),
    )


def kinds(moved: effects.Transition) -> list[type]:
    return [type(effect) for effect in moved.effects]


def posted(moved: effects.Transition) -> list[ChatRecord]:
    return [e.record for e in moved.effects if isinstance(e, effects.Post)]


def of(moved: effects.Transition, kind: type[Any]) -> list[Any]:
    return [e for e in moved.effects if isinstance(e, kind)]


Answer = Callable[[effects.Effect], events.Event | None]


def run(
    state: Stored | None,
    event: events.Event,
    answer: Answer,
    *,
    cfg: Config = CONFIG,
) -> tuple[Stored | None, list[effects.Effect]]:
    """Feed ``event``, then what ``answer`` says each effect leading on found, until nothing
    leads on; every effect carried out, in order."""
    carried: list[effects.Effect] = []
    next_event: events.Event | None = event
    while next_event is not None:
        moved = decide(state, next_event, cfg)
        state, next_event = moved.state, None
        carried += moved.effects
        if moved.effects and isinstance(moved.effects[-1], effects.LEADS_ON):
            next_event = answer(moved.effects[-1])
    return state, carried


def answers(**by_purpose: Any) -> Answer:
    """Replies by ``AskMemory`` purpose (a callable gets the requests), a fresh store on
    ``Create``, and ``chosen`` (an action name, or an event) for ``Choose``."""

    def answer(effect: effects.Effect) -> events.Event | None:
        if isinstance(effect, effects.Create):
            return events.Created(AT, by_purpose.get("created"))
        if isinstance(effect, effects.Choose):
            chosen = by_purpose.get("chosen", "Finalize")
            if isinstance(chosen, events.Event):
                return chosen
            return events.Chosen(AT, chosen, chosen != "Finalize", "evt_2", {})
        assert isinstance(effect, effects.AskMemory)
        reply = by_purpose.get(effect.purpose)
        if callable(reply):
            reply = reply(effect.requests)
        replies = reply if isinstance(reply, tuple) else (reply,)
        return events.Answered(AT, effect.purpose, replies)

    return answer

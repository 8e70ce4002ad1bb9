"""The shell around the thought cycle: each event to the core (:mod:`memoria_decision.core`),
its effects carried out in order, one handler each, deciding nothing; what an effect found
goes back as the next event. Writes go through :class:`~memoria_decision.batch.Batch`, which
says what a crash between two of them leaves."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any, Final, assert_never

from opentelemetry import trace

from memoria_contracts.chat import utcnow
from memoria_contracts.cycles import cycle_id_for
from memoria_contracts.events import (
    ActionCompleted,
    ActionRequested,
    ChatPosted,
    CycleEnded,
    Envelope,
    Payload,
    UserMessageReceived,
)
from memoria_contracts.ids import new_id
from memoria_contracts.streams import Stream
from memoria_decision.batch import Batch
from memoria_decision.chooser import Chooser
from memoria_decision.core import effects, events
from memoria_decision.core.machine import decide
from memoria_decision.core.state import Config, CycleState, Stored
from memoria_decision.deadlines import Deadlines
from memoria_decision.store import PENDING_ACTION_TTL_S, CycleStore
from memoria_runtime import accounting, keys, metrics
from memoria_runtime.bus import Delivery, EventPublisher
from memoria_runtime.bus.memory_requests import MemoryClient
from memoria_runtime.bus.request_reply import RpcError
from memoria_runtime.bus.thread_gate import ThreadGate
from memoria_runtime.personas import load_personas
from memoria_runtime.session_defaults import session_defaults
from memoria_runtime.settings import DecisionSettings
from memoria_runtime.telemetry import attached_trace, current_trace_carrier

log = logging.getLogger("memoria.decision")
tracer = trace.get_tracer("memoria.decision")

_SWEEP_BATCH: Final = 50  # deadlines handled per sweep


def core_config(settings: DecisionSettings) -> Config:
    personas = load_personas(settings.cycle)
    return Config(
        max_steps=settings.cycle.cycle_max_steps,
        step_timeout_s=settings.cycle.step_timeout_seconds,
        history_limit=settings.cycle.history_limit,
        summary_chars=settings.cycle.history_summary_prompt_chars,
        default_session=session_defaults(settings, "default"),
        personas={persona.id: persona for persona in personas},
        default_persona=personas.default_id,
        pending_ttl_s=PENDING_ACTION_TTL_S,
        relative_relevance=settings.memory.memory_relative_relevance,
    )


@dataclass
class CycleExecutor:
    settings: DecisionSettings
    redis: Any
    publisher: EventPublisher
    gate: ThreadGate
    store: CycleStore
    deadlines: Deadlines
    memory: MemoryClient
    chooser: Chooser
    config: Config = field(init=False)

    def __post_init__(self) -> None:
        self.config = core_config(self.settings)

    # -- events in --------------------------------------------------------------------------

    async def on_chat_in(self, event: Envelope, delivery: Delivery) -> None:
        if not isinstance(event.payload, UserMessageReceived):
            log.error("unexpected %s on chat.in (%s)", event.type, event.event_id)
            return
        await self.on_user_message(event, event.payload, delivery.data)

    async def on_action_done(self, event: Envelope, delivery: Delivery) -> None:
        if not isinstance(event.payload, ActionCompleted):
            log.error("unexpected %s on actions.done (%s)", event.type, event.event_id)
            return
        await self.on_action_completed(event, event.payload)

    async def on_user_message(
        self, event: Envelope, payload: UserMessageReceived, framed: bytes
    ) -> None:
        """``framed``: the stream entry as stored, to queue it again unchanged if needed."""
        cycle_id = cycle_id_for(payload.message_id)
        user_id, thread_id = event.user_id, event.thread_id
        part = self.gate.partitions.of(user_id)
        opening = await self.gate.open(
            user_id,
            thread_id,
            payload.message_id,
            started=keys.cycle_state(part, cycle_id),
            then_read=keys.pending_action(part, user_id, thread_id),
        )
        if opening.started is not None:
            await self._run(self.store.parse(opening.started), events.Redelivered(utcnow()))
            return
        arrived = events.Arrived(
            at=utcnow(),
            message=payload.record(cycle_id, event.time),
            user_id=user_id,
            thread_id=thread_id,
            trace=current_trace_carrier() or dict(event.trace),
            owns=opening.owns,
            pending=await self.store.pending(user_id, thread_id, opening.read),
            framed=framed,
        )
        await self._run(None, arrived)

    async def on_action_completed(self, event: Envelope, payload: ActionCompleted) -> None:
        part = self.gate.partitions.of(event.user_id)
        state = await self.store.load(part, event.cycle_id) if event.cycle_id else None
        await self._run(state, events.Completed(utcnow(), payload))

    async def sweep_deadlines(self) -> None:
        """End the cycles whose current step is overdue."""
        for part, cycle_id, step in await self.deadlines.due(_SWEEP_BATCH):
            if not await self.deadlines.claim(part, cycle_id, step):
                continue  # another replica (or the completion) got there first
            state = await self.store.load(part, cycle_id)
            carrier = state.trace if isinstance(state, CycleState) else {}
            with attached_trace(carrier), tracer.start_as_current_span("cycle.step_timeout"):
                await self._run(state, events.StepOverdue(utcnow(), step))
            await self.deadlines.clear(part, cycle_id, step)

    async def _run(self, state: Stored | None, event: events.Event | None) -> None:
        """Transitions from ``event`` on, their effects carried out in order; then held writes."""
        batch = Batch(self.redis, self.publisher)
        while event is not None:
            moved = decide(state, event, self.config)
            state, event = moved.state, None
            for effect in moved.effects:
                if isinstance(effect, effects.Note):
                    log.info("cycle %s: %s", state.cycle_id if state else "-", effect.why)
                elif isinstance(state, CycleState):
                    event = await self._carry_out(effect, state, batch)
                else:
                    raise TypeError(f"{type(effect).__name__} without a running cycle")
        await batch.send()

    # -- one handler per effect -------------------------------------------------------------

    async def _carry_out(  # noqa: PLR0915 (one short case per kind of effect)
        self, effect: effects.Effect, state: CycleState, batch: Batch
    ) -> events.Event | None:
        cycle_id, user_id, thread_id = state.cycle_id, state.user_id, state.thread_id
        lock, part = (user_id, thread_id, state.message_id), self.gate.partitions.of(user_id)
        match effect:
            case effects.Post(record):
                batch.append(Stream.CHAT_OUT, self._envelope(state, ChatPosted(message=record)))
            case effects.Create(created):
                fresh = await batch.send(lambda p: self.store.queue_save(p, created, new=True))
                stored = None if fresh else await self.store.load(part, cycle_id)
                return events.Created(utcnow(), stored)
            case effects.Save(saved):
                batch.hold(lambda pipe: self.store.queue_save(pipe, saved))
            case effects.AskMemory(purpose, requests):
                await batch.send()
                replies = await asyncio.gather(*(self._ask(state, r) for r in requests))
                return events.Answered(utcnow(), purpose, tuple(replies))
            case effects.Choose():
                catalog = await batch.send(lambda pipe: pipe.hgetall(keys.action_catalog(part)))
                return await self.chooser.choose(state, catalog)
            case effects.RefreshLock():
                batch.hold(
                    lambda pipe: self.gate.queue_refresh(pipe, *lock),
                    lambda answer: self.gate.refreshed(answer, *lock),
                )
            case effects.SetDeadline(step):
                seconds = self.settings.cycle.step_timeout_seconds
                batch.hold(lambda p: self.deadlines.queue_set(p, part, cycle_id, step, seconds))
            case effects.ClearDeadline(step):
                batch.hold(lambda p: self.deadlines.queue_clear(p, part, cycle_id, step))
            case effects.RequestAction() if state.pending is not None:
                pending = state.pending
                request = ActionRequested(
                    step=pending.step, action=pending.action, context=state.context()
                )
                envelope = self._envelope(state, request, pending.request_event_id)
                batch.append(Stream.ACTIONS, envelope)
                log.info("cycle %s step %d: %s", cycle_id, pending.step, pending.action)
            case effects.PutPending(action):
                batch.hold(lambda pipe: self.store.queue_put(pipe, user_id, thread_id, action))
            case effects.ClearPending(action_id):
                batch.hold(lambda pipe: self.store.queue_clear(pipe, user_id, thread_id, action_id))
            case effects.MarkEnded():
                mark, reason = keys.cycle_ended(part, cycle_id), state.end_reason or "done"
                # Workers look for it while a step runs or its request may come again.
                ttl_s = keys.step_record_ttl_s(self.settings.cycle.thread_lock_ttl_s)
                batch.hold(lambda pipe: pipe.set(mark, reason, ex=ttl_s))
            case effects.Announce():
                self._announce(state, batch)
            case effects.Release(released):
                await batch.send()
                save = None if released is None else self.store.released(released)
                next_id = await self.gate.release(*lock, save=save)
                if released is not None:  # counted once: when the announcement is recorded
                    age_s = (utcnow() - state.started_at).total_seconds()
                    metrics.count_cycle_end(released.end_reason or "done", age_s)
                    log.info("cycle %s ended (%s): %s", cycle_id, state.end_reason, state.actions)
                if next_id:
                    log.info("thread %s/%s: next message %s", user_id, thread_id, next_id)
            case effects.Requeue(framed):
                await batch.send()
                await self.gate.requeue_first(*lock, framed)
            case effects.Note() | effects.RequestAction():
                log.info("cycle %s: %s", cycle_id, effect)
            case _:  # a new kind of effect must be carried out here (mypy checks)
                assert_never(effect)
        return None

    async def _ask(self, state: CycleState, request: Payload) -> events.Reply:
        """A request to the memory service as the cycle's user."""
        who = (state.user_id, state.thread_id, state.cycle_id)
        try:
            return await self.memory.request(*who, request)
        except TimeoutError as exc:
            return events.Unanswered(str(exc) or "timed out", timeout=True)
        except RpcError as exc:
            return events.Unanswered(str(exc), timeout=False)

    def _announce(self, state: CycleState, batch: Batch) -> None:
        """``cycle.ended`` with the cycle's usage (its decisions' tokens and its steps'); None
        when no call reported any (the offline planner), rather than a cost of 0 nobody
        measured."""
        tokens, prices = state.tokens, self.settings.llm.llm_prices
        usage = accounting.priced(tokens, prices) if tokens else None
        reason = state.end_reason or "done"
        # The span's attributes: OpenTelemetry's GenAI names where there is one.
        attributes: dict[str, Any] = {"memoria.cycle_id": state.cycle_id}
        attributes["memoria.cycle.end_reason"] = reason
        if state.routed.kind != "model":
            attributes["memoria.cycle.fast_path"] = state.routed.kind
        if usage is not None:
            attributes["memoria.cycle.cost_usd"] = usage.cost_usd
            attributes["gen_ai.usage.input_tokens"] = usage.input_tokens
            attributes["gen_ai.usage.output_tokens"] = usage.output_tokens
        with tracer.start_as_current_span("cycle.end", attributes=attributes):
            ended = CycleEnded(actions=state.actions, reason=reason, usage=usage)
            batch.append(Stream.CHAT_OUT, self._envelope(state, ended))

    @staticmethod
    def _envelope(state: CycleState, payload: Payload, event_id: str | None = None) -> Envelope:
        return Envelope(
            event_id=event_id or new_id("evt"),
            cycle_id=state.cycle_id,
            user_id=state.user_id,
            thread_id=state.thread_id,
            trace=current_trace_carrier() or state.trace,
            payload=payload,
        )

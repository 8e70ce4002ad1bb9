"""The shell around the thought cycle: it hands each event to the core
(:func:`memoria_decision.core.decide`), carries out the effects it returns in order, one
handler per effect, and hands what an effect found back as the next event. It decides
nothing. Its Redis writes go through :class:`~memoria_decision.batch.Batch`, whose docstring
says what a crash between two of them leaves.
"""

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
from memoria_decision.core import decide, effects, events
from memoria_decision.core.state import Config, CycleState, Stored
from memoria_decision.deadlines import Deadlines
from memoria_decision.store import PENDING_ACTION_TTL_S, CycleStore, PendingStore
from memoria_llm import accounting
from memoria_runtime import keys, metrics
from memoria_runtime.bus import EventPublisher
from memoria_runtime.gate import ThreadGate
from memoria_runtime.memory_client import MemoryClient
from memoria_runtime.personas import load_personas
from memoria_runtime.rpc import RpcError
from memoria_runtime.session_defaults import session_defaults
from memoria_runtime.settings import DecisionSettings
from memoria_runtime.telemetry import attached_trace, current_trace_carrier

log = logging.getLogger("memoria.decision")
tracer = trace.get_tracer("memoria.decision")

_SWEEP_BATCH: Final = 50  # deadlines handled per sweep
_ENDED_MARK_TTL_S: Final = 24 * 3600  # workers look for it while a step runs
# Attributes of the ``cycle.end`` span (OpenTelemetry's GenAI names where there is one).
ATTR_CYCLE_ID: Final = "memoria.cycle_id"
ATTR_END_REASON: Final = "memoria.cycle.end_reason"
ATTR_FAST_PATH: Final = "memoria.cycle.fast_path"
ATTR_COST_USD: Final = "memoria.cycle.cost_usd"
ATTR_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
ATTR_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"


def core_config(settings: DecisionSettings) -> Config:
    personas = load_personas(settings)
    return Config(
        max_steps=settings.cycle_max_steps,
        step_timeout_s=settings.step_timeout_seconds,
        history_limit=settings.history_limit,
        summary_chars=settings.history_summary_prompt_chars,
        default_session=session_defaults(settings, "default"),
        personas={persona.id: persona for persona in personas},
        default_persona=personas.default_id,
        pending_ttl_s=PENDING_ACTION_TTL_S,
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
    pending: PendingStore = field(init=False)
    config: Config = field(init=False)

    def __post_init__(self) -> None:
        self.pending = PendingStore(self.redis)
        self.config = core_config(self.settings)

    # -- events in --------------------------------------------------------------------------

    async def on_user_message(
        self, event: Envelope, payload: UserMessageReceived, framed: bytes
    ) -> None:
        """``framed``: the stream entry as stored, to queue it again unchanged if needed."""
        cycle_id = cycle_id_for(payload.message_id)
        user_id, thread_id = event.user_id, event.thread_id
        opening = await self.gate.open(
            user_id,
            thread_id,
            payload.message_id,
            started=keys.cycle_state(cycle_id),
            then_read=keys.pending_action(user_id, thread_id),
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
            pending=await self.pending.parse(user_id, thread_id, opening.read),
            framed=framed,
        )
        await self._run(None, arrived)

    async def on_action_completed(self, event: Envelope, payload: ActionCompleted) -> None:
        state = await self.store.load(event.cycle_id) if event.cycle_id else None
        await self._run(state, events.Completed(utcnow(), payload))

    async def sweep_deadlines(self) -> None:
        """End the cycles whose current step is overdue."""
        for cycle_id, step in await self.deadlines.due(_SWEEP_BATCH):
            if not await self.deadlines.claim(cycle_id, step):
                continue  # another replica (or the completion) got there first
            state = await self.store.load(cycle_id)
            carrier = state.trace if isinstance(state, CycleState) else {}
            with attached_trace(carrier), tracer.start_as_current_span("cycle.step_timeout"):
                await self._run(state, events.StepOverdue(utcnow(), step))
            await self.deadlines.clear(cycle_id, step)

    async def _run(self, state: Stored | None, event: events.Event | None) -> None:
        """The core's transitions from ``event`` on, each one's effects carried out in order
        (the last may lead to the next event), then the writes still held sent."""
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

    async def _carry_out(
        self, effect: effects.Effect, state: CycleState, batch: Batch
    ) -> events.Event | None:
        cycle_id, user_id, thread_id = state.cycle_id, state.user_id, state.thread_id
        lock = (user_id, thread_id, state.message_id)
        match effect:
            case effects.Post(record):
                self._hold_append(batch, state, Stream.CHAT_OUT, ChatPosted(message=record))
            case effects.Create(created):
                fresh = await batch.send(lambda pipe: self.store.queue_create(pipe, created))
                return events.Created(utcnow(), None if fresh else await self.store.load(cycle_id))
            case effects.Save(saved):
                batch.hold(lambda pipe: self.store.queue_save(pipe, saved))
            case effects.AskMemory(purpose, requests):
                await batch.send()
                replies = await asyncio.gather(*(self._ask(state, r) for r in requests))
                return events.Answered(utcnow(), purpose, tuple(replies))
            case effects.Choose():
                catalog = await batch.send(lambda pipe: pipe.hgetall(keys.ACTION_CATALOG))
                return await self.chooser.choose(state, catalog)
            case effects.RefreshLock():
                batch.hold(
                    lambda pipe: self.gate.queue_refresh(pipe, *lock),
                    lambda answer: self.gate.refreshed(answer, *lock),
                )
            case effects.AddUsage(spent):
                batch.hold(lambda pipe: accounting.queue_add(pipe, cycle_id, spent))
            case effects.SetDeadline(step):
                seconds = self.settings.step_timeout_seconds
                batch.hold(lambda pipe: self.deadlines.queue_set(pipe, cycle_id, step, seconds))
            case effects.ClearDeadline(step):
                batch.hold(lambda pipe: self.deadlines.queue_clear(pipe, cycle_id, step))
            case effects.RequestAction():
                self._request(state, batch)
            case effects.PutPending(action):
                batch.hold(lambda pipe: self.pending.queue_put(pipe, user_id, thread_id, action))
            case effects.ClearPending(action_id):
                batch.hold(
                    lambda pipe: self.pending.queue_clear(pipe, user_id, thread_id, action_id)
                )
            case effects.MarkEnded():
                mark, reason = keys.cycle_ended(cycle_id), state.end_reason or "done"
                batch.hold(lambda pipe: pipe.set(mark, reason, ex=_ENDED_MARK_TTL_S))
            case effects.Announce():
                await self._announce(state, batch)
            case effects.Release(released):
                await batch.send()
                save = None if released is None else self.store.released(released)
                next_id = await self.gate.release(*lock, save=save)
                if released is not None:  # counted once: when the announcement is recorded
                    metrics.count_cycle_end(released.end_reason or "done", _age(state))
                    log.info("cycle %s ended (%s): %s", cycle_id, state.end_reason, state.actions)
                if next_id:
                    log.info("thread %s/%s: next message %s", user_id, thread_id, next_id)
            case effects.Requeue(framed):
                await batch.send()
                await self.gate.requeue_first(*lock, framed)
            case effects.Note():
                pass  # logged by the loop
            case _:  # a new kind of effect must be carried out here (mypy checks)
                assert_never(effect)
        return None

    async def _ask(self, state: CycleState, request: Payload) -> events.Reply:
        """A request to the memory service as the cycle's user."""
        try:
            return await self.memory.request(
                state.user_id, state.thread_id, state.cycle_id, request
            )
        except TimeoutError as exc:
            return events.Unanswered(str(exc) or "timed out", timeout=True)
        except RpcError as exc:
            return events.Unanswered(str(exc), timeout=False)

    def _request(self, state: CycleState, batch: Batch) -> None:
        if state.pending is None:
            raise TypeError("RequestAction without a pending step")
        step, action = state.pending.step, state.pending.action
        request = ActionRequested(step=step, action=action, context=state.context())
        event_id = state.pending.request_event_id
        self._hold_append(batch, state, Stream.ACTIONS, request, event_id=event_id)
        log.info("cycle %s step %d: %s", state.cycle_id, step, action)

    async def _announce(self, state: CycleState, batch: Batch) -> None:
        """``cycle.ended`` with the cycle's usage, read with the end's writes (its steps'
        tokens are all in by then); None when no call reported any (the offline planner),
        rather than a cost of 0 nobody measured."""
        raw = await batch.send(lambda pipe: pipe.hgetall(keys.cycle_usage(state.cycle_id)))
        used = accounting.parse_cycle(raw or {})
        usage = accounting.priced(used, self.settings.llm_prices) if used else None
        reason = state.end_reason or "done"
        attributes: dict[str, Any] = {ATTR_CYCLE_ID: state.cycle_id, ATTR_END_REASON: reason}
        if state.route is not None and state.route.kind != "model":
            attributes[ATTR_FAST_PATH] = state.route.kind
        if usage is not None:
            attributes[ATTR_COST_USD] = usage.cost_usd
            attributes[ATTR_INPUT_TOKENS] = usage.input_tokens
            attributes[ATTR_OUTPUT_TOKENS] = usage.output_tokens
        with tracer.start_as_current_span("cycle.end", attributes=attributes):
            ended = CycleEnded(actions=state.actions, reason=reason, usage=usage)
            self._hold_append(batch, state, Stream.CHAT_OUT, ended)
        # Kept only while the end may be announced again (a redelivery before the release).
        usage_key, ttl_s = keys.cycle_usage(state.cycle_id), self.store.released_ttl_s
        batch.hold(lambda pipe: pipe.expire(usage_key, ttl_s))

    def _hold_append(
        self,
        batch: Batch,
        state: CycleState,
        stream: Stream,
        payload: Payload,
        *,
        event_id: str | None = None,
    ) -> None:
        envelope = Envelope(
            event_id=event_id or new_id("evt"),
            cycle_id=state.cycle_id,
            user_id=state.user_id,
            thread_id=state.thread_id,
            trace=current_trace_carrier() or state.trace,
            payload=payload,
        )
        batch.hold(lambda pipe: self.publisher.queue(pipe, stream, envelope))


def _age(state: CycleState) -> float:
    return (utcnow() - state.started_at).total_seconds()

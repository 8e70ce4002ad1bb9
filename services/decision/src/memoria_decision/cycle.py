"""The thought cycle: start, decide the next step, record outcomes, end.

Every method is safe to run twice for the same event (at-least-once delivery): the cycle's
state in Redis says what already happened, requests carry deterministic (cycle, step)
identities that action workers deduplicate, and ending releases the thread only once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace

from memoria_contracts.chat import ChatRecord, utcnow
from memoria_contracts.cycles import cycle_id_for
from memoria_contracts.events import (
    ActionCompleted,
    ActionRequested,
    ActionSpec,
    ChatPosted,
    CycleEnded,
    CycleEndReason,
    CycleUsage,
    Envelope,
    Payload,
    StepRecord,
    UserMessageReceived,
)
from memoria_contracts.history import HistorySummary
from memoria_contracts.session import SessionConfigState
from memoria_contracts.streams import Stream
from memoria_decision import SERVICE_NAME, tool_history
from memoria_decision.chooser import choose_action
from memoria_decision.deadlines import Deadlines
from memoria_decision.fast_paths import FastPaths
from memoria_decision.pending import PendingActions, PendingKind, Prefetched, UpdateCandidate
from memoria_decision.persona import persona_for_cycle, record_applied
from memoria_decision.session import default_session, read_session, recall, recalled
from memoria_decision.state import CycleState, CycleStore, PendingStep
from memoria_llm import accounting
from memoria_llm.conversation import bounded_summary
from memoria_llm.port import LanguageModel, LLMError
from memoria_llm.usage import Usage
from memoria_runtime import i18n, keys, metrics
from memoria_runtime.bus import EventPublisher
from memoria_runtime.catalog import live_actions
from memoria_runtime.gate import ThreadGate
from memoria_runtime.memory_client import MemoryClient
from memoria_runtime.personas import load_personas
from memoria_runtime.rpc import RpcError
from memoria_runtime.settings import Settings
from memoria_runtime.telemetry import attached_trace, current_trace_carrier

log = logging.getLogger("memoria.decision")
tracer = trace.get_tracer("memoria.decision")

_SWEEP_BATCH = 50  # deadlines handled per sweep
_ENDED_MARK_TTL_S = 24 * 3600
_WORKERS_POLL_S = 0.25  # how often a cycle without workers looks for one
_DROPPED_NOTICES: dict[PendingKind, str] = {
    "delete_all": "pending_dropped",
    "choose_update": "update_choice_dropped",
    "choose_forget": "forget_choice_dropped",
}

# Attributes of the ``cycle.end`` span (OpenTelemetry's GenAI names where there is one).
ATTR_CYCLE_ID = "memoria.cycle_id"
ATTR_END_REASON = "memoria.cycle.end_reason"
ATTR_FAST_PATH = "memoria.cycle.fast_path"
ATTR_COST_USD = "memoria.cycle.cost_usd"
ATTR_INPUT_TOKENS = "gen_ai.usage.input_tokens"
ATTR_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"


@dataclass(frozen=True)
class Known:
    """What a delivery has read or done already, so that the steps after need not ask."""

    lock_fresh: bool = False
    """The thread's lock was set or refreshed just now: no refresh before the decision."""
    pending: Prefetched | None = None
    """The thread's pending action (the route of a new cycle needs it)."""
    catalog: Mapping[bytes, bytes] | None = None
    """The action catalog's hash (read at every step; here, read with the new state)."""


@dataclass(frozen=True)
class Opening:
    """What a new cycle reads from the memory service before its first decision."""

    history: list[ChatRecord]
    summary: HistorySummary | None
    history_error: bool
    """The history could not be read: the cycle says so in the chat."""
    session: SessionConfigState


@dataclass
class CycleEngine:
    settings: Settings
    redis: Any
    publisher: EventPublisher
    gate: ThreadGate
    store: CycleStore
    deadlines: Deadlines
    memory: MemoryClient
    llm: LanguageModel
    fast_paths: FastPaths = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.fast_paths = FastPaths(
            memory=self.memory,
            pending=PendingActions(self.redis),
            store=self.store,
            gate=self.gate,
            post=self._post_record,
        )

    # -- events -----------------------------------------------------------------------------

    async def on_user_message(
        self, event: Envelope, payload: UserMessageReceived, framed: bytes
    ) -> None:
        """``framed`` is the stream entry as stored, to queue it again unchanged if needed."""
        cycle_id = cycle_id_for(payload.message_id)
        # One round trip: the cycle's state if it started before, else the thread taken over
        # (its lock fresh) and its pending action, which the route of the cycle needs.
        opening = await self.gate.open(
            event.user_id,
            event.thread_id,
            payload.message_id,
            started=keys.cycle_state(cycle_id),
            then_read=keys.pending_action(event.user_id, event.thread_id),
        )
        if opening.started is not None:
            state = self.store.parse(opening.started)
            if not state.echoed:
                # The delivery before this one died between saving the new cycle and echoing
                # the message: echo it now, or no socket shows it and the history never
                # stores it (a repeat of the echo has the same id, which replaces).
                await self._echo(state)
            await self.advance(state)
            return
        if not opening.owns:
            # Only after a lock expired: another cycle runs; wait behind it.
            log.warning("thread busy, requeueing %s", payload.message_id)
            await self.gate.requeue_first(
                event.user_id, event.thread_id, payload.message_id, framed
            )
            return
        state, catalog = await self._start(event, payload, cycle_id)
        await self.advance(
            state, Known(lock_fresh=True, pending=Prefetched(opening.read), catalog=catalog)
        )

    async def on_action_completed(self, event: Envelope, payload: ActionCompleted) -> None:
        if event.cycle_id is None:
            log.error("action.completed without cycle id: %s", event.event_id)
            return
        state = await self.store.load(event.cycle_id)
        if state is None:
            log.error("no state for cycle %s (expired?)", event.cycle_id)
            return
        if state.status == "ended":
            await self._finish(state)  # a late or repeated completion: make sure we released
            return
        pending = state.pending
        if pending is None or pending.step != payload.step:
            await self._on_out_of_order(state, payload)
            return
        if pending.tool_call:
            await self._tool_records(state, payload)
        state.record(payload)
        # Saved (and its deadline cleared) with the first write of what it leads to, in the
        # same round trip, before any wait: a crash before that records it again, the same.
        await self._after_step(state, payload, recorded=payload.step)

    async def _after_step(
        self, state: CycleState, payload: ActionCompleted, *, recorded: int | None = None
    ) -> None:
        """What a recorded step leads to: the end of the cycle, or the next decision.
        ``recorded``: the step, if recorded in ``state`` but not saved yet (nor its deadline
        cleared)."""
        outcome = payload.outcome
        if outcome.ends_cycle and outcome.status == "failed":
            notice = i18n.text(
                "action_failed", state.language, action=payload.action, detail=outcome.error
            )
            await self._end(state, "action_failed", notice, recorded=recorded)
        elif outcome.ends_cycle and outcome.choice is not None:
            # An update that needs the user to say which memory: asked here, in fixed
            # words, and kept as the thread's pending action for the next message.
            candidates = [
                UpdateCandidate(memory_id=c.memory_id, content=c.content)
                for c in outcome.choice.candidates
            ]
            await self.fast_paths.ask_choice(state, candidates, outcome.choice, step=payload.step)
            await self._end(state, "done", recorded=recorded)
        elif outcome.ends_cycle:
            await self._end(state, "done", recorded=recorded)
        else:
            await self._decide_next(state, recorded=recorded)

    async def sweep_deadlines(self) -> int:
        """End the cycles whose current step is overdue; returns how many."""
        ended = 0
        for cycle_id, step in await self.deadlines.due(_SWEEP_BATCH):
            # Claimed, not removed: should this replica die before the cycle has ended, the
            # deadline comes due again and another sweep ends it.
            if not await self.deadlines.claim(cycle_id, step):
                continue  # another replica (or the completion) got there first
            if await self._time_out(cycle_id, step):
                ended += 1
            await self.deadlines.clear(cycle_id, step)
        return ended

    async def _time_out(self, cycle_id: str, step: int) -> bool:
        """End the cycle if ``step`` is still the one it waits for; True if it did."""
        state = await self.store.load(cycle_id)
        if state is None or state.status == "ended":
            return False
        if state.pending is None or state.pending.step != step:
            return False
        with attached_trace(state.trace), tracer.start_as_current_span("cycle.step_timeout"):
            if state.pending.tool_call:
                await self._tool_result(state, step, state.pending.action, "failed", "timed out")
            state.steps.append(
                StepRecord(
                    step=step, action=state.pending.action, status="failed", summary="timed out"
                )
            )
            notice = i18n.text(
                "step_timeout",
                state.language,
                action=state.pending.action,
                seconds=self.settings.step_timeout_seconds,
            )
            await self._end(state, "step_timeout", notice)
        return True

    # -- steps ------------------------------------------------------------------------------

    async def advance(self, state: CycleState, known: Known | None = None) -> None:
        """Continue a cycle from whatever its state says happened last."""
        if state.status == "ended":
            await self._finish(state)
        elif state.pending is not None:
            await self._republish_pending(state)
        else:
            await self._decide_next(state, known=known or Known())

    async def _start(
        self, event: Envelope, payload: UserMessageReceived, cycle_id: str
    ) -> tuple[CycleState, Mapping[bytes, bytes]]:
        """The new cycle, and the action catalog (read with the new state's write, for the
        first decision: one round trip for both)."""
        original = payload.record(cycle_id, event.time)
        opening = await self._opening(event, cycle_id)
        # Read only when the message itself does not tell its language.
        earlier = (
            record.content
            for record in reversed(opening.history)
            if record.role == "user" and isinstance(record.content, str)
        )
        language = i18n.detect_language(payload.content, earlier)
        stored = opening.session
        session = stored.config
        persona, to_record = persona_for_cycle(load_personas(self.settings), stored, cycle_id)
        cards = await recall(self.memory, session, event.user_id, original)
        state = CycleState(
            cycle_id=cycle_id,
            user_id=event.user_id,
            thread_id=event.thread_id,
            message_id=payload.message_id,
            trace=current_trace_carrier() or dict(event.trace),
            language=language,
            original=original,
            history=opening.history,
            history_summary=opening.summary,
            transcript=[original, *cards],
            session=session,
            persona=persona,
            persona_record=to_record,
        )
        async with self.redis.pipeline(transaction=False) as pipe:
            self.store.queue_create(pipe, state)
            pipe.hgetall(keys.ACTION_CATALOG)
            await self._queue_post(pipe, state, ChatPosted(message=state.original))
            created, catalog, *_ = await self.publisher.execute(pipe)
        state = await self.store.created(state, created)
        state.echoed = True  # saved with the next state, as _echo says
        for card in recalled(state.transcript, cycle_id):  # shown before the first decision
            await self._post(state, ChatPosted(message=card))
        if opening.history_error:
            await self._notice(state, "history", i18n.text("history_unavailable", language))
        log.info("cycle %s started for %s/%s", cycle_id, event.user_id, event.thread_id)
        return state, catalog

    async def _echo(self, state: CycleState) -> None:
        """The user's message on chat.out: every socket shows it, the memory service stores
        it in the thread's history. That it was echoed is saved with the cycle's next state,
        not on its own: a crash before that echoes again, with the same id (a replacement)."""
        await self._post(state, ChatPosted(message=state.original))
        state.echoed = True

    async def _opening(self, event: Envelope, cycle_id: str) -> Opening:
        """The thread's earlier chat-history messages and the summary of those before them,
        cut to the prompt's bound, and its session config: one request to the memory
        service. When it does not answer, the cycle goes on without the history (and says so)
        and with the default config, rather than hang."""
        user_id, thread_id = event.user_id, event.thread_id
        try:
            page = await self.memory.history_page(
                user_id,
                thread_id,
                limit=self.settings.history_limit,
                exclude_cycle_id=cycle_id,
                cycle_id=cycle_id,
                with_session=True,
            )
        except TimeoutError as exc:
            # Silent: asking again for the config alone would only wait as long again.
            log.error("cycle %s: no history nor session config, using defaults: %r", cycle_id, exc)
            return Opening([], None, True, default_session(self.settings, thread_id))
        except RpcError as exc:
            log.error("cycle %s: no history from the memory service: %r", cycle_id, exc)
            stored = await read_session(self.memory, self.settings, user_id, thread_id, cycle_id)
            return Opening([], None, True, stored)
        summary = bounded_summary(page.summary, self.settings.history_summary_prompt_chars)
        # No config in the page: a memory service from before the field, or one that could
        # not read it; the request of its own says which.
        stored = page.session or await read_session(
            self.memory, self.settings, user_id, thread_id, cycle_id
        )
        return Opening(page.messages, summary, False, stored)

    async def _decide_next(
        self,
        state: CycleState,
        *,
        recorded: int | None = None,
        known: Known | None = None,
    ) -> None:
        """``recorded``: the step just recorded in ``state``, not saved yet (its deadline
        still set); ``known``: what this delivery read already."""
        known = known or Known()
        if not state.steps and await self._took_fast_path(state, known.pending):
            return
        step = state.next_step
        if step > self.settings.cycle_max_steps:
            notice = i18n.text("max_steps", state.language, steps=self.settings.cycle_max_steps)
            await self._end(state, "max_steps", notice, recorded=recorded)
            return
        thinking = self._status_line(state, step, i18n.text("thinking", state.language))
        catalog, shown = await self._prepare(state, recorded=recorded, known=known, status=thinking)
        if state.persona_record is not None and not state.persona_recorded:
            # The first prompt of the cycle: the switch it applies is used up.
            await record_applied(self.memory, state.user_id, state.thread_id, state.persona_record)
            state.persona_recorded = True
        if not shown:
            await self._post(state, thinking)
        if not catalog:
            catalog = await self._workers_within(self.settings.no_workers_wait_seconds)
        if not catalog:
            await self._end(state, "no_workers", i18n.text("no_workers", state.language))
            return
        try:
            action, spent = await self._choose(state, catalog)
        except (LLMError, TimeoutError) as exc:
            detail = str(exc) or type(exc).__name__
            log.error("cycle %s: decision failed: %s", state.cycle_id, detail)
            await self._end(
                state, "llm_error", i18n.text("llm_error", state.language, detail=detail)
            )
            return
        request = self._envelope(
            state, ActionRequested(step=step, action=action, context=state.context())
        )
        spec = next((spec for spec in catalog if spec.name == action), None)
        state.pending = PendingStep(
            step=step,
            action=action,
            request_event_id=request.event_id,
            tool_call=tool_history.records_calls(spec),
        )
        # The decision's tokens, the step and its deadline, then its call record and the
        # request: one round trip, run in that order (a crash after the save and before the
        # request is sent republishes it: _republish_pending).
        async with self.redis.pipeline(transaction=False) as pipe:
            accounting.queue_add(pipe, state.cycle_id, spent)
            self.store.queue_save(pipe, state)
            self.deadlines.queue_set(pipe, state.cycle_id, step, self.settings.step_timeout_seconds)
            if state.pending.tool_call:
                call = tool_history.call_record(state.cycle_id, step, action)
                await self._queue_post(pipe, state, ChatPosted(message=call))
            await self.publisher.queue(pipe, Stream.ACTIONS, request)
            await self.publisher.execute(pipe)
        log.info("cycle %s step %d: %s", state.cycle_id, step, action)

    async def _workers_within(self, seconds: float) -> list[ActionSpec]:
        """The live actions once a worker advertises some, within ``seconds``; none after.
        No worker is most often a moment: services start in any order (a message taken
        before the workers were up reaches decision when it starts: ADR 0018), and a lone
        worker restarts in a few seconds."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        while loop.time() < deadline:
            await asyncio.sleep(_WORKERS_POLL_S)
            specs = await live_actions(self.redis, await self.redis.hgetall(keys.ACTION_CATALOG))
            if specs:
                return specs
        return []

    async def _prepare(
        self, state: CycleState, *, recorded: int | None, known: Known, status: ChatPosted
    ) -> tuple[list[ActionSpec], bool]:
        """Before a decision, in one round trip: save the step just recorded (and clear its
        deadline, or a slow decision would time it out), extend the thread's lock unless it
        is fresh, and read the catalog unless known (it is read at every step: enabling or
        disabling an action needs no decision restart); ``status`` is posted after them,
        when there is such a round trip. Returns the catalog, and whether ``status`` was
        posted."""
        refresh = not known.lock_fresh
        entries = known.catalog
        if not (recorded is not None or refresh or entries is None):
            return await live_actions(self.redis, entries), False
        async with self.redis.pipeline(transaction=False) as pipe:
            if recorded is not None:
                self.deadlines.queue_clear(pipe, state.cycle_id, recorded)
                self.store.queue_save(pipe, state)
            if refresh:
                self.gate.queue_refresh(pipe, state.user_id, state.thread_id, state.message_id)
            if entries is None:
                pipe.hgetall(keys.ACTION_CATALOG)
            queued = len(pipe)
            await self._queue_post(pipe, state, status)
            results = await self.publisher.execute(pipe, raise_on_error=False)
        results, posted = results[:queued], results[queued:]
        if entries is None:
            entries = results.pop()
        if refresh:
            await self.gate.refreshed(
                results.pop(), state.user_id, state.thread_id, state.message_id
            )
        for result in (*results, entries, *posted):
            if isinstance(result, Exception):
                raise result
        return await live_actions(self.redis, entries), True

    async def _choose(
        self, state: CycleState, catalog: list[ActionSpec]
    ) -> tuple[str, dict[str, tuple[int, int]]]:
        """The model's choice, and the tokens it took by model: counted in the metrics, for
        the caller to add to the cycle with the step. A decision that fails adds its tokens
        at once (they were spent); one made again after a crash counts again (so were those)."""
        async with (
            accounting.charged_on_failure(
                self.redis, state.cycle_id, service=SERVICE_NAME, prices=self.settings.llm_prices
            ) as used,
            asyncio.timeout(self.settings.step_timeout_seconds),
        ):
            action = await choose_action(self.llm, state, catalog, self.settings.decision_retries)
        return action, accounting.count_usage(
            used, service=SERVICE_NAME, prices=self.settings.llm_prices
        )

    async def _took_fast_path(self, state: CycleState, pending: Prefetched | None) -> bool:
        """Before the first decision: run the message's fast path, if it has one, and
        end the cycle; True then. Otherwise the model decides, as always."""
        route = await self.fast_paths.route(state, pending)
        if route.dropped is not None:
            notice = i18n.text(_DROPPED_NOTICES[route.dropped], state.language)
            await self._notice(state, "pending", notice)
        if route.kind == "model":
            return False
        attributes = {ATTR_CYCLE_ID: state.cycle_id, ATTR_FAST_PATH: route.kind}
        with tracer.start_as_current_span("cycle.fast_path", attributes=attributes):
            ending = await self.fast_paths.run(state, route)
        state.steps.append(ending.step)
        await self._end(state, ending.reason, ending.notice)
        return True

    async def _republish_pending(self, state: CycleState) -> None:
        """A crash may have come between saving a step and publishing it; workers drop the
        duplicate when both arrive."""
        assert state.pending is not None
        pending = state.pending
        request = self._envelope(
            state,
            ActionRequested(step=pending.step, action=pending.action, context=state.context()),
        )
        await self.deadlines.set(state.cycle_id, pending.step, self.settings.step_timeout_seconds)
        if pending.tool_call:  # the same id: replaces the call if it was published already
            call = tool_history.call_record(state.cycle_id, pending.step, pending.action)
            await self._post_record(state, call)
        await self.publisher.publish(Stream.ACTIONS, request)

    async def _on_out_of_order(self, state: CycleState, payload: ActionCompleted) -> None:
        pending = state.pending
        if pending is not None and pending.step == payload.step + 1:
            await self._republish_pending(state)
        elif pending is None and state.steps and state.steps[-1].step == payload.step:
            # Crashed after recording this step: carry on from its outcome, which may be the
            # end of the cycle (deciding again there would run a second Finalize).
            await self._after_step(state, payload)
        else:
            log.info("ignoring stale completion of %s step %d", state.cycle_id, payload.step)

    # -- ending -----------------------------------------------------------------------------

    async def _end(
        self,
        state: CycleState,
        reason: CycleEndReason,
        notice: str | None = None,
        *,
        recorded: int | None = None,
    ) -> None:
        """``recorded``: a step recorded in ``state`` but not saved, its deadline still set."""
        if notice:
            await self._notice(state, "end", notice)
        state.status = "ended"
        state.end_reason = reason
        state.pending = None
        # One round trip: the mark that stops workers' steps, the ended state, and the
        # cycle's usage for its end announcement (all its steps' tokens are in by now).
        async with self.redis.pipeline(transaction=False) as pipe:
            if recorded is not None:
                self.deadlines.queue_clear(pipe, state.cycle_id, recorded)
            pipe.set(keys.cycle_ended(state.cycle_id), reason, ex=_ENDED_MARK_TTL_S)
            self.store.queue_save(pipe, state)
            pipe.hgetall(keys.cycle_usage(state.cycle_id))
            *_, used = await pipe.execute()
        await self._finish(state, accounting.parse_cycle(used))

    async def _finish(self, state: CycleState, used: list[Usage] | None = None) -> None:
        """Announce the end (once) and release the thread. ``used``: the cycle's usage, if
        read already."""
        if state.end_announced:
            saved = None
        else:
            reason = state.end_reason or "done"
            with tracer.start_as_current_span(
                "cycle.end", attributes={ATTR_CYCLE_ID: state.cycle_id, ATTR_END_REASON: reason}
            ) as span:
                cycle_usage = await self._usage(state, used)
                if cycle_usage is not None:
                    span.set_attributes(
                        {
                            ATTR_COST_USD: cycle_usage.cost_usd,
                            ATTR_INPUT_TOKENS: cycle_usage.input_tokens,
                            ATTR_OUTPUT_TOKENS: cycle_usage.output_tokens,
                        }
                    )
                await self._post(
                    state, CycleEnded(actions=state.actions, reason=reason, usage=cycle_usage)
                )
            state.end_announced = True
            saved = self.store.write(state)
        # The announcement is saved in the release's atomic step: a crash before it
        # announces again on the redelivery, never releases without having announced.
        next_id = await self.gate.release(
            state.user_id, state.thread_id, state.message_id, save=saved
        )
        if saved is not None:
            # Counted once the announcement is saved: after a crash before that, the
            # redelivery announces the end again and counts it then (the count died with us).
            metrics.count_cycle_end(
                state.end_reason or "done", (utcnow() - state.started_at).total_seconds()
            )
            log.info("cycle %s ended (%s): %s", state.cycle_id, state.end_reason, state.actions)
        if next_id:
            log.info("thread %s/%s: next message %s", state.user_id, state.thread_id, next_id)

    # -- usage ------------------------------------------------------------------------------

    async def _usage(self, state: CycleState, used: list[Usage] | None) -> CycleUsage | None:
        """The usage of the whole cycle, decision and steps; None when no call reported any
        (e.g. the offline planner), rather than a cost of 0 that nobody measured. Tokens a
        step spends after its cycle ended (a timeout) reach the metrics but not this sum."""
        if used is None:
            used = await accounting.read_cycle(self.redis, state.cycle_id)
        return accounting.priced(used, self.settings.llm_prices) if used else None

    # -- output -----------------------------------------------------------------------------

    def _envelope(self, state: CycleState, payload: Payload) -> Envelope:
        return Envelope(
            cycle_id=state.cycle_id,
            user_id=state.user_id,
            thread_id=state.thread_id,
            trace=current_trace_carrier() or state.trace,
            payload=payload,
        )

    async def _post(self, state: CycleState, payload: Payload) -> None:
        await self.publisher.publish(Stream.CHAT_OUT, self._envelope(state, payload))

    async def _post_record(self, state: CycleState, record: ChatRecord) -> None:
        await self._post(state, ChatPosted(message=record))

    async def _queue_post(self, pipe: Any, state: CycleState, payload: Payload) -> None:
        """:meth:`_post` queued on a pipeline, after the writes it must follow."""
        await self.publisher.queue(pipe, Stream.CHAT_OUT, self._envelope(state, payload))

    async def _tool_records(self, state: CycleState, payload: ActionCompleted) -> None:
        """A completed step's call, now with the arguments the worker worked out (it replaces
        the one published with the request), and its result."""
        outcome = payload.outcome
        summary = outcome.error or outcome.summary
        result = tool_history.result_record(
            state.cycle_id, payload.step, payload.action, outcome.status, summary
        )
        # Both records in one round trip, before the step is recorded (as _tool_result).
        async with self.redis.pipeline(transaction=False) as pipe:
            if outcome.arguments:
                call = tool_history.call_record(
                    state.cycle_id, payload.step, payload.action, outcome.arguments
                )
                await self._queue_post(pipe, state, ChatPosted(message=call))
            await self._queue_post(pipe, state, ChatPosted(message=result))
            await self.publisher.execute(pipe)

    async def _tool_result(
        self, state: CycleState, step: int, action: str, status: str, summary: str
    ) -> None:
        """The step's result in the history, before the step is recorded: a crash in
        between publishes it again, with the same id."""
        record = tool_history.result_record(state.cycle_id, step, action, status, summary)
        await self._post_record(state, record)

    async def _notice(self, state: CycleState, name: str, text: str) -> None:
        """A visible system line that is kept in the thread but not shown to the LLM."""
        record = ChatRecord(
            id=f"{state.cycle_id}.{name}",
            cycle_id=state.cycle_id,
            chat_history=False,
            modal="text",
            role="system",
            content=text,
        )
        await self._post(state, ChatPosted(message=record))

    @staticmethod
    def _status_line(state: CycleState, step: int, text: str) -> ChatPosted:
        record = ChatRecord(
            id=f"{state.cycle_id}.{step}.status",
            cycle_id=state.cycle_id,
            chat_history=False,
            modal="textForReplace",
            role="system",
            content=text,
        )
        return ChatPosted(message=record)

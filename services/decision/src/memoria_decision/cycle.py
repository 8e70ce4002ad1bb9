"""The thought cycle's executor: it feeds events to the state machine
(:func:`memoria_decision.transitions.transition`) and carries out the effects it returns,
batching their Redis commands into pipelines.

Decision holds no state between events: a delivery reads the cycle's state, and every effect
is safe to carry out twice (at-least-once delivery). Redis is asked in these batches, each
one round trip; what happens if the process dies after each, and why that is safe:

1. **Open** (the thread gate's ``open`` script): the cycle's state if it started before;
   else the thread's lock taken or refreshed, and its pending action. Dying here leaves the
   lock, which the redelivery owns (the same message id).
2. **Create**: the new state (``SET NX``), the action catalog, the echo of the message.
   Dying after: the redelivery finds the state and resumes it; one that finds it not yet
   echoed echoes it (same record id: a replacement). A concurrent delivery's ``NX`` loses and
   carries on with the stored state. Recalled memory cards and a history notice follow, with
   fixed ids.
3. **Route** (:mod:`memoria_decision.fast_paths`): the route saved, then the pending action it
   answered cleared. Dying in between: the redelivery finds the route and clears again.
4. **Prepare a decision**: the step just recorded saved and its deadline cleared, the lock
   extended (unless fresh), the catalog read, the ``Thinking…`` status posted. Dying after:
   the redelivery of the completion finds the step recorded and decides again.
5. **Request a step**: the decision's tokens, the state with its pending step, its deadline,
   its call record and ``action.requested``, in that order. Dying before the request is
   appended: the pending step is republished on the next event (a redelivered message, or the
   previous step's completion); workers deduplicate by (cycle, step). Dying after: the
   deadline times the step out if no completion ever comes.
6. **Completion records**: a tool step's call and result, before the step is recorded, with
   fixed ids: posted again, the same, if the process dies before saving.
7. **End**: the step recorded (deadline cleared), the mark that stops workers' steps, the
   ended state, and the cycle's usage read for the announcement. Then ``cycle.ended`` on
   ``chat.out``; then the gate's ``release`` script, which saves the announced state in the
   same atomic step as it hands the thread on. Dying before the release announces again on
   the redelivery (clients replace by cycle id), never releases without having announced.
8. **Timeouts**: a sweeper claims an overdue deadline (it moves later rather than vanishing),
   ends the cycle as in 7, then clears it. Dying in between: it comes due again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, assert_never

from opentelemetry import trace

from memoria_contracts.chat import ChatRecord, utcnow
from memoria_contracts.cycles import cycle_id_for
from memoria_contracts.events import (
    ActionCompleted,
    ActionRequested,
    ActionSpec,
    ChatPosted,
    CycleEnded,
    CycleUsage,
    Envelope,
    Payload,
    UserMessageReceived,
)
from memoria_contracts.history import HistorySummary
from memoria_contracts.ids import new_id
from memoria_contracts.session import SessionConfigState
from memoria_contracts.streams import Stream
from memoria_decision import SERVICE_NAME, tool_history
from memoria_decision.chooser import choose_action
from memoria_decision.deadlines import Deadlines
from memoria_decision.fast_paths import FastPaths
from memoria_decision.pending import PendingActions, Prefetched
from memoria_decision.persona import persona_for_cycle, record_applied
from memoria_decision.session import default_session, read_session, recall, recalled
from memoria_decision.state import CycleState, CycleStore
from memoria_decision.transitions import (
    ActionChosen,
    AnnounceEnd,
    AskChoice,
    Completed,
    Decide,
    DecisionFailed,
    Echo,
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
from memoria_llm.conversation import bounded_summary
from memoria_llm.port import LanguageModel, LLMError
from memoria_llm.usage import Usage
from memoria_runtime import accounting, i18n, keys, metrics
from memoria_runtime.bus import EventPublisher
from memoria_runtime.catalog import live_actions
from memoria_runtime.gate import ThreadGate
from memoria_runtime.memory_client import MemoryClient
from memoria_runtime.partitions import Partition
from memoria_runtime.personas import load_personas
from memoria_runtime.rpc import RpcError
from memoria_runtime.settings import SessionSettings
from memoria_runtime.telemetry import attached_trace, current_trace_carrier

log = logging.getLogger("memoria.decision")
tracer = trace.get_tracer("memoria.decision")

_SWEEP_BATCH = 50  # deadlines handled per sweep
_ENDED_MARK_TTL_S = 24 * 3600
_WORKERS_POLL_S = 0.25  # how often a cycle without workers looks for one

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


def _slot(pipe: Any) -> int:
    """Where the command just queued on ``pipe`` finds its answer among the results."""
    return len(pipe) - 1


@dataclass
class CycleEngine:
    settings: SessionSettings
    llm_prices: dict[str, tuple[float, float]]
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
            pending=PendingActions(self.redis, self.gate.partitions),
            store=self.store,
            gate=self.gate,
            post=self._post_record,
        )

    # -- events in --------------------------------------------------------------------------

    async def on_user_message(
        self, event: Envelope, payload: UserMessageReceived, framed: bytes
    ) -> None:
        """``framed`` is the stream entry as stored, to queue it again unchanged if needed."""
        cycle_id = cycle_id_for(payload.message_id)
        part = self._part(event.user_id)
        opening = await self.gate.open(
            event.user_id,
            event.thread_id,
            payload.message_id,
            started=keys.cycle_state(part, cycle_id),
            then_read=keys.pending_action(part, event.user_id, event.thread_id),
        )
        if opening.started is not None:
            await self._apply(self.store.parse(opening.started), Redelivered())
            return
        if not opening.owns:
            # Only after a lock expired: another cycle runs; wait behind it.
            log.warning("thread busy, requeueing %s", payload.message_id)
            await self.gate.requeue_first(
                event.user_id, event.thread_id, payload.message_id, framed
            )
            return
        state, catalog = await self._start(event, payload, cycle_id)
        known = Known(lock_fresh=True, pending=Prefetched(opening.read), catalog=catalog)
        await self._apply(state, Started(), known)

    async def on_action_completed(self, event: Envelope, payload: ActionCompleted) -> None:
        if event.cycle_id is None:
            log.error("action.completed without cycle id: %s", event.event_id)
            return
        state = await self.store.load(self._part(event.user_id), event.cycle_id)
        if state is None:
            log.error("no state for cycle %s (expired?)", event.cycle_id)
            return
        await self._apply(state, Completed(payload))

    async def sweep_deadlines(self) -> int:
        """End the cycles whose current step is overdue; returns how many."""
        ended = 0
        for part, cycle_id, step in await self.deadlines.due(_SWEEP_BATCH):
            if not await self.deadlines.claim(part, cycle_id, step):
                continue  # another replica (or the completion) got there first
            if await self._time_out(part, cycle_id, step):
                ended += 1
            await self.deadlines.clear(part, cycle_id, step)
        return ended

    def _part(self, user_id: str) -> Partition:
        """The partition of the user's threads: where their cycles' keys are."""
        return self.gate.partitions.of(user_id)

    async def _time_out(self, part: Partition, cycle_id: str, step: int) -> bool:
        """End the cycle if ``step`` is still the one it waits for; True if it did."""
        state = await self.store.load(part, cycle_id)
        if state is None:
            return False
        moved = transition(state, StepOverdue(step), self._limits())
        if any(isinstance(effect, Ignore) for effect in moved.effects):
            return False
        with attached_trace(state.trace), tracer.start_as_current_span("cycle.step_timeout"):
            await self._carry_out(moved, Known())
        return True

    # -- the machine ------------------------------------------------------------------------

    def _limits(self) -> Limits:
        return Limits(
            max_steps=self.settings.cycle_max_steps,
            step_timeout_s=self.settings.step_timeout_seconds,
        )

    async def _apply(self, state: CycleState, event: Event, known: Known | None = None) -> None:
        await self._carry_out(transition(state, event, self._limits()), known or Known())

    async def _carry_out(self, moved: Transition, known: Known) -> None:
        """The effects in order; one that leads to an event (the last) feeds it back."""
        state = moved.state
        used: list[Usage] | None = None  # the cycle's usage, read with its end
        for effect in moved.effects:
            then: Event | None = None
            match effect:
                case Echo():
                    await self._post(state, ChatPosted(message=state.original))
                case PostNotice(name, text):
                    await self._notice(state, name, text)
                case PostToolRecords(completed):
                    await self._tool_records(state, completed)
                case PostToolResult(step, action, status, summary):
                    record = tool_history.result_record(
                        state.cycle_id, step, action, status, summary
                    )
                    await self._post_record(state, record)
                case AskChoice(candidates, choice, step):
                    await self.fast_paths.ask_choice(state, candidates, choice, step=step)
                case RouteMessage():
                    then = Routed(await self.fast_paths.route(state, known.pending))
                case RunFastPath(route):
                    attributes = {ATTR_CYCLE_ID: state.cycle_id, ATTR_FAST_PATH: route.kind}
                    with tracer.start_as_current_span("cycle.fast_path", attributes=attributes):
                        then = FastPathEnded(await self.fast_paths.run(state, route))
                case Decide(step, recorded):
                    then = await self._decide(state, step, recorded, known)
                case RequestStep(spent):
                    await self._request(state, spent)
                case RepublishStep():
                    await self._republish(state)
                case EndCycle(ended, recorded):
                    used = await self._end(ended, recorded)
                case AnnounceEnd():
                    await self._announce(state, used)
                case ReleaseThread(announced):
                    await self._release(state, announced)
                case Ignore(why):
                    log.info("cycle %s: ignored: %s", state.cycle_id, why)
                case _:  # a new kind of effect must be carried out here (mypy checks)
                    assert_never(effect)
            if then is not None:
                await self._carry_out(transition(state, then, self._limits()), known)
                return

    # -- batches ----------------------------------------------------------------------------

    async def _start(
        self, event: Envelope, payload: UserMessageReceived, cycle_id: str
    ) -> tuple[CycleState, Mapping[bytes, bytes]]:
        """The new cycle, and the action catalog (read with the new state's write, for the
        first decision)."""
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
            pipe.hgetall(keys.action_catalog(self._part(state.user_id)))
            await self._queue_post(pipe, state, ChatPosted(message=state.original))
            created, catalog, *_ = await self.publisher.execute(pipe)
        state = await self.store.created(state, created)
        state.echoed = True  # saved with the next state: see transitions' redelivery
        for card in recalled(state.transcript, cycle_id):  # shown before the first decision
            await self._post(state, ChatPosted(message=card))
        if opening.history_error:
            await self._notice(state, "history", i18n.text("history_unavailable", language))
        log.info("cycle %s started for %s/%s", cycle_id, event.user_id, event.thread_id)
        return state, catalog

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

    async def _decide(
        self, state: CycleState, step: int, recorded: int | None, known: Known
    ) -> Event:
        """The model's next action, after the batch that prepares it (:meth:`_prepare`)."""
        thinking = self._status_line(state, step, i18n.text("thinking", state.language))
        catalog, shown = await self._prepare(state, recorded=recorded, known=known, status=thinking)
        if state.persona_record is not None and not state.persona_recorded:
            # The first prompt of the cycle: the switch it applies is used up.
            await record_applied(self.memory, state.user_id, state.thread_id, state.persona_record)
            state.persona_recorded = True
        if not shown:
            await self._post(state, thinking)
        if not catalog:
            catalog = await self._workers_within(
                self._part(state.user_id), self.settings.no_workers_wait_seconds
            )
        if not catalog:
            return NoWorkers()
        try:
            action, spent = await self._choose(state, catalog)
        except (LLMError, TimeoutError) as exc:
            detail = str(exc) or type(exc).__name__
            log.error("cycle %s: decision failed: %s", state.cycle_id, detail)
            return DecisionFailed(detail)
        spec = next((spec for spec in catalog if spec.name == action), None)
        return ActionChosen(action, tool_history.records_calls(spec), new_id("evt"), spent)

    async def _prepare(
        self, state: CycleState, *, recorded: int | None, known: Known, status: ChatPosted
    ) -> tuple[list[ActionSpec], bool]:
        """Before a decision, in one batch: save the step just recorded (and clear its
        deadline, or a slow decision would time it out), extend the thread's lock unless it
        is fresh, and read the catalog unless known (it is read at every step: enabling or
        disabling an action needs no decision restart); ``status`` is posted after them,
        when there is such a batch. Returns the catalog, and whether ``status`` was posted."""
        refresh = not known.lock_fresh
        entries = known.catalog
        if not (recorded is not None or refresh or entries is None):
            return await live_actions(self.redis, entries, self._part(state.user_id)), False
        at: dict[str, int] = {}  # where each answer read below is among the results
        async with self.redis.pipeline(transaction=False) as pipe:
            if recorded is not None:
                part = self._part(state.user_id)
                self.deadlines.queue_clear(pipe, part, state.cycle_id, recorded)
                self.store.queue_save(pipe, state)
            if refresh:
                self.gate.queue_refresh(pipe, state.user_id, state.thread_id, state.message_id)
                at["refresh"] = _slot(pipe)
            if entries is None:
                pipe.hgetall(keys.action_catalog(self._part(state.user_id)))
                at["catalog"] = _slot(pipe)
            await self._queue_post(pipe, state, status)
            results = await self.publisher.execute(pipe, raise_on_error=False)
        if refresh:  # first: it handles a broker that forgot the script
            await self.gate.refreshed(
                results[at["refresh"]], state.user_id, state.thread_id, state.message_id
            )
        for index, result in enumerate(results):
            if index != at.get("refresh") and isinstance(result, Exception):
                raise result
        if entries is None:
            entries = results[at["catalog"]]
        return await live_actions(self.redis, entries, self._part(state.user_id)), True

    async def _request(self, state: CycleState, spent: dict[str, tuple[int, int]]) -> None:
        """The decision's tokens, the state with its pending step, the step's deadline, its
        call record and its request: one batch, run in that order."""
        pending = state.pending
        assert pending is not None
        request = self._envelope(
            state,
            ActionRequested(step=pending.step, action=pending.action, context=state.context()),
            event_id=pending.request_event_id,
        )
        part = self._part(state.user_id)
        async with self.redis.pipeline(transaction=False) as pipe:
            accounting.queue_add(pipe, part, state.cycle_id, spent)
            self.store.queue_save(pipe, state)
            self.deadlines.queue_set(
                pipe, part, state.cycle_id, pending.step, self.settings.step_timeout_seconds
            )
            if pending.tool_call:
                call = tool_history.call_record(state.cycle_id, pending.step, pending.action)
                await self._queue_post(pipe, state, ChatPosted(message=call))
            await self.publisher.queue(pipe, Stream.ACTIONS, request)
            await self.publisher.execute(pipe)
        log.info("cycle %s step %d: %s", state.cycle_id, pending.step, pending.action)

    async def _republish(self, state: CycleState) -> None:
        """The pending step's deadline, call record and request again."""
        pending = state.pending
        assert pending is not None
        request = self._envelope(
            state,
            ActionRequested(step=pending.step, action=pending.action, context=state.context()),
        )
        await self.deadlines.set(
            self._part(state.user_id),
            state.cycle_id,
            pending.step,
            self.settings.step_timeout_seconds,
        )
        if pending.tool_call:  # the same id: replaces the call if it was published already
            call = tool_history.call_record(state.cycle_id, pending.step, pending.action)
            await self._post_record(state, call)
        await self.publisher.publish(Stream.ACTIONS, request)

    async def _end(self, ended: CycleState, recorded: int | None) -> list[Usage]:
        """The end mark, the ended state and the cycle's usage (all its steps' tokens are in
        by now) in one batch; returns the usage."""
        part = self._part(ended.user_id)
        async with self.redis.pipeline(transaction=False) as pipe:
            if recorded is not None:
                self.deadlines.queue_clear(pipe, part, ended.cycle_id, recorded)
            pipe.set(keys.cycle_ended(part, ended.cycle_id), ended.end_reason, ex=_ENDED_MARK_TTL_S)
            self.store.queue_save(pipe, ended)
            pipe.hgetall(keys.cycle_usage(part, ended.cycle_id))
            *_, used = await pipe.execute()
        return accounting.parse_cycle(used)

    async def _announce(self, state: CycleState, used: list[Usage] | None) -> None:
        """``cycle.ended``; ``used``: the cycle's usage, if read already."""
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

    async def _release(self, state: CycleState, announced: CycleState | None) -> None:
        saved = None if announced is None else self.store.write(announced)
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

    async def _workers_within(self, part: Partition, seconds: float) -> list[ActionSpec]:
        """The live actions once a worker advertises some, within ``seconds``; none after.
        No worker is most often a moment: services start in any order (a message taken
        before the workers were up reaches decision when it starts: ADR 0018), and a lone
        worker restarts in a few seconds."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        while loop.time() < deadline:
            await asyncio.sleep(_WORKERS_POLL_S)
            entries = await self.redis.hgetall(keys.action_catalog(part))
            specs = await live_actions(self.redis, entries, part)
            if specs:
                return specs
        return []

    async def _choose(
        self, state: CycleState, catalog: list[ActionSpec]
    ) -> tuple[str, dict[str, tuple[int, int]]]:
        """The model's choice, and the tokens it took by model: counted in the metrics, for
        the caller to add to the cycle with the step. A decision that fails adds its tokens
        at once (they were spent); one made again after a crash counts again (so were those)."""
        async with (
            accounting.charged_on_failure(
                self.redis,
                self._part(state.user_id),
                state.cycle_id,
                service=SERVICE_NAME,
                prices=self.llm_prices,
            ) as used,
            asyncio.timeout(self.settings.step_timeout_seconds),
        ):
            action = await choose_action(self.llm, state, catalog, self.settings.decision_retries)
        return action, accounting.count_usage(used, service=SERVICE_NAME, prices=self.llm_prices)

    # -- usage ------------------------------------------------------------------------------

    async def _usage(self, state: CycleState, used: list[Usage] | None) -> CycleUsage | None:
        """The usage of the whole cycle, decision and steps; None when no call reported any
        (e.g. the offline planner), rather than a cost of 0 that nobody measured. Tokens a
        step spends after its cycle ended (a timeout) reach the metrics but not this sum."""
        if used is None:
            used = await accounting.read_cycle(
                self.redis, self._part(state.user_id), state.cycle_id
            )
        return accounting.priced(used, self.llm_prices) if used else None

    # -- output -----------------------------------------------------------------------------

    def _envelope(
        self, state: CycleState, payload: Payload, *, event_id: str | None = None
    ) -> Envelope:
        return Envelope(
            event_id=event_id or new_id("evt"),
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
        async with self.redis.pipeline(transaction=False) as pipe:
            if outcome.arguments:
                call = tool_history.call_record(
                    state.cycle_id, payload.step, payload.action, outcome.arguments
                )
                await self._queue_post(pipe, state, ChatPosted(message=call))
            await self._queue_post(pipe, state, ChatPosted(message=result))
            await self.publisher.execute(pipe)

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

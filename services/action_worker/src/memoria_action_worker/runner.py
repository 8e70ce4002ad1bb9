"""Run one requested step exactly once in effect, whatever the deliveries.

* A step already done is not run again: its stored completion is published again (the first
  publish may have been lost in a crash) and decision drops the duplicate.
* A step is leased to the stream entry that first took it; a duplicate request (decision
  republished after a crash) is dropped while the lease holder runs. A crashed holder's entry
  is reclaimed with the same entry id, so the lease lets it continue.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any

from memoria_action_worker import SERVICE_NAME
from memoria_action_worker.context import ActionContext, ChatSink, StoredPlan
from memoria_action_worker.registry import RegisteredAction
from memoria_contracts.events import ActionCompleted, ActionOutcome, ActionRequested, Envelope
from memoria_contracts.streams import Stream
from memoria_llm.port import LanguageModel, LLMError
from memoria_runtime import accounting, keys
from memoria_runtime.bus import Delivery, EventPublisher
from memoria_runtime.bus.consumer import is_outage
from memoria_runtime.bus.memory_requests import MemoryClient
from memoria_runtime.envelopes import follow
from memoria_runtime.health import stop_task
from memoria_runtime.partitions import Partition
from memoria_runtime.settings import SessionSettings
from memoria_text import i18n

log = logging.getLogger("memoria.action_worker")

CANCEL_POLL_S = 1.0  # how often a running step checks whether its cycle still wants it


class CycleEnded(Exception):
    """The step's cycle ended while the step ran."""


@dataclass
class StepRunner:
    settings: SessionSettings
    """What steps fall back on when a request carries no session config or persona."""
    worker: str
    """This replica's consumer name: who holds a step's lease."""
    llm_prices: dict[str, tuple[float, float]]
    redis: Any
    publisher: EventPublisher
    llm: LanguageModel
    memory: MemoryClient
    actions: dict[str, RegisteredAction]

    async def on_action_requested(self, event: Envelope, delivery: Delivery) -> None:
        request = event.payload
        if not isinstance(request, ActionRequested) or event.cycle_id is None:
            log.error("unexpected %s on actions (%s)", event.type, event.event_id)
            return
        part = self.publisher.partitions.of(event.user_id)
        done_key = keys.step_done(part, event.cycle_id, request.step)
        stored, leased, plan, ended = await self._done_or_lease(
            part, done_key, event.cycle_id, request.step, delivery.entry_id
        )
        if stored is None and ended:
            log.info("%s step %d not run: its cycle has ended", event.cycle_id, request.step)
            return
        if stored is not None:
            log.info("%s step %d already done; republishing", event.cycle_id, request.step)
            await self.publisher.publish(Stream.ACTIONS_DONE, Envelope.model_validate_json(stored))
            return
        if not leased:
            log.info("%s step %d runs elsewhere; dropping duplicate", event.cycle_id, request.step)
            return

        # The step's tokens count for its cycle, a failed step's too (they were spent): they
        # go with its completion. A step that raises instead publishes none, so its tokens
        # reach the process's metrics only.
        chat = ChatSink(self.publisher, event, request.step)
        with accounting.spent(service=SERVICE_NAME, prices=self.llm_prices) as tokens:
            outcome = await self._run(part, event, request, chat, plan)
        completed = follow(
            event,
            ActionCompleted(
                step=request.step,
                action=request.action,
                outcome=outcome,
                worker=self.worker,
                tokens=tokens,
            ),
        )
        async with self.redis.pipeline(transaction=False) as pipe:
            # The step's closing message first: decision reads the thread after the outcome.
            for message in chat.take_closing():
                await self.publisher.queue(pipe, Stream.CHAT_OUT, message)
            pipe.set(
                done_key,
                completed.model_dump_json(),
                ex=keys.step_record_ttl_s(self.settings.cycle.thread_lock_ttl_s),
            )
            await self.publisher.queue(pipe, Stream.ACTIONS_DONE, completed)
            await self.publisher.execute(pipe)

    async def _until_cycle_ends(
        self, part: Partition, cycle_id: str, work: Awaitable[ActionOutcome]
    ) -> ActionOutcome:
        """Run the action, but stop it when its cycle ends (a step timeout): nobody waits
        for the result any more, and it may be spending LLM tokens."""
        task = asyncio.ensure_future(work)
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=CANCEL_POLL_S)
                if done:
                    return task.result()
                if await self.redis.exists(keys.cycle_ended(part, cycle_id)):
                    raise CycleEnded
        finally:
            if not task.done():
                await stop_task(task)

    async def _done_or_lease(
        self, part: Partition, done_key: str, cycle_id: str, step: int, entry_id: str
    ) -> tuple[bytes | None, bool, StoredPlan, bool]:
        """The step's stored completion if it is done; else whether this entry holds the
        step's lease (taken now, or already: a reclaimed entry keeps its id); the step's
        stored plan; and whether its cycle has ended (a request redelivered after that is
        not wanted: its completion is kept only while the cycle may run). All asked in one
        round trip: a done step may get a lease it never uses, which nothing reads, and a
        step that needs no plan reads an absent key."""
        key = keys.step_lease(part, cycle_id, step)
        ttl = int(self.settings.cycle.step_timeout_seconds) + 1
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.get(done_key)
            pipe.set(key, entry_id, nx=True, ex=ttl)
            pipe.get(keys.step_plan(part, cycle_id, step))
            pipe.exists(keys.cycle_ended(part, cycle_id))
            stored, taken, plan, ended = await pipe.execute()
        if stored is not None or taken:
            return stored, True, StoredPlan(plan), bool(ended)
        holder = await self.redis.get(key)
        leased = holder is not None and holder.decode() == entry_id
        return None, leased, StoredPlan(plan), bool(ended)

    async def _run(
        self,
        part: Partition,
        event: Envelope,
        request: ActionRequested,
        chat: ChatSink,
        plan: StoredPlan,
    ) -> ActionOutcome:
        # Errors are shown to the user when the step ends the cycle ("The step 'X' failed:
        # ..."): in the conversation's language, like every notice.
        language = request.context.language
        registered = self.actions.get(request.action)
        if registered is None:
            return ActionOutcome(
                status="failed",
                ends_cycle=False,
                summary="not run",
                error=i18n.text("step_unavailable", language),
            )
        context = ActionContext(
            event=event,
            request=request,
            llm=self.llm,
            chat=chat,
            settings=self.settings,
            memory=self.memory,
            redis=self.redis,
            partition=part,
            stored_plan=plan,
        )
        try:
            return await self._until_cycle_ends(part, event.cycle_id or "", registered.run(context))
        except CycleEnded:
            log.info("%s step %d stopped: its cycle ended", event.cycle_id, request.step)
            error = i18n.text("step_cycle_ended", language)
        except LLMError as exc:
            log.warning("%s failed on the LLM: %s", request.action, exc)
            error = i18n.text("step_llm_failed", language, detail=exc)
        except Exception as exc:
            if is_outage(exc):
                # The broker was out of reach (a network cut): the step did nothing wrong.
                # Its entry stays pending and runs again once the broker is back (the bus
                # does not count that against it); its messages have the same ids again.
                log.warning("%s cut short by a broker outage: %s", request.action, exc)
                raise
            # A bug in one action must not stall the cycle until its timeout.
            log.exception("%s raised", request.action)
            error = i18n.text("step_internal_error", language, detail=type(exc).__name__)
        return ActionOutcome(
            status="failed",
            ends_cycle=registered.spec.ends_cycle,
            summary="failed",
            error=error,
        )

"""Fewer round trips to Redis: the executor's writes, held and sent together.

A write nobody waits for (a state saved, a record posted, a deadline set...) is held; the
held writes go in one pipeline, in order, just before the next thing the delivery waits for
(a Redis read, the thread gate's scripts, the memory service, the model), with that read as
the pipeline's last command when it is one, and at the end of the delivery. So a Finalize
cycle waits for Redis 4 times to start and 3 times to end, whatever its effects.

**What a crash leaves.** Redis runs a pipeline's commands in order; a process dying while it
is sent leaves a prefix of them done, which is what dying between two effects would leave
without batching. What that leaves is safe because of the order the core gives effects
(``memoria_decision.core``), and because every effect can run twice:

1. The thread gate's ``open`` takes or refreshes the thread's lock for the message (and
   reads the pending action). Dying after: the redelivery owns the lock too (same id).
2. The new state is stored (``SET NX``) before the echo, recalled memories and the pending
   action cleared. Dying after: the redelivery finds the state, echoes the message if it
   was not saved as echoed (same record id: a replacement), and takes the stored route,
   clearing the answered pending action again (by its id: one asked since stays).
3. A decision's writes (the step just recorded, its deadline cleared, the lock extended,
   ``Thinking…``) go before the model is asked. Dying during the call: the redelivered
   completion finds the step recorded and decides again.
4. A chosen step: the state with the pending step (and the tokens spent choosing it), its
   deadline, its call record, its request, in that order. Dying before the request: the next
   event (the previous step's completion, or the message, again) publishes it again; workers
   drop a duplicate. Dying after the deadline: it times the step out if nothing else comes.
5. A completed step's call and result records go before it is recorded (fixed ids).
6. An end: the step's deadline cleared, the mark that stops running steps, the ended
   state; then ``cycle.ended``; then the gate's ``release``, which writes the tombstone in
   the same atomic step as it hands the thread on. Dying before the release announces
   again (clients replace by cycle id), never releases unannounced.
7. A timeout: the sweeper claims the deadline (moving it later), ends the cycle as in 6,
   then clears it. Dying in between: it comes due again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from inspect import iscoroutine
from typing import Any

from memoria_contracts.events import Envelope
from memoria_contracts.streams import Stream
from memoria_runtime.bus import EventPublisher

Queue = Callable[[Any], Awaitable[None] | None]  # commands queued on a pipeline
Check = Callable[[Any], Awaitable[object]]  # reads a held command's answer, or its error


@dataclass
class Batch:
    redis: Any
    publisher: EventPublisher
    _held: list[tuple[Queue, Check | None]] = field(default_factory=list)

    def hold(self, queue: Queue, check: Check | None = None) -> None:
        self._held.append((queue, check))

    def append(self, stream: Stream, envelope: Envelope) -> None:
        """An append to ``stream``, held like any write."""
        self.hold(lambda pipe: self.publisher.queue(pipe, stream, envelope))

    async def send(self, read: Callable[[Any], Any] | None = None) -> Any:
        """Send what is held, with ``read`` last; returns ``read``'s answer."""
        held, self._held = self._held, []
        if not held and read is None:
            return None
        checks: list[tuple[int, Check]] = []
        async with self.redis.pipeline(transaction=False) as pipe:
            for queue, check in held:
                queued = queue(pipe)
                if iscoroutine(queued):  # not a cluster pipeline: awaiting one empties it
                    await queued
                if check is not None:
                    checks.append((len(pipe) - 1, check))
            if read is not None:
                read(pipe)
            answers = await self.publisher.execute(pipe, raise_on_error=False)
        for index, check in checks:  # a lock's refresh: a broker that forgot the script
            await check(answers[index])
            answers[index] = None
        if failed := next((a for a in answers if isinstance(a, Exception)), None):
            raise failed
        return answers[-1] if read is not None else None

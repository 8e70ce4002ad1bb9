"""Every Redis key Memoria writes besides streams, in one place.

User and thread ids are validated by the contracts (no ':' allowed in thread ids), so keys
built from them cannot collide across users.

Keys of a user's threads and cycles take the user's :class:`Partition`
(``settings.partitions.of(user_id)``): they carry its hash tag, so that the thread gate's
scripts and a step's pipelines touch one cluster slot (partitions.py).
"""

from __future__ import annotations

from memoria_runtime.partitions import Partition

PREFIX = "memoria"

REDELIVERY_SLACK_S = 600
"""How long after the longest a cycle can run (its thread lock's life) a request for one of
its steps may still be redelivered: an entry whose runs met broker outages is reclaimed up
to 4 × MEMORIA_MAX_DELIVERIES times, a reclaim window apart (docs/chaos.md, bug 6)."""


def step_record_ttl_s(thread_lock_ttl_s: int) -> int:
    """How long what a step's request may still need is kept in Redis (its plan and
    completion, its cycle's ended mark): while the cycle may still run or the request come
    again, not longer (Redis holds what is in flight)."""
    return thread_lock_ttl_s + REDELIVERY_SLACK_S


CYCLE_TTL_S = 24 * 3600
"""How long a running cycle's state is kept after their last write: far longer
than any cycle runs (its thread's lock expires first). An ended cycle leaves only a small
tombstone, kept as long as its events can be redelivered; what it said is in the memory
service's cycle traces."""


def thread_lock(part: Partition, user_id: str, thread_id: str) -> str:
    return part.scoped(f"{PREFIX}:thread:{user_id}:{thread_id}:lock")


def thread_queue(part: Partition, user_id: str, thread_id: str) -> str:
    return part.scoped(f"{PREFIX}:thread:{user_id}:{thread_id}:queue")


def pending_action(part: Partition, user_id: str, thread_id: str) -> str:
    """The action a thread waits to have confirmed (decision's ``pendingAction``)."""
    return part.scoped(f"{PREFIX}:thread:{user_id}:{thread_id}:pending")


def message_seen(part: Partition, user_id: str, client_message_id: str) -> str:
    return part.scoped(f"{PREFIX}:seen:{user_id}:{client_message_id}")


def cycle_state(part: Partition, cycle_id: str) -> str:
    return part.scoped(f"{PREFIX}:cycle:{cycle_id}")


def cycle_ended(part: Partition, cycle_id: str) -> str:
    """Set when a cycle ends, so workers stop steps that are no longer wanted."""
    return part.scoped(f"{PREFIX}:cycle:{cycle_id}:ended")


def step_done(part: Partition, cycle_id: str, step: int) -> str:
    return part.scoped(f"{PREFIX}:step:{cycle_id}:{step}:done")


def step_plan(part: Partition, cycle_id: str, step: int) -> str:
    """The structured plan an action made for the step (reused if the step runs again)."""
    return part.scoped(f"{PREFIX}:step:{cycle_id}:{step}:plan")


def step_lease(part: Partition, cycle_id: str, step: int) -> str:
    return part.scoped(f"{PREFIX}:step:{cycle_id}:{step}:lease")


def step_deadlines(part: Partition) -> str:
    """Sorted set: member = ``cycle_id|step``, score = unix time the step must be done by;
    one per partition, written in the pipelines of the partition's steps."""
    return part.scoped(f"{PREFIX}:deadlines")


def user_route(part: Partition, user_id: str) -> str:
    """Set: the gateways holding a socket (or an HTTP request waiting for frames) of the
    user, which chat.out appends of the partition copy each frame to (routed fan-out)."""
    return part.scoped(f"{PREFIX}:route:{user_id}")


def gateway_inbox(part: Partition, gateway: str) -> str:
    """Stream: the frames of the partition's users that ``gateway`` delivers (routed
    fan-out); it expires unless the gateway keeps it alive."""
    return part.scoped(f"{PREFIX}:gateway:{gateway}:inbox")


ACTION_CATALOG = f"{PREFIX}:actions:catalog"
"""Hash: field = worker id, value = JSON list of the actions it runs and when it expires."""


def action_catalog(part: Partition) -> str:
    """:data:`ACTION_CATALOG` of one partition: workers write every partition's copy, and a
    cycle reads its own partition's with its step's other commands (one slot, and no single
    key every cycle of a cluster reads)."""
    return part.scoped(ACTION_CATALOG)


SERVICES = f"{PREFIX}:services"
"""Hash: field = consumer name, value = JSON presence of a serving process (presence.py)."""

BUS_LAYOUT = f"{PREFIX}:bus:layout"
"""The partition layout the running services share (checked by each at start)."""

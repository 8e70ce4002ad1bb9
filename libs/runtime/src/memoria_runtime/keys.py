"""Every Redis key Memoria writes besides streams, in one place.

User and thread ids are validated by the contracts (no ':' allowed in thread ids), so keys
built from them cannot collide across users.
"""

from __future__ import annotations

PREFIX = "memoria"

CYCLE_TTL_S = 24 * 3600
"""How long a running cycle's state and usage are kept after their last write: far longer
than any cycle runs (its thread's lock expires first). An ended cycle leaves only a small
tombstone, kept as long as its events can be redelivered; what it said is in the memory
service's cycle traces."""


def thread_lock(user_id: str, thread_id: str) -> str:
    return f"{PREFIX}:thread:{user_id}:{thread_id}:lock"


def thread_queue(user_id: str, thread_id: str) -> str:
    return f"{PREFIX}:thread:{user_id}:{thread_id}:queue"


def pending_action(user_id: str, thread_id: str) -> str:
    """The action a thread waits to have confirmed (decision's ``pendingAction``)."""
    return f"{PREFIX}:thread:{user_id}:{thread_id}:pending"


def message_seen(user_id: str, client_message_id: str) -> str:
    return f"{PREFIX}:seen:{user_id}:{client_message_id}"


def cycle_state(cycle_id: str) -> str:
    return f"{PREFIX}:cycle:{cycle_id}"


def cycle_usage(cycle_id: str) -> str:
    """Hash: ``<model>:in`` / ``<model>:out`` → tokens the cycle's LLM calls used so far."""
    return f"{PREFIX}:cycle:{cycle_id}:usage"


def cycle_ended(cycle_id: str) -> str:
    """Set when a cycle ends, so workers stop steps that are no longer wanted."""
    return f"{PREFIX}:cycle:{cycle_id}:ended"


def step_done(cycle_id: str, step: int) -> str:
    return f"{PREFIX}:step:{cycle_id}:{step}:done"


def step_plan(cycle_id: str, step: int) -> str:
    """The structured plan an action made for the step (reused if the step runs again)."""
    return f"{PREFIX}:step:{cycle_id}:{step}:plan"


def step_lease(cycle_id: str, step: int) -> str:
    return f"{PREFIX}:step:{cycle_id}:{step}:lease"


STEP_DEADLINES = f"{PREFIX}:deadlines"
"""Sorted set: member = ``cycle_id|step``, score = unix time the step must be done by."""

ACTION_CATALOG = f"{PREFIX}:actions:catalog"
"""Hash: field = worker id, value = JSON list of the actions it runs and when it expires."""

SERVICES = f"{PREFIX}:services"
"""Hash: field = consumer name, value = JSON presence of a serving process (presence.py)."""

"""Building the next envelope of a cycle from the one being handled."""

from __future__ import annotations

from memoria_contracts.events import Envelope, Payload
from memoria_runtime.telemetry import current_trace_carrier


def follow(event: Envelope, payload: Payload, *, cycle_id: str | None = None) -> Envelope:
    """Same user, thread and cycle; the trace context is the current span's, so the next hop
    is a child of this one (falling back to the incoming event's context)."""
    return Envelope(
        cycle_id=cycle_id if cycle_id is not None else event.cycle_id,
        user_id=event.user_id,
        thread_id=event.thread_id,
        trace=current_trace_carrier() or dict(event.trace),
        payload=payload,
    )

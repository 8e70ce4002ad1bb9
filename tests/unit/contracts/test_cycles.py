"""The cycle trace request and replies travel in envelopes like every other payload."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from memoria_contracts.chat import ChatRecord
from memoria_contracts.cycles import (
    Cycle,
    CycleEvent,
    CycleFailure,
    CycleFound,
    CycleGet,
    cycle_id_for,
)
from memoria_contracts.events import Envelope

WHEN = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)


def test_a_cycle_trace_round_trips_in_an_envelope() -> None:
    message = ChatRecord(id="msg_1", chat_history=True, modal="text", role="user", content="hi")
    cycle = Cycle(
        cycle_id="cyc_1",
        thread_id="main",
        trace_id="4bf92f3577b34da6a3ce929d0e0e4736",
        started_at=WHEN,
        ended_at=None,
        end_reason=None,
        actions=[],
        events=[
            CycleEvent(
                event_id="evt_1", at=WHEN, stream="chat.in", type="user.message", message=message
            )
        ],
    )
    for payload in (
        CycleGet(cycle_id="cyc_1"),
        CycleFound(cycle=cycle),
        CycleFailure(code="not_found", error_message="no such cycle", cycle_id="cyc_1"),
    ):
        envelope = Envelope(user_id="ana", thread_id="api", payload=payload)
        again = Envelope.model_validate_json(envelope.model_dump_json())
        assert again == envelope and again.type == payload.type


@pytest.mark.parametrize("cycle_id", ["", "cyc_", "msg_1", "cyc_a/b", "cyc_a.b", "cyc_" + "x" * 81])
def test_a_request_names_a_well_formed_cycle(cycle_id: str) -> None:
    with pytest.raises(ValidationError):
        CycleGet(cycle_id=cycle_id)


def test_a_user_message_starts_the_cycle_of_the_same_suffix() -> None:
    assert cycle_id_for("msg_01abc") == "cyc_01abc"

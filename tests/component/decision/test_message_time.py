"""The time the user sent a message travels with the cycle to every step, so a memory saved
in a later step is stamped (and its relative dates counted) from that time, not the step's."""

from __future__ import annotations

from datetime import UTC, datetime

from in_process_bus import FINALIZE, RecordingPublisher, scripted_engine
from redis.asyncio import Redis

from memoria_contracts.cycles import cycle_id_for
from memoria_contracts.events import ActionRequested, Envelope, UserMessageReceived
from memoria_contracts.streams import Stream
from memoria_decision.core.state import CycleState
from memoria_decision.store import CycleStore
from memoria_runtime import catalog
from memoria_runtime.partitions import Partitions

PARTITIONS = Partitions()
ONE = PARTITIONS.all[0]  # the embedded default: one partition, keys untagged

SENT_AT = datetime(2026, 11, 27, 23, 59, 30, tzinfo=UTC)


async def test_the_action_request_carries_the_time_the_message_was_sent(redis: Redis) -> None:
    await catalog.advertise(redis, "worker-1", [FINALIZE], ttl_s=60)
    publisher = RecordingPublisher()
    engine = scripted_engine(redis, publisher)
    message = UserMessageReceived(message_id="msg_time1", content="I moved to Porto last week")
    event = Envelope(user_id="ana", thread_id="t1", time=SENT_AT, payload=message)

    await engine.on_user_message(event, message, b"framed")

    (requested,) = [e.payload for e in publisher.on(Stream.ACTIONS)]
    assert isinstance(requested, ActionRequested)
    assert requested.context.original_message.created_at == SENT_AT
    # Kept in the cycle's stored state, so a later step (or another replica) sends it too.
    store = CycleStore(redis, PARTITIONS, released_ttl_s=60)
    state = await store.load(ONE, cycle_id_for(message.message_id))
    assert isinstance(state, CycleState)
    assert state.context().original_message.created_at == SENT_AT

"""What an ended cycle leaves in Redis: its state is replaced, as the thread is released, by a
tombstone kept only while an event of the cycle can still be delivered again; the usage read
for its announcement goes as soon; the mark that stops its running steps stays while a
request for one of its steps may still come. All of
it together under a kilobyte, measured by the server (``MEMORY USAGE``). What the cycle said
is kept by the memory service (its cycle traces), not here. On a real Redis, scripted LLM."""

from __future__ import annotations

from in_process_bus import FINALIZE, RecordingPublisher, scripted_engine
from redis.asyncio import Redis

from memoria_contracts.cycles import cycle_id_for
from memoria_contracts.events import (
    ActionCompleted,
    ActionOutcome,
    ActionRequested,
    Envelope,
    UserMessageReceived,
)
from memoria_decision.core.state import Released
from memoria_decision.store import released_ttl_s
from memoria_runtime import catalog, keys
from memoria_runtime.envelopes import follow
from memoria_runtime.settings import Settings

ONE = Settings.load(_env_file=None).bus.partitions.all[0]  # the embedded default: keys untagged

LEFT_BYTES = 1024
LONG_MESSAGE = "Please remember all of this: " + "my garden has roses and tulips. " * 60


async def test_an_ended_cycle_leaves_under_a_kilobyte_for_minutes(redis: Redis) -> None:
    settings = Settings.load(_env_file=None)
    await catalog.advertise(redis, "worker-1", [FINALIZE], ttl_s=60)
    publisher = RecordingPublisher()
    engine = scripted_engine(redis, publisher, settings=settings)
    message = UserMessageReceived(message_id="msg_leftover1", content=LONG_MESSAGE)
    await engine.on_user_message(
        Envelope(user_id="ana", thread_id="t1", payload=message), message, b"framed"
    )
    cycle_id = cycle_id_for(message.message_id)
    running = await redis.memory_usage(keys.cycle_state(ONE, cycle_id))

    (request,) = [e for e in publisher.sent if isinstance(e[1].payload, ActionRequested)]
    done = ActionCompleted(
        step=1,
        action="Finalize",
        outcome=ActionOutcome(status="ok", ends_cycle=True, summary="answered the user"),
        worker="worker-1",
        tokens={"scripted": (120, 3)},
    )
    await engine.on_action_completed(follow(request[1], done), done)

    left = [key async for key in redis.scan_iter(match=f"*{cycle_id}*")]
    sizes = {key.decode(): await redis.memory_usage(key) or 0 for key in left}
    ttls = {key.decode(): await redis.ttl(key) for key in left}
    print(f"running state {running} B; left after the end: {sizes} (TTL s: {ttls})")
    assert sum(sizes.values()) <= LEFT_BYTES, sizes
    assert running is not None and running > sum(sizes.values())
    window = released_ttl_s(settings.bus)
    assert 0 < ttls[keys.cycle_state(ONE, cycle_id)] <= window
    assert (
        0
        < ttls[keys.cycle_ended(ONE, cycle_id)]
        <= keys.step_record_ttl_s(settings.cycle.thread_lock_ttl_s)
    )
    stored = await engine.store.load(ONE, cycle_id)
    assert isinstance(stored, Released) and stored.end_reason == "done"


def test_the_tombstone_outlives_every_redelivery_of_the_cycles_events() -> None:
    """An entry whose handler died is delivered again once idle ``reclaim_idle_ms`` (the
    reclaimer looks at least every 2 s), and parked after 4 × ``max_deliveries``."""
    assert released_ttl_s(Settings.load(_env_file=None).bus) == (30 + 2) * 5 * 4
    quick = Settings.load(_env_file=None, reclaim_idle_ms=5_000, max_deliveries=3)
    assert released_ttl_s(quick.bus) == (5 + 2) * 3 * 4

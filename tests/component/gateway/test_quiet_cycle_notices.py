"""The gateway tells a user whose cycle went quiet why, as far as it can tell (quiet_cycles.py),
on a real broker: services' announcements present or not, the broker reachable or not. The
socket is a recording stand-in, as in test_ws_resume.py."""

from __future__ import annotations

import time
from typing import cast

from recording_socket import RecordingSocket
from redis.asyncio import Redis
from starlette.websockets import WebSocket

from memoria_contracts.frames import CycleEndFrame
from memoria_gateway.hub import Connection, ConnectionHub
from memoria_gateway.quiet_cycles import QuietCycleNotices
from memoria_runtime import presence

QUIET_S = 10.0


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def announce(redis: Redis, service: str) -> None:
    await presence.announce(
        redis,
        presence.Presence(
            service=service,
            consumer=f"{service}-1",
            pid=1,
            serving_since=time.time(),
            expires_at=time.time() + 60,
        ),
    )


async def connected(hub: ConnectionHub, user: str) -> tuple[Connection, RecordingSocket]:
    socket = RecordingSocket()
    connection = Connection(cast("WebSocket", socket), user)
    hub.add(connection)
    return connection, socket


async def test_a_quiet_cycle_names_the_service_that_stopped_announcing_itself(redis: Redis) -> None:
    hub, clock = ConnectionHub(), Clock()
    notices = QuietCycleNotices(hub, redis, QUIET_S, clock=clock)
    connection, socket = await connected(hub, "ana")
    try:
        await announce(redis, "action-worker")
        await announce(redis, "memory")  # decision is missing
        notices.accepted("ana", "t1", "cyc_1", "remember that I like tea")
        clock.now += QUIET_S - 1
        assert await notices.tell_quiet_users() == 0
        clock.now += 1
        assert await notices.tell_quiet_users() == 1
        [status] = await socket.sent_at_least(1)
        assert status["id"] == "wait:cyc_1"
        assert status["modal"] == "textForReplace"
        assert "decision" in status["content"]
        assert "event_id" not in status
        assert await notices.tell_quiet_users() == 0  # told: quiet again for a while first
    finally:
        await hub.remove(connection)


async def test_a_quiet_cycle_with_every_service_there_is_only_slow_and_its_end_stops_it(
    redis: Redis,
) -> None:
    hub, clock = ConnectionHub(), Clock()
    notices = QuietCycleNotices(hub, redis, QUIET_S, clock=clock)
    connection, socket = await connected(hub, "ana")
    try:
        for service in ("decision", "action-worker", "memory"):
            await announce(redis, service)
        notices.accepted("ana", "t1", "cyc_1", "lembra que eu gosto de chá")
        clock.now += QUIET_S
        assert await notices.tell_quiet_users() == 1
        [status] = await socket.sent_at_least(1)
        assert "demorando" in status["content"]  # in the user's language
        notices.on_frame(
            "ana", CycleEndFrame(cycle_id="cyc_1", thread_id="t1", actions=[], reason="done")
        )
        clock.now += 10 * QUIET_S
        assert await notices.tell_quiet_users() == 0
    finally:
        await hub.remove(connection)


async def test_a_broker_out_of_reach_is_what_the_user_is_told() -> None:
    unreachable = Redis(host="127.0.0.1", port=1, socket_connect_timeout=1)
    hub, clock = ConnectionHub(), Clock()
    notices = QuietCycleNotices(hub, unreachable, QUIET_S, clock=clock)
    connection, socket = await connected(hub, "ana")
    try:
        notices.accepted("ana", "t1", "cyc_1", "hello")
        clock.now += QUIET_S
        assert await notices.tell_quiet_users() == 1
        [status] = await socket.sent_at_least(1)
        assert "broker" in status["content"]
    finally:
        await hub.remove(connection)
        await unreachable.aclose()


async def test_a_user_with_no_socket_left_is_not_told_and_forgotten(redis: Redis) -> None:
    hub, clock = ConnectionHub(), Clock()
    notices = QuietCycleNotices(hub, redis, QUIET_S, clock=clock)
    notices.accepted("ana", "t1", "cyc_1", "hello")
    clock.now += QUIET_S
    assert await notices.tell_quiet_users() == 0
    assert len(notices.cycles) == 0

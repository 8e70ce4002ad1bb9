"""The hub tells observers of the frames it delivers to a user's sockets, and sends a frame
of the gateway's own to every socket of a user (quiet_cycles.py uses both)."""

from __future__ import annotations

import asyncio
from typing import cast

from recording_socket import RecordingSocket
from starlette.websockets import WebSocket

from memoria_contracts.frames import CycleEndFrame
from memoria_gateway.frames import OutboundFrame
from memoria_gateway.hub import Connection, ConnectionHub
from memoria_runtime.bus.entry_id import EntryId


async def test_observers_see_the_frames_of_users_with_a_socket_here() -> None:
    hub = ConnectionHub()
    seen: list[tuple[str, OutboundFrame]] = []
    hub.observe(lambda user, frame: seen.append((user, frame)))
    socket = RecordingSocket()
    connection = Connection(cast("WebSocket", socket), "ana")
    hub.add(connection)
    end = CycleEndFrame(cycle_id="cyc_1", thread_id="t1", actions=[], reason="done")
    entry = EntryId.parse("1-0")
    assert entry is not None
    try:
        hub.deliver("ana", entry, end)
        hub.deliver("bob", entry, end)  # no socket of bob's here: nobody to tell
        assert seen == [("ana", end)]
        await socket.sent_at_least(1)
    finally:
        await hub.remove(connection)


async def test_a_frame_of_the_gateways_own_goes_to_every_socket_of_the_user() -> None:
    hub = ConnectionHub()
    sockets = [RecordingSocket(), RecordingSocket()]
    connections = [Connection(cast("WebSocket", s), "ana") for s in sockets]
    other = RecordingSocket()
    connections.append(Connection(cast("WebSocket", other), "bob"))
    for connection in connections:
        hub.add(connection)
    try:
        hub.send_to("ana", '{"type": "message", "id": "wait:cyc_1"}')
        for socket in sockets:
            await socket.sent_at_least(1)
            assert socket.sent == [{"type": "message", "id": "wait:cyc_1"}]
        await asyncio.sleep(0.01)
        assert other.sent == []
    finally:
        for connection in connections:
            await hub.remove(connection)

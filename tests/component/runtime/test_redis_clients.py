"""Every service connection to the broker notices a broker that vanished without closing it
(TCP keepalive) and gives up connecting to a vanished address in seconds."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest
from redis.asyncio import Redis

from memoria_runtime import redis_clients
from memoria_runtime.settings import Settings


async def _socket_of(client: Redis) -> socket.socket:
    await client.ping()
    pool: Any = client.connection_pool
    connection = await pool.get_connection()
    try:
        sock: socket.socket = connection._writer.transport.get_extra_info("socket")
        return sock
    finally:
        await pool.release(connection)


@contextlib.asynccontextmanager
async def client_of(kind: str, settings: Settings) -> AsyncIterator[Redis]:
    if kind == "own pool":
        client = redis_clients.connect(settings.bus)
    else:
        client = redis_clients.connect_bounded(settings.bus, max_connections=2, wait_s=1.0)
    try:
        yield client
    finally:
        await client.aclose()


@pytest.mark.parametrize("kind", ["own pool", "bounded pool"])
async def test_a_connection_probes_a_silent_broker_and_gives_up_on_it(
    redis_url: str, kind: str
) -> None:
    async with client_of(kind, Settings.load(redis_url=redis_url)) as client:
        sock = await _socket_of(client)
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
        probing = {
            socket.TCP_KEEPIDLE: redis_clients.KEEPALIVE_IDLE_S,
            socket.TCP_KEEPINTVL: redis_clients.KEEPALIVE_INTERVAL_S,
            socket.TCP_KEEPCNT: redis_clients.KEEPALIVE_PROBES,
        }
        # A dead broker noticed in 19 s, not after the kernel's default two hours of quiet.
        assert {opt: sock.getsockopt(socket.IPPROTO_TCP, opt) for opt in probing} == probing
        kwargs = client.connection_pool.connection_kwargs
        assert kwargs["socket_connect_timeout"] == redis_clients.CONNECT_TIMEOUT_S


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_a_command_after_its_connection_was_reset_is_sent_again_on_any_event_loop(
    valkey_server: Any, loop: str
) -> None:
    """uvloop, which the gateway runs on, raises RuntimeError (not ConnectionError) for a
    write to a connection the peer reset: the HTTP API answered 500 in the reset chaos run."""
    import asyncio
    import sys
    from pathlib import Path

    import uvloop

    sys.path.insert(0, str(Path(__file__).parents[2] / "support"))
    from fault_proxy import FaultProxy

    async def reset_then_ping() -> bool:
        async with FaultProxy(("127.0.0.1", valkey_server.port)) as proxy:
            settings = Settings.load(redis_url=f"redis://127.0.0.1:{proxy.port}/0")
            client = redis_clients.connect(settings.bus)
            try:
                await client.ping()
                assert proxy.reset_all() == 1
                await asyncio.sleep(0.2)  # the reset has arrived: the transport is closed
                return bool(await client.ping())
            finally:
                await client.aclose()

    run = uvloop.run if loop == "uvloop" else asyncio.run
    assert run(reset_then_ping())

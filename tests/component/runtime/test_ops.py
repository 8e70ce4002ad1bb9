"""The ops port: metrics and probes over real HTTP, and the probe command that reads them."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest

from memoria_runtime import metrics, ops, probe
from memoria_runtime.health import Health


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def health() -> Health:
    return Health()


@pytest.fixture
def base(health: Health) -> Iterator[str]:
    port = free_port()
    stop = ops.serve(port, health, host="127.0.0.1")
    assert stop is not None
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop()


def test_metrics_are_served_until_stopped(health: Health) -> None:
    metrics.count_cycle_end("done", 1.5)
    port = free_port()
    stop = ops.serve(port, health, host="127.0.0.1")
    assert stop is not None
    try:
        response = httpx.get(f"http://127.0.0.1:{port}/metrics")
        assert response.status_code == 200
        assert f'{metrics.CYCLES_TOTAL}{{reason="done"}}' in response.text
    finally:
        stop()
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/metrics")


def test_probes_follow_the_service_from_starting_to_ready_to_stopping(
    base: str, health: Health
) -> None:
    assert httpx.get(f"{base}/livez").status_code == 200
    starting = httpx.get(f"{base}/readyz")
    assert starting.status_code == 503 and starting.json()["status"] == "starting"
    health.serving()
    health.broker_ok()
    for path in ("/readyz", "/healthz"):
        assert httpx.get(f"{base}{path}").json() == {"status": "ok"}
    health.stopping()
    assert httpx.get(f"{base}/readyz").status_code == 503


def test_an_unknown_path_is_404(base: str) -> None:
    response = httpx.get(f"{base}/nope")
    assert response.status_code == 404 and "/readyz" in response.text


def test_a_busy_port_leaves_the_service_running_without_ops(
    health: Health, caplog: pytest.LogCaptureFixture
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        assert ops.serve(taken.getsockname()[1], health, host="127.0.0.1") is None
    assert "cannot serve the ops port" in caplog.text


def test_the_probe_command_exits_0_only_when_ready(base: str, health: Health) -> None:
    command = [sys.executable, "-m", "memoria_runtime.probe", f"{base}/readyz"]
    not_ready = subprocess.run(command, capture_output=True, text=True, check=False)
    assert not_ready.returncode == 1 and "503" in not_ready.stderr
    health.serving()
    health.broker_ok()
    assert subprocess.run(command, capture_output=True, check=False).returncode == 0


def test_the_probe_fails_on_a_closed_port() -> None:
    ok, report = probe.probe(f"http://127.0.0.1:{free_port()}/readyz", timeout=1)
    assert not ok and "refused" in report.lower()


def test_the_probe_asks_the_ops_port_else_the_gateway() -> None:
    assert probe.default_url({"MEMORIA_METRICS_PORT": "9464"}) == "http://127.0.0.1:9464/readyz"
    assert probe.default_url({"MEMORIA_GATEWAY_PORT": "8080"}) == "http://127.0.0.1:8080/readyz"
    assert probe.default_url({}) == "http://127.0.0.1:8000/readyz"

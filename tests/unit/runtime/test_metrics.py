"""The metrics endpoint of the services without HTTP of their own."""

from __future__ import annotations

import socket

import httpx
import pytest

from memoria_runtime import metrics


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_serve_exposes_the_registry_until_stopped() -> None:
    metrics.count_cycle_end("done", 1.5)
    port = free_port()
    stop = metrics.serve(port)
    assert stop is not None
    try:
        response = httpx.get(f"http://127.0.0.1:{port}/metrics")
        assert response.status_code == 200
        assert f'{metrics.CYCLES_TOTAL}{{reason="done"}}' in response.text
        assert f"{metrics.CYCLE_DURATION_SECONDS}_count" in response.text
    finally:
        stop()
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/metrics")


def test_a_busy_port_leaves_the_service_running_without_metrics(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        assert metrics.serve(taken.getsockname()[1]) is None
    assert "cannot serve metrics" in caplog.text


def test_a_negative_duration_is_observed_as_zero() -> None:
    def zero_bucket() -> float:
        labels = {"le": str(metrics.CYCLE_DURATION_BUCKETS_S[0])}
        name = f"{metrics.CYCLE_DURATION_SECONDS}_bucket"
        return metrics.REGISTRY.get_sample_value(name, labels) or 0.0

    before = zero_bucket()
    metrics.count_cycle_end("done", -3.0)  # started on a replica whose clock runs ahead
    assert zero_bucket() - before == 1

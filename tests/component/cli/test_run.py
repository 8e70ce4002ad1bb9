"""`memoria run` around the supervisor: URLs, the external-broker check, the gateway probe."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from memoria_cli.run import (
    SERVICES,
    build_specs,
    check_external_broker,
    gateway_ready,
    gateway_url,
    lock_data_dir,
    redact,
    run,
)
from memoria_cli.supervisor import EXIT_STARTUP_FAILED, StartupError
from memoria_runtime.settings import Settings


class Health(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/healthz" else 404)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:  # keep test output quiet
        pass


@pytest.fixture
def health_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Health)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize(
    ("host", "url"),
    [
        ("127.0.0.1", "http://127.0.0.1:8123/"),
        ("0.0.0.0", "http://127.0.0.1:8123/"),
        ("::", "http://127.0.0.1:8123/"),
        ("::1", "http://[::1]:8123/"),
        ("chat.local", "http://chat.local:8123/"),
    ],
)
def test_gateway_url_is_one_a_browser_on_this_machine_can_open(host: str, url: str) -> None:
    assert gateway_url(Settings.load(gateway_host=host, gateway_port=8123).gateway) == url


def test_redact_hides_only_the_password() -> None:
    assert redact("redis://user:s3cret@db.example:6380/2") == "redis://user:***@db.example:6380/2"
    assert redact("redis://:s3cret@db.example/0") == "redis://:***@db.example/0"
    assert redact("redis://db.example:6379/0") == "redis://db.example:6379/0"


async def test_gateway_is_ready_when_healthz_answers_200(health_server: str) -> None:
    assert await gateway_ready(health_server)()
    assert not await gateway_ready(health_server + "missing/")()


async def test_an_unreachable_external_broker_is_a_clear_error_without_the_password(
    unused_port: int,
) -> None:
    url = f"redis://user:s3cret@127.0.0.1:{unused_port}/0"
    with pytest.raises(StartupError) as caught:
        await check_external_broker(url)
    message = str(caught.value)
    assert f"cannot reach the broker at redis://user:***@127.0.0.1:{unused_port}/0" in message
    assert "s3cret" not in message


async def test_run_stops_before_starting_anything_when_the_broker_is_unreachable(
    tmp_path: Path, unused_port: int, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = Settings.load(
        data_dir=tmp_path / "data", redis_url=f"redis://127.0.0.1:{unused_port}"
    )
    assert await run(settings) == EXIT_STARTUP_FAILED
    captured = capsys.readouterr()
    assert "memoria: cannot start: cannot reach the broker" in captured.err
    assert "started" not in captured.out
    assert (tmp_path / "data").is_dir()


def test_one_run_per_data_directory(tmp_path: Path) -> None:
    with (
        lock_data_dir(tmp_path),
        pytest.raises(StartupError, match="another `memoria run` is using"),
    ):
        lock_data_dir(tmp_path)
    lock_data_dir(tmp_path).close()  # free again once the first run let go


async def test_run_refuses_a_data_directory_in_use(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with lock_data_dir(tmp_path):
        assert await run(Settings.load(data_dir=tmp_path)) == EXIT_STARTUP_FAILED
    assert f"another `memoria run` is using {tmp_path}" in capsys.readouterr().err


SERVICE_NAMES = [name for name, _, _ in SERVICES]


def test_embedded_broker_and_milvus_start_before_the_services(tmp_path: Path) -> None:
    settings = Settings.load(
        data_dir=tmp_path,
        redis_url=None,
        milvus_uri=None,
        embedded_redis_port=6391,
        embedded_milvus_port=19555,
    )
    specs = build_specs(settings)

    assert [spec.name for spec in specs] == ["valkey", "milvus", *SERVICE_NAMES]
    milvus = specs[1]
    assert milvus.critical
    assert milvus.ready is not None
    assert list(milvus.argv[-4:]) == ["--host", "127.0.0.1", "--port", "19555"]
    for service in specs[2:]:
        assert service.env is not None
        assert service.env["MEMORIA_REDIS_URL"] == "redis://127.0.0.1:6391/0"
        assert service.env["MEMORIA_MILVUS_URI"] == "http://127.0.0.1:19555"


def test_external_broker_and_milvus_are_used_as_they_are(tmp_path: Path) -> None:
    settings = Settings.load(
        data_dir=tmp_path, redis_url="redis://broker:6379/0", milvus_uri="http://milvus:19530"
    )
    specs = build_specs(settings)

    assert [spec.name for spec in specs] == SERVICE_NAMES
    for service in specs:
        assert service.env is not None
        assert service.env["MEMORIA_REDIS_URL"] == "redis://broker:6379/0"
        assert service.env["MEMORIA_MILVUS_URI"] == "http://milvus:19530"


async def test_run_stops_before_starting_anything_when_the_milvus_port_is_taken(
    tmp_path: Path, redis_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as stranger:
        stranger.bind(("127.0.0.1", 0))
        stranger.listen()
        port = stranger.getsockname()[1]
        settings = Settings.load(
            data_dir=tmp_path, redis_url=redis_url, milvus_uri=None, embedded_milvus_port=port
        )
        assert await run(settings) == EXIT_STARTUP_FAILED
    captured = capsys.readouterr()
    assert (
        f"memoria: cannot start: port {port} is in use; "
        "set MEMORIA_EMBEDDED_MILVUS_PORT or MEMORIA_MILVUS_URI"
    ) in captured.err
    assert "started" not in captured.out

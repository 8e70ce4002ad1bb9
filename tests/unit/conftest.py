"""tests/unit starts no process and opens no server, so that `make test-unit` is fast and says
the truth. A test here that asks for a process-starting fixture, starts a subprocess or listens on
a socket fails, saying where it belongs instead."""

from __future__ import annotations

import socket
import subprocess
from typing import Any

import pytest

# The fixtures of tests/conftest.py that start a server, and each fixture built on one. A test's
# fixture closure holds every fixture it needs, so asking through any other fixture counts too.
PROCESS_FIXTURES: dict[str, str] = {
    "valkey_server": "Valkey",
    "redis_url": "Valkey",
    "redis": "Valkey",
    "storage_broker": "Valkey",
    "milvus_server": "milvus-lite",
    "milvus_uri": "milvus-lite",
    "mongo_server_url": "MongoDB",
}

WHERE_IT_BELONGS = (
    "tests/unit starts no process: move it to tests/component (real Valkey, milvus-lite, SQLite, "
    "short-lived processes and local servers) or, if it needs the services running, to "
    "tests/integration"
)


@pytest.hookimpl(tryfirst=True)  # before the runner sets up the fixtures, so nothing starts
def pytest_runtest_setup(item: pytest.Item) -> None:
    needed = getattr(item, "fixturenames", ())
    starting = [
        f"{name} (starts {PROCESS_FIXTURES[name]})" for name in needed if name in PROCESS_FIXTURES
    ]
    if starting:
        pytest.fail(f"{item.nodeid} uses {', '.join(starting)}. {WHERE_IT_BELONGS}.", pytrace=False)


@pytest.fixture(autouse=True)
def no_process_or_server(monkeypatch: pytest.MonkeyPatch) -> None:
    """Refuses what a test starts by itself: subprocesses (asyncio's run on Popen too) and
    listening sockets (uvicorn, websockets, http.server)."""

    def refuse_popen(self: subprocess.Popen[Any], args: Any, *rest: Any, **options: Any) -> None:
        pytest.fail(f"the test started the process {args!r}. {WHERE_IT_BELONGS}.", pytrace=False)

    def refuse_listen(self: socket.socket, *backlog: int) -> None:
        pytest.fail(
            f"the test listens on {self.getsockname()!r}. {WHERE_IT_BELONGS}.", pytrace=False
        )

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse_popen)
    monkeypatch.setattr(socket.socket, "listen", refuse_listen)

"""`memoria doctor` against the four real services: every one is found and recognised as
this data directory's Memoria; run with another data directory, each is named another's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis as sync_redis
import stack as stack_support
from stack import Stack, running_stack

from memoria_runtime.instance import instance_id

pytestmark = pytest.mark.integration

MEMORIA = Path(sys.executable).parent / "memoria"
SERVICES = ("memory", "decision", "action-worker")
WAIT_S = 60.0  # a deadline against hanging, not a measurement
START_TIMEOUT_S = 240.0


@pytest.fixture(scope="module")
def stack(
    valkey_server: Any, milvus_server: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    redis_url = f"redis://127.0.0.1:{valkey_server.port}/10"
    data_dir: Path = tmp_path_factory.mktemp("doctor-stack")
    with pytest.MonkeyPatch.context() as patch:
        # A loaded machine (parallel test runs) can take longer than the usual minute to
        # start the memory service with its embedder.
        patch.setattr(stack_support, "START_TIMEOUT_S", START_TIMEOUT_S)
        with running_stack(
            redis_url, milvus_server.uri, data_dir, {"rules": []}, llm_provider="offline"
        ) as running:
            running.wait_ready(actions=1)
            wait_for_presences(running)
            yield running


def wait_for_presences(stack: Stack) -> None:
    client = sync_redis.Redis.from_url(stack.redis_url)
    deadline = time.monotonic() + WAIT_S
    try:
        while time.monotonic() < deadline:
            found = {json.loads(v)["service"] for v in client.hgetall("memoria:services").values()}
            if found >= set(SERVICES):
                return
            time.sleep(0.1)
    finally:
        client.close()
    raise TimeoutError(f"not every service announced itself:\n{stack.all_logs()}")


def doctor(stack: Stack, data_dir: Path) -> dict[str, dict[str, str]]:
    env = {**stack.env, "MEMORIA_DATA_DIR": str(data_dir)}
    env = {k: v for k, v in env.items() if k != "MEMORIA_URL"}
    done = subprocess.run(
        [str(MEMORIA), "doctor", "--json"],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    report = json.loads(done.stdout)
    return {check["name"]: check for check in report["checks"]}


def test_the_services_announce_their_instance_and_the_gateway_says_it(stack: Stack) -> None:
    ours = instance_id(stack.data_dir.resolve())
    assert httpx.get(f"{stack.base_url}/healthz").json()["instance"] == ours
    client = sync_redis.Redis.from_url(stack.redis_url)
    try:
        announced = [json.loads(v) for v in client.hgetall("memoria:services").values()]
    finally:
        client.close()
    assert {entry["service"] for entry in announced} >= set(SERVICES)
    assert {entry["instance"] for entry in announced} == {ours}
    assert {entry["data_dir"] for entry in announced} == {str(stack.data_dir.resolve())}


def test_doctor_finds_all_four_services_of_its_own_memoria(stack: Stack) -> None:
    checks = doctor(stack, stack.data_dir)
    for name in ("broker", "memory service", "decision service", "action workers", "gateway"):
        assert checks[name]["status"] == "ok", checks[name]


def test_doctor_of_another_data_directory_says_they_are_another_memorias(
    stack: Stack, tmp_path: Path
) -> None:
    checks = doctor(stack, tmp_path / "elsewhere")
    for name in ("broker", "memory service", "decision service", "action workers", "gateway"):
        assert checks[name]["status"] == "failed", checks[name]
        assert "another Memoria" in checks[name]["detail"]
    assert str(stack.data_dir.resolve()) in checks["memory service"]["detail"]
    assert "MEMORIA_DATA_DIR" in checks["gateway"]["hint"]
    assert not (tmp_path / "elsewhere").exists()  # the doctor created nothing there


def test_cli_commands_find_the_gateway_by_its_port(stack: Stack, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORIA_")}
    env["MEMORIA_GATEWAY_PORT"] = str(stack.port)
    source = tmp_path / "notes.jsonl"
    source.write_text('{"content": "Likes green tea"}\n')
    imported = subprocess.run(
        [str(MEMORIA), "import", str(source), "--user", "ivo"],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout == "created 1, already present 0, failed 0\n"
    exported = subprocess.run(
        [str(MEMORIA), "export", "--user", "ivo"],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert exported.returncode == 0, exported.stderr
    assert json.loads(exported.stdout)["content"] == "Likes green tea"

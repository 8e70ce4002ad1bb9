"""`memoria export` / `memoria import` against the gateway's memory routes, served in-process
(httpx ASGITransport) over a stand-in memory service that keeps memories in a dict."""

from __future__ import annotations

import hashlib
import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI, HTTPException
from typer.testing import CliRunner

from memoria_cli import gateway_client
from memoria_cli.gateway_client import Connection
from memoria_cli.main import app as cli_app
from memoria_cli.transfer import EXIT_FAILED, EXIT_OK, EXPORT_FIELDS, run_export, run_import
from memoria_contracts.memory import (
    MAX_BINDING_CHARS,
    Memory,
    MemoryDelete,
    MemoryDeleted,
    MemoryFailure,
    MemoryFound,
    MemoryHistory,
    MemoryList,
    MemoryPage,
    MemorySave,
    MemorySaved,
    MemorySearch,
    MemoryUpdate,
    MemoryUpdated,
)
from memoria_gateway.memory_routes import memory_router
from memoria_runtime.auth import TokenIssuer
from memoria_runtime.bus.memory_requests import NO_THREAD

SECRET = "a-test-secret-long-enough-for-hs256"  # PyJWT warns below 32 bytes
TTL_S = 3600
USER = "ana"
URL = "http://gateway.test"
PAGE_CAP = 2  # the stand-in's pages are this short, so any export spans several
NOW = datetime(2025, 6, 1, tzinfo=UTC)
T0 = datetime(2024, 1, 1, 12, 0, tzinfo=UTC)


class StoredMemory:
    """Stands in for MemoryClient: a store of one user's memories with the memory service's
    rules that matter here (ids derived from the idempotency key, newest-first pages)."""

    def __init__(self) -> None:
        self.memories: dict[str, Memory] = {}  # in creation order
        self.saves: list[MemorySave] = []
        self.lists: list[MemoryList] = []

    def add(self, memory_id: str, content: str, created: datetime) -> None:
        self.memories[memory_id] = Memory(
            memory_id=memory_id,
            memory_type="preference",
            content=content,
            bindings=[content.lower()],
            creation_datetime=created,
            last_accessed=created,
            updated_at=created,
        )

    async def save(
        self,
        user_id: str,
        request: MemorySave,
        *,
        thread_id: str = NO_THREAD,
        cycle_id: str | None = None,
    ) -> MemorySaved | MemoryFailure:
        self.saves.append(request)
        digest = hashlib.sha256(f"{user_id}\x1f{request.idempotency_key}".encode()).hexdigest()
        memory_id = f"mem_{digest[:26]}"
        if memory_id in self.memories:
            return MemorySaved(memory_id=memory_id, created=False, memory=self.memories[memory_id])
        memory = Memory(
            memory_id=memory_id,
            memory_type=request.memory_type,
            content_kind=request.content_kind,
            content=request.content,
            bindings=request.bindings,
            creation_datetime=request.creation_datetime or NOW,
            last_accessed=NOW,
            updated_at=NOW,
        )
        self.memories[memory_id] = memory
        return MemorySaved(memory_id=memory_id, created=True, memory=memory)

    async def list(
        self,
        user_id: str,
        request: MemoryList,
        *,
        thread_id: str = NO_THREAD,
        cycle_id: str | None = None,
    ) -> MemoryPage | MemoryFailure:
        self.lists.append(request)
        newest = list(reversed(self.memories.values()))
        start = int(request.cursor or 0)
        end = start + min(request.limit, PAGE_CAP)
        more = end < len(newest)
        return MemoryPage(memories=newest[start:end], next_cursor=str(end) if more else None)

    # Not used by export and import; present because the router needs the whole client.
    async def search(
        self,
        user_id: str,
        request: MemorySearch,
        *,
        thread_id: str = NO_THREAD,
        cycle_id: str | None = None,
    ) -> MemoryFound | MemoryFailure:
        return MemoryFailure(code="unavailable", error_message="not in this stand-in")

    async def get(
        self,
        user_id: str,
        memory_id: str,
        *,
        thread_id: str = NO_THREAD,
        cycle_id: str | None = None,
    ) -> MemoryFound | MemoryFailure:
        return MemoryFailure(code="unavailable", error_message="not in this stand-in")

    async def changes(
        self,
        user_id: str,
        memory_id: str,
        *,
        thread_id: str = NO_THREAD,
        cycle_id: str | None = None,
    ) -> MemoryHistory | MemoryFailure:
        return MemoryFailure(code="unavailable", error_message="not in this stand-in")

    async def update(
        self,
        user_id: str,
        request: MemoryUpdate,
        *,
        thread_id: str = NO_THREAD,
        cycle_id: str | None = None,
    ) -> MemoryUpdated | MemoryFailure:
        return MemoryFailure(code="unavailable", error_message="not in this stand-in")

    async def delete(
        self,
        user_id: str,
        request: MemoryDelete,
        *,
        thread_id: str = NO_THREAD,
        cycle_id: str | None = None,
    ) -> MemoryDeleted | MemoryFailure:
        return MemoryFailure(code="unavailable", error_message="not in this stand-in")


ISSUER = TokenIssuer(SECRET, TTL_S)


def gateway(store: StoredMemory, *, dev_login: bool = True) -> httpx.ASGITransport:
    """The memory routes plus a dev login like the gateway's, as an httpx transport."""
    app = FastAPI()
    app.include_router(memory_router(store, lambda: ISSUER))

    @app.post("/api/token")
    async def token(body: dict[str, str]) -> dict[str, str]:
        if not dev_login:
            raise HTTPException(404, detail="dev login is disabled")
        return {"token": ISSUER.issue(body["user_id"]), "user_id": body["user_id"]}

    return httpx.ASGITransport(app=app)


def connection(
    store: StoredMemory, *, user: str | None = None, dev_login: bool = True
) -> Connection:
    """Ana's token, or the dev login as ``user``."""
    token = None if user else ISSUER.issue(USER)
    return Connection(URL, token=token, user=user, transport=gateway(store, dev_login=dev_login))


@pytest.fixture
def filled() -> StoredMemory:
    store = StoredMemory()
    for n in range(5):
        store.add(f"mem_old{n}", f"Fact {n}", T0 + timedelta(days=n))
    return store


def export_to(store: StoredMemory, path: Path) -> tuple[int, str]:
    err = io.StringIO()
    code = run_export(connection(store), str(path), stdout=io.StringIO(), stderr=err, environ={})
    return code, err.getvalue()


def import_from(
    store: StoredMemory, path: Path, *, user: str | None = None, dev_login: bool = True
) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    conn = connection(store, user=user, dev_login=dev_login)
    code = run_import(conn, str(path), stdout=out, stderr=err, environ={})
    return code, out.getvalue(), err.getvalue()


# -- export ---------------------------------------------------------------------------------


def test_export_writes_every_page_as_jsonl(filled: StoredMemory, tmp_path: Path) -> None:
    target = tmp_path / "memories.jsonl"
    code, messages = export_to(filled, target)

    assert code == EXIT_OK
    assert "exported 5 memories" in messages
    records = [json.loads(line) for line in target.read_text().splitlines()]
    assert [r["memory_id"] for r in records] == [f"mem_old{n}" for n in reversed(range(5))]
    assert all(tuple(r) == EXPORT_FIELDS for r in records)
    assert records[-1]["creation_datetime"] == "2024-01-01T12:00:00Z"
    assert [request.cursor for request in filled.lists] == [None, "2", "4"]
    assert list(tmp_path.iterdir()) == [target]  # no partial file left


def test_export_to_stdout(filled: StoredMemory) -> None:
    out = io.StringIO()
    code = run_export(connection(filled), "-", stdout=out, stderr=io.StringIO(), environ={})
    assert code == EXIT_OK
    assert len(out.getvalue().splitlines()) == 5


def test_a_failed_export_leaves_no_file(tmp_path: Path) -> None:
    target = tmp_path / "memories.jsonl"
    err = io.StringIO()
    bad = Connection(URL, token="forged", transport=gateway(StoredMemory()))
    code = run_export(bad, str(target), stdout=io.StringIO(), stderr=err, environ={})
    assert code == EXIT_FAILED
    assert "refused the token" in err.getvalue()
    assert list(tmp_path.iterdir()) == []


# -- import ---------------------------------------------------------------------------------


def test_import_of_an_export_keeps_ids_as_keys_and_dates(
    filled: StoredMemory, tmp_path: Path
) -> None:
    exported = tmp_path / "memories.jsonl"
    export_to(filled, exported)
    fresh = StoredMemory()

    code, summary, errors = import_from(fresh, exported)

    assert (code, errors) == (EXIT_OK, "")
    assert summary.strip() == "created 5, already present 0, failed 0"
    by_key = {save.idempotency_key: save for save in fresh.saves}
    for memory in filled.memories.values():
        save = by_key[f"api:import:{memory.memory_id}"]
        assert save.creation_datetime == memory.creation_datetime
        assert (save.content, save.bindings) == (memory.content, memory.bindings)
        assert (save.memory_type, save.content_kind, save.source) == (
            memory.memory_type,
            memory.content_kind,
            "import",
        )


def test_importing_twice_creates_nothing_twice(filled: StoredMemory, tmp_path: Path) -> None:
    exported = tmp_path / "memories.jsonl"
    export_to(filled, exported)
    fresh = StoredMemory()
    import_from(fresh, exported)

    code, summary, _ = import_from(fresh, exported)

    assert code == EXIT_OK
    assert summary.strip() == "created 0, already present 5, failed 0"
    assert len(fresh.memories) == 5


def test_an_export_imported_into_its_own_account_adds_nothing(
    filled: StoredMemory, tmp_path: Path
) -> None:
    exported = tmp_path / "memories.jsonl"
    export_to(filled, exported)

    code, summary, _ = import_from(filled, exported)

    assert code == EXIT_OK
    assert summary.strip() == "created 0, already present 5, failed 0"
    assert filled.saves == []
    assert len(filled.memories) == 5


def test_bad_lines_are_reported_and_the_rest_imported(tmp_path: Path) -> None:
    source = tmp_path / "mixed.jsonl"
    lines = [
        json.dumps({"memory_id": "mem_a", "content": "Likes tea", "bindings": ["tea"]}),
        '{"content": "no closing brace"',
        "",
        json.dumps({"content": {"city": "Porto"}}),  # JSON without bindings: no text to key
        json.dumps({"content": "x", "bindings": ["x"], "creation_datetime": "2024-01-01T00:00"}),
        json.dumps({"content": "   ", "bindings": ["blank"]}),  # the gateway refuses it
        json.dumps({"content": {"budget": 5000}, "bindings": ["budget"], "memory_type": "goal"}),
        json.dumps({"content": ""}),
        json.dumps({"content": "x", "memory_type": "gossip"}),
    ]
    source.write_text("\n".join(lines) + "\n")
    store = StoredMemory()

    code, summary, errors = import_from(store, source)

    assert code == EXIT_FAILED
    assert summary.strip() == "created 2, already present 0, failed 6"
    reported = errors.splitlines()
    assert [line.split(":")[0] for line in reported] == [
        "line 2",
        "line 4",
        "line 5",
        "line 6",
        "line 8",
        "line 9",
    ]
    assert "not valid JSON" in reported[0]
    assert reported[1] == (
        "line 4: refused (422): A JSON memory needs bindings: the short phrases it is to be "
        "found by."
    )
    # no UTC offset: which time would it be?
    assert "The creation time must be a date and time in ISO 8601 with its UTC" in reported[2]
    assert reported[3] == "line 6: refused (422): Content is empty."
    assert reported[4] == "line 8: refused (422): Content is empty."
    assert reported[5].startswith("line 9: refused (422): The memory type must be 'user_profile'")
    assert "Field required" not in errors and "Value error" not in errors
    assert sorted(m.content_kind for m in store.memories.values()) == ["json", "text"]


def test_a_line_of_text_without_bindings_is_found_by_its_text(tmp_path: Path) -> None:
    """A file of plain notes ("content" only) imports: each text is its own search key."""
    source = tmp_path / "notes.jsonl"
    long_note = "I keep a journal. " * 30
    source.write_text(
        json.dumps({"content": "  Lives in Porto "})
        + "\n"
        + json.dumps({"content": long_note, "memory_type": "preference"})
        + "\n"
    )
    store = StoredMemory()

    code, summary, errors = import_from(store, source)

    assert (code, summary.strip(), errors) == (
        EXIT_OK,
        "created 2, already present 0, failed 0",
        "",
    )
    keys = {m.content: m.bindings for m in store.memories.values()}
    assert keys["  Lives in Porto "] == ["Lives in Porto"]
    assert keys[long_note] == [long_note.strip()[:MAX_BINDING_CHARS]]


def test_lines_without_an_id_are_keyed_by_their_content(tmp_path: Path) -> None:
    source = tmp_path / "hand-written.jsonl"
    source.write_text(
        '{"content": "Likes tea", "bindings": ["tea"]}\n'
        '{ "bindings" : ["tea"], "content" : "Likes tea" }\n'  # the same, spelt differently
    )
    store = StoredMemory()

    code, summary, _ = import_from(store, source)

    assert code == EXIT_OK
    assert summary.strip() == "created 1, already present 1, failed 0"
    keys = {save.idempotency_key for save in store.saves}
    assert len(keys) == 1
    assert keys.pop().startswith("api:import:")


class Throttled(httpx.AsyncBaseTransport):
    """The gateway past the user's request limit: the first ``refusals`` memory creations
    are answered 429 with ``Retry-After: 0`` (and do nothing), then it serves again."""

    def __init__(self, inner: httpx.AsyncBaseTransport, refusals: int) -> None:
        self.inner = inner
        self.refusals = refusals
        self.refused = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "POST" and self.refused < self.refusals:
            self.refused += 1
            detail = {"detail": "too many requests: at most 1 a minute for one user"}
            return httpx.Response(429, json=detail, headers={"Retry-After": "0"})
        return await self.inner.handle_async_request(request)


def import_throttled(store: StoredMemory, path: Path, refusals: int) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    throttled = Throttled(gateway(store), refusals)
    conn = Connection(URL, token=ISSUER.issue(USER), transport=throttled)
    code = run_import(conn, str(path), stdout=out, stderr=err, environ={})
    return code, out.getvalue(), err.getvalue()


def two_lines(tmp_path: Path) -> Path:
    source = tmp_path / "two.jsonl"
    source.write_text(
        json.dumps({"memory_id": "mem_a", "content": "Likes tea", "bindings": ["tea"]})
        + "\n"
        + json.dumps({"memory_id": "mem_b", "content": "Lives in Porto", "bindings": ["home"]})
        + "\n"
    )
    return source


def test_an_import_past_the_request_limit_waits_as_told_and_goes_on(tmp_path: Path) -> None:
    store = StoredMemory()

    code, summary, errors = import_throttled(store, two_lines(tmp_path), refusals=3)

    assert (code, errors) == (EXIT_OK, "")
    assert summary.strip() == "created 2, already present 0, failed 0"
    assert sorted(m.content for m in store.memories.values()) == ["Likes tea", "Lives in Porto"]


def test_a_limit_that_never_lifts_fails_the_line_with_the_gateways_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gateway_client, "RATE_LIMITED_TRIES", 3)
    store = StoredMemory()

    code, summary, errors = import_throttled(store, two_lines(tmp_path), refusals=3)

    assert code == EXIT_FAILED
    # Both lines went in one batch, refused as a whole: both are reported.
    assert summary.strip() == "created 0, already present 0, failed 2"
    assert errors.startswith("line 1: refused (429): too many requests")
    assert "line 2: refused (429)" in errors


# -- credentials ----------------------------------------------------------------------------


def test_dev_login_by_user(filled: StoredMemory) -> None:
    out = io.StringIO()
    code = run_export(
        connection(filled, user=USER), "-", stdout=out, stderr=io.StringIO(), environ={}
    )
    assert code == EXIT_OK
    assert len(out.getvalue().splitlines()) == 5


def test_dev_login_disabled_is_explained(tmp_path: Path) -> None:
    source = tmp_path / "one.jsonl"
    source.write_text('{"content": "x", "bindings": ["x"]}\n')
    store = StoredMemory()
    code, _, errors = import_from(store, source, user=USER, dev_login=False)
    assert code == EXIT_FAILED
    assert "dev login is disabled" in errors
    assert store.saves == []


def test_token_from_the_environment(filled: StoredMemory) -> None:
    out = io.StringIO()
    bare = Connection(URL, transport=gateway(filled))
    environ = {"MEMORIA_TOKEN": ISSUER.issue(USER)}
    code = run_export(bare, "-", stdout=out, stderr=io.StringIO(), environ=environ)
    assert code == EXIT_OK


@pytest.mark.parametrize(
    ("token", "user", "message"),
    [(None, None, "no credentials"), ("t", USER, "not both")],
)
def test_credentials_must_be_given_once(token: str | None, user: str | None, message: str) -> None:
    err = io.StringIO()
    conn = Connection(URL, token=token, user=user, transport=gateway(StoredMemory()))
    code = run_export(conn, "-", stdout=io.StringIO(), stderr=err, environ={})
    assert code == EXIT_FAILED
    assert message in err.getvalue()


def test_commands_are_registered(tmp_path: Path) -> None:
    runner = CliRunner()
    for command in ("export", "import"):
        result = runner.invoke(cli_app, [command, "--help"])
        assert result.exit_code == 0, result.output
    source = tmp_path / "one.jsonl"
    source.write_text("{}\n")
    result = runner.invoke(cli_app, ["import", str(source)], env={"MEMORIA_TOKEN": None})
    assert result.exit_code == EXIT_FAILED
    assert "no credentials" in result.output

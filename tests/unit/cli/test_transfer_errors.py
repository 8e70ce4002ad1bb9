"""`memoria import` / `export` say the one thing that stopped them in one line, with a
non-zero exit, and show their progress: a bar on a terminal, plain lines in a pipe."""

from __future__ import annotations

import io
import json
import socket
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

from memoria_cli import progress
from memoria_cli.gateway_client import Connection
from memoria_cli.progress import PlainTracker, track
from memoria_cli.transfer import EXIT_FAILED, EXIT_OK, run_export, run_import
from memoria_client.transfer import IMPORT_BATCH
from tests.unit.cli.test_transfer import ISSUER, T0, URL, USER, StoredMemory, connection, gateway


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class StopsAnswering(httpx.AsyncBaseTransport):
    """The gateway, until ``posts`` creates (single or batch) were answered; then nothing
    answers."""

    def __init__(self, inner: httpx.AsyncBaseTransport, posts: int) -> None:
        self.inner, self.posts = inner, posts

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            if self.posts == 0:
                raise httpx.ConnectError("connection refused", request=request)
            self.posts -= 1
        return await self.inner.handle_async_request(request)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def memory_lines(path: Path, count: int) -> Path:
    path.write_text("".join(json.dumps({"content": f"Fact {n}"}) + "\n" for n in range(count)))
    return path


def import_with(
    conn: Connection, source: str, stderr: io.StringIO | None = None
) -> tuple[int, str, str]:
    out, err = io.StringIO(), stderr if stderr is not None else io.StringIO()
    code = run_import(conn, source, stdout=out, stderr=err, environ={})
    return code, out.getvalue(), err.getvalue()


# -- one line for what stopped it ------------------------------------------------------------


def test_a_missing_file_is_one_line_and_no_summary(tmp_path: Path) -> None:
    missing = tmp_path / "nope.jsonl"
    code, out, err = import_with(connection(StoredMemory()), str(missing))
    assert (code, out) == (EXIT_FAILED, "")
    assert err == f"import failed: no such file: {missing}\n"


def test_a_directory_is_not_a_file(tmp_path: Path) -> None:
    code, out, err = import_with(connection(StoredMemory()), str(tmp_path))
    assert (code, out) == (EXIT_FAILED, "")
    assert err == f"import failed: {tmp_path} is a directory, not a file\n"


def test_a_file_that_is_not_text_is_one_line(tmp_path: Path) -> None:
    source = tmp_path / "binary.jsonl"
    source.write_bytes(b"\xff\xfe\x00garbage\n")
    code, out, err = import_with(connection(StoredMemory()), str(source))
    assert (code, out) == (EXIT_FAILED, "")
    assert err == f"import failed: {source} is not UTF-8 text (byte 0 of a line)\n"


def test_an_unreachable_gateway_is_one_line_and_no_summary(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    conn = Connection(url, token=ISSUER.issue(USER))
    code, out, err = import_with(conn, str(memory_lines(tmp_path / "m.jsonl", 3)))
    assert (code, out) == (EXIT_FAILED, "")
    assert err.count("\n") == 1
    assert err.startswith(f"import failed: cannot reach the gateway at {url}")
    assert "MEMORIA_URL" in err

    export_err = io.StringIO()
    assert run_export(conn, "-", stdout=io.StringIO(), stderr=export_err, environ={}) == 1
    assert export_err.getvalue().startswith(f"export failed: cannot reach the gateway at {url}")


def test_a_refused_token_is_one_line_and_no_summary(tmp_path: Path) -> None:
    conn = Connection(URL, token="forged", transport=gateway(StoredMemory()))
    code, out, err = import_with(conn, str(memory_lines(tmp_path / "m.jsonl", 3)))
    assert (code, out) == (EXIT_FAILED, "")
    assert err.count("\n") == 1 and err.startswith("import failed: the gateway refused the token")


def test_an_invalid_gateway_address_is_one_line(tmp_path: Path) -> None:
    conn = Connection("http://[::1", token=ISSUER.issue(USER))
    code, out, err = import_with(conn, str(memory_lines(tmp_path / "m.jsonl", 1)))
    assert (code, out) == (EXIT_FAILED, "")
    assert err.startswith("import failed: not a gateway address: 'http://[::1'")


def test_a_gateway_lost_midway_says_where_and_what_got_in(tmp_path: Path) -> None:
    store = StoredMemory()
    conn = Connection(URL, token=ISSUER.issue(USER), transport=StopsAnswering(gateway(store), 1))
    lines = memory_lines(tmp_path / "m.jsonl", IMPORT_BATCH + 5)
    code, out, err = import_with(conn, str(lines))
    assert code == EXIT_FAILED
    # The first batch got in; the second, from the line after it, did not.
    assert err.startswith(f"import stopped at line {IMPORT_BATCH + 1}: cannot reach the gateway")
    assert out == f"created {IMPORT_BATCH}, already present 0, failed 0\n"
    assert len(store.memories) == IMPORT_BATCH


def test_an_export_into_a_missing_directory_is_one_line(tmp_path: Path) -> None:
    err = io.StringIO()
    target = tmp_path / "no" / "such" / "dir.jsonl"
    code = run_export(connection(StoredMemory()), str(target), stderr=err, environ={})
    assert code == EXIT_FAILED
    assert err.getvalue() == f"export failed: cannot write {target}: No such file or directory\n"


# -- progress -------------------------------------------------------------------------------


def test_plain_progress_says_count_rate_and_time_left_every_interval() -> None:
    now = [100.0]
    out = io.StringIO()
    tracker = PlainTracker(out, "importing", "lines", 100, interval_s=5, clock=lambda: now[0])
    for _ in range(10):
        now[0] += 1
        tracker.advance(2)
    assert out.getvalue().splitlines() == [
        "importing: 10/100 lines, 2.0/s, about 45 s left",
        "importing: 20/100 lines, 2.0/s, about 40 s left",
    ]


def test_plain_progress_without_a_total_says_count_and_rate() -> None:
    now = [0.0]
    out = io.StringIO()
    tracker = PlainTracker(out, "exporting", "memories", None, interval_s=1, clock=lambda: now[0])
    now[0] = 2.0
    tracker.advance(200)
    assert out.getvalue() == "exporting: 200 memories, 100.0/s\n"


def test_a_piped_import_writes_plain_progress_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(progress, "PLAIN_INTERVAL_S", 0.0)
    code, out, err = import_with(connection(StoredMemory()), str(memory_lines(tmp_path / "m", 3)))
    assert code == EXIT_OK
    assert out == "created 3, already present 0, failed 0\n"
    assert [line.split(",")[0] for line in err.splitlines()] == [
        "importing: 1/3 lines",
        "importing: 2/3 lines",
        "importing: 3/3 lines",
    ]
    assert "\x1b" not in err  # no terminal codes in a log


def test_an_import_on_a_terminal_draws_a_bar_and_notes_bad_lines_above_it(
    tmp_path: Path,
) -> None:
    source = memory_lines(tmp_path / "m.jsonl", 4)
    source.write_text(source.read_text() + "not json\n")
    code, out, err = import_with(connection(StoredMemory()), str(source), Terminal())
    assert code == EXIT_FAILED
    assert out == "created 4, already present 0, failed 1\n"
    assert "line 5: not valid JSON" in err
    assert "5/5" in err and "/s" in err and "━" in err  # count, rate, bar


def test_an_export_on_a_terminal_draws_a_bar_with_count_and_rate(tmp_path: Path) -> None:
    store = StoredMemory()
    for n in range(5):
        store.add(f"mem_{n}", f"Fact {n}", T0 + timedelta(days=n))
    err = Terminal()
    code = run_export(connection(store), str(tmp_path / "out.jsonl"), stderr=err, environ={})
    assert code == EXIT_OK
    assert "5 memories" in err.getvalue() and "/s" in err.getvalue()


def test_export_to_a_terminal_keeps_the_bar_off_it() -> None:
    out, err = Terminal(), Terminal()
    assert run_export(connection(StoredMemory()), "-", stdout=out, stderr=err, environ={}) == 0
    assert "\x1b" not in err.getvalue()


def test_the_bar_counts_against_a_known_total() -> None:
    out = Terminal()
    with track(out, "importing", "lines", 10, terminal=True) as tracker:
        tracker.advance(5)
    assert "5/10" in out.getvalue() and "/s" in out.getvalue()


class ListingFails(httpx.AsyncBaseTransport):
    """A gateway whose memory listing answers ``response``."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return self.response


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (httpx.Response(500, json={"detail": "boom"}), "listing memories failed (500): boom"),
        (httpx.Response(200, text="<html>a proxy</html>"), "a page this CLI cannot read"),
    ],
)
def test_a_listing_refused_or_unreadable_is_one_line(
    tmp_path: Path, answer: httpx.Response, said: str
) -> None:
    conn = Connection(URL, token=ISSUER.issue(USER), transport=ListingFails(answer))
    err = io.StringIO()
    assert run_export(conn, "-", stdout=io.StringIO(), stderr=err, environ={}) == EXIT_FAILED
    assert err.getvalue().count("\n") == 1 and said in err.getvalue()
    code, out, import_err = import_with(conn, str(memory_lines(tmp_path / "m.jsonl", 1)))
    assert (code, out) == (EXIT_FAILED, "")
    assert import_err.startswith("import failed: ") and said in import_err

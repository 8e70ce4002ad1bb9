"""The one line format of `memoria run`: time, level, process name, text; color only where
wanted; the lines of every other program (our services' logging, FastStream, uvicorn, Valkey,
milvus-lite) read into it."""

from __future__ import annotations

import io
import logging
import re

import pytest

from memoria_cli import embedded_broker
from memoria_cli.console import Console, color_enabled
from memoria_cli.log_lines import LogLine, plain, python_line

# 15:58:51 INFO    decision      | text
LINE = re.compile(r"^\d\d:\d\d:\d\d (DEBUG|INFO|WARNING|ERROR|CRITICAL) +(\S+) +\| (.*)$")
NOON = 1_700_000_000.0  # any fixed instant: the clock is injected


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def console(stream: io.StringIO, *, color: bool | None) -> Console:
    return Console(stream, ["svc", "a-longer-name"], label="sup", color=color, clock=lambda: NOON)


def test_color_on_a_terminal_only_unless_no_color_or_force_color_says_otherwise() -> None:
    assert color_enabled(Terminal(), environ={})
    assert not color_enabled(io.StringIO(), environ={})
    assert not color_enabled(Terminal(), environ={"NO_COLOR": "1"})
    assert color_enabled(io.StringIO(), environ={"FORCE_COLOR": "1"})
    assert not color_enabled(Terminal(), environ={"NO_COLOR": "1", "FORCE_COLOR": "1"})
    assert not color_enabled(Terminal(), environ={"TERM": "dumb"})
    assert not color_enabled(io.StringIO(), environ={"FORCE_COLOR": ""})  # empty: unset


def test_a_plain_line_has_time_level_padded_name_and_text_and_no_escape_code() -> None:
    out = io.StringIO()
    console(out, color=False).line("svc", logging.WARNING, "disk almost full", "cyan")
    written = out.getvalue()
    assert "\x1b" not in written
    stamp = written.split()[0]
    assert written == f"{stamp} WARNING {'svc'.ljust(13)} | disk almost full\n"
    assert LINE.match(written.rstrip("\n"))


def test_on_a_terminal_the_name_and_level_are_colored_and_the_text_is_the_same() -> None:
    out = Terminal()
    console(out, color=None).line("svc", logging.ERROR, "it broke", "cyan")
    written = out.getvalue()
    assert "\x1b[36m" in written  # the name's color
    assert "\x1b[91m" in written  # the level's
    assert LINE.match(plain(written.rstrip("\n")))
    assert written.endswith(" it broke\n")


def test_the_supervisor_s_own_lines_have_the_same_format() -> None:
    out = io.StringIO()
    sup = console(out, color=False)
    sup.report("svc started (pid 1)")
    sup.alert("svc exited with code 1; restart #1 in 0.5s")
    first, second = out.getvalue().splitlines()
    assert LINE.match(first) and " INFO    sup " in first
    assert LINE.match(second) and " ERROR   sup " in second


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        # memoria_runtime.logs, outside a trace and inside one
        (
            "15:58:51 INFO    memoria.decision [-] decision ready (LLM: offline)",
            LogLine("decision ready (LLM: offline)", logging.INFO),
        ),
        (
            "15:58:51 WARNING uvicorn.error [0123456789abcdef] slow client",
            LogLine("[0123456789abcdef] slow client", logging.WARNING),
        ),
        # FastStream's own format (colored level, as it writes even into a pipe)
        (
            "2026-11-27 15:58:51,865 \x1b[32mINFO\x1b[0m     - FastStream app starting...",
            LogLine("FastStream app starting...", logging.INFO),
        ),
        # a print, a traceback line: no level of their own
        (
            "MilvusLite gRPC server listening on 127.0.0.1:1 (data_dir='/d')",
            LogLine("MilvusLite gRPC server listening on 127.0.0.1:1 (data_dir='/d')"),
        ),
        ('  File "x.py", line 1, in <module>', LogLine('  File "x.py", line 1, in <module>')),
        ("", None),
        ("   ", None),
    ],
)
def test_python_lines_lose_their_own_time_and_level(raw: str, expected: LogLine | None) -> None:
    assert python_line(plain(raw)) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (
            "7931:M 27 Nov 2026 15:58:43.010 * Ready to accept connections tcp",
            LogLine("Ready to accept connections tcp", logging.INFO),
        ),
        (
            "7931:M 27 Nov 2026 15:58:43.010 # WARNING Something odd",
            LogLine("Something odd", logging.WARNING),
        ),
        (
            "7931:signal-handler (1795795141) Received SIGTERM scheduling shutdown...",
            LogLine("Received SIGTERM scheduling shutdown...", logging.INFO),
        ),
        (
            "7931:M 27 Nov 2026 15:59:01.351 # Valkey is now ready to exit, bye bye...",
            LogLine("Valkey is now ready to exit, bye bye...", logging.INFO),
        ),
    ],
)
def test_valkey_lines_lose_their_pid_time_and_mark(raw: str, expected: LogLine) -> None:
    assert embedded_broker.read_line(raw) == expected


def test_valkey_s_overcommit_warning_is_explained_once_in_plain_words() -> None:
    raw = (
        "7931:M 27 Nov 2026 15:58:42.974 # WARNING Memory overcommit must be enabled! Without "
        "it, a background save or replication may fail under low memory condition. To fix "
        "this issue add 'vm.overcommit_memory = 1' to /etc/sysctl.conf and then reboot or run "
        "the command 'sysctl vm.overcommit_memory=1' for this to take effect."
    )
    line = embedded_broker.read_line(raw)
    assert line is not None and line.level == logging.INFO
    assert "sysctl vm.overcommit_memory=1" in line.text
    assert "nothing is lost" in line.text


def test_escape_and_control_codes_are_taken_out_of_foreign_text() -> None:
    assert plain("\x1b[1;31mred\x1b[0m \x1b]0;title\x07tab\there\r") == "red tab\there"

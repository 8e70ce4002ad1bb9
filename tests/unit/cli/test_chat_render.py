"""What `memoria chat` puts on the screen for the gateway's frames.

On a terminal the output is replayed into a small screen model (carriage return, line feed,
cursor up, erase line: the controls rich's live display uses), so the tests see what a
user would see, after the live region has redrawn and erased itself. Without a terminal the
output is read as it is: a transcript."""

from __future__ import annotations

import io
import re
from datetime import UTC, datetime
from typing import Any

import pytest
from rich.console import Console

from memoria_cli.chat.render import ChatView
from memoria_cli.chat.sanitize import clean_line
from memoria_client import Memory, Thread

CYCLE = "cyc_01"
THREAD = "main"
CSI = re.compile(r"\x1b\[(\??)([0-9;]*)([A-Za-z])")


class Screen:
    """Just enough of a terminal for rich's live display. Anything else rich could emit
    fails the test, so an unexpected control sequence cannot pass unnoticed."""

    def __init__(self) -> None:
        self.lines = [""]
        self.row = 0
        self.col = 0

    def feed(self, data: str) -> None:
        at = 0
        while at < len(data):
            char = data[at]
            if char == "\x1b":
                match = CSI.match(data, at)
                assert match is not None, f"unexpected escape {data[at : at + 12]!r}"
                self._control(match.group(1), match.group(2), match.group(3))
                at = match.end()
                continue
            if char == "\r":
                self.col = 0
            elif char == "\n":
                self.row += 1
                self.col = 0
                while len(self.lines) <= self.row:
                    self.lines.append("")
            else:
                line = self.lines[self.row].ljust(self.col)
                self.lines[self.row] = line[: self.col] + char + line[self.col + 1 :]
                self.col += 1
            at += 1

    def _control(self, private: str, params: str, command: str) -> None:
        if private:  # cursor shown/hidden
            return
        count = int(params or "1")
        if command == "A":
            self.row = max(0, self.row - count)
        elif command == "K" and params == "2":
            self.lines[self.row] = ""
        elif command == "K":
            self.lines[self.row] = self.lines[self.row][: self.col]
        else:
            raise AssertionError(f"unexpected control {command!r}")

    def text(self) -> str:
        return "\n".join(line.rstrip() for line in self.lines).strip("\n")


class Terminal:
    """A view on an interactive console, refreshed on each change (no timer)."""

    def __init__(self, height: int = 24) -> None:
        self.output = io.StringIO()
        console = Console(
            file=self.output,
            force_terminal=True,
            force_interactive=True,
            color_system=None,
            width=80,
            height=height,
            legacy_windows=False,
        )
        self.view = ChatView(console, echo_input=False, animate=False)

    def screen(self) -> str:
        screen = Screen()
        screen.feed(self.output.getvalue())
        return screen.text()


def transcript_view(width: int = 100) -> tuple[ChatView, io.StringIO]:
    output = io.StringIO()
    console = Console(file=output, width=width, color_system=None, force_terminal=False)
    return ChatView(console, echo_input=True), output


def status(text: str, step: int = 1) -> dict[str, Any]:
    return message(f"{CYCLE}.{step}.status", text, role="system", modal="textForReplace")


def message(
    message_id: str,
    content: Any,
    *,
    role: str = "assistant",
    modal: str = "text",
    model: str | None = None,
) -> dict[str, Any]:
    return {
        "type": "message",
        "id": message_id,
        "thread_id": THREAD,
        "cycle_id": CYCLE,
        "chat-history": True,
        "modal": modal,
        "role": role,
        "content": content,
        "model": model,
        "created_at": "2025-06-01T12:00:00Z",
        "event_id": "1-0",
    }


def delta(message_id: str, piece: str) -> dict[str, Any]:
    return {
        "type": "delta",
        "id": message_id,
        "thread_id": THREAD,
        "cycle_id": CYCLE,
        "content": piece,
    }


def cycle_end(actions: list[str], usage: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "type": "cycle_end",
        "cycle_id": CYCLE,
        "thread_id": THREAD,
        "actions": actions,
        "reason": "done",
        "usage": usage,
    }


MEMORY_ID = "mem_01abcdefghijklmnopqrstuvwx"
MEMORY = {
    "memory_id": MEMORY_ID,
    "memory_type": "constraint",
    "content_kind": "text",
    "content": "Is allergic to peanuts",
    "bindings": ["food allergy", "peanuts"],
    "creation_datetime": "2025-01-02T03:04:05Z",
    "last_accessed": "2025-01-02T03:04:05Z",
    "updated_at": "2025-01-02T03:04:05Z",
    "relevance_score": 0.8734,
}


# -- status lines ----------------------------------------------------------------------------


def test_a_status_line_is_replaced_by_the_next_one_and_gone_when_the_answer_comes() -> None:
    terminal = Terminal()
    terminal.view.begin_reply()
    terminal.view.show(status("Thinking...", 1))
    assert "Thinking..." in terminal.screen()

    terminal.view.show(status("Searching memories...", 2))
    screen = terminal.screen()
    assert "Searching memories..." in screen
    assert "Thinking..." not in screen

    terminal.view.show(message(f"{CYCLE}.2.1", "You are allergic to peanuts."))
    screen = terminal.screen()
    assert "You are allergic to peanuts." in screen
    assert "Searching memories..." not in screen


def test_status_lines_are_left_out_of_a_transcript() -> None:
    view, output = transcript_view()
    view.begin_reply()
    view.show(status("Thinking..."))
    view.show(message(f"{CYCLE}.1.1", "Hello."))
    view.end_reply()
    assert "Thinking" not in output.getvalue()
    assert "Hello." in output.getvalue()


def test_nothing_of_the_live_region_is_left_when_the_reply_ends() -> None:
    terminal = Terminal()
    terminal.view.begin_reply()
    terminal.view.show(status("Thinking..."))
    terminal.view.show(delta(f"{CYCLE}.1.1", "half an ans"))
    terminal.view.end_reply()
    assert "Thinking..." not in terminal.screen()
    assert "half an ans" not in terminal.screen()


# -- streamed answers ------------------------------------------------------------------------


def test_deltas_stream_and_the_final_message_shows_once() -> None:
    terminal = Terminal()
    answer_id = f"{CYCLE}.1.1"
    terminal.view.begin_reply()
    terminal.view.show(status("Thinking..."))
    terminal.view.show(delta(answer_id, "Hello "))
    assert "Hello" in terminal.screen()
    assert "Thinking..." not in terminal.screen()  # the stream replaced the status
    terminal.view.show(delta(answer_id, "there"))
    assert "Hello there" in terminal.screen()

    terminal.view.show(message(answer_id, "Hello there!", model="gemini-2.5-flash"))
    terminal.view.show(cycle_end(["Finalize"]))
    terminal.view.end_reply()
    screen = terminal.screen()
    assert screen.count("Hello there") == 1
    assert "Hello there!" in screen
    assert "gemini-2.5-flash" in screen


def test_a_transcript_has_the_streamed_answer_once_whole() -> None:
    view, output = transcript_view()
    answer_id = f"{CYCLE}.1.1"
    view.begin_reply()
    for piece in ["Your ", "favourite ", "colour ", "is green."]:
        view.show(delta(answer_id, piece))
    view.show(
        message(answer_id, "Your favourite colour is green.", model="offline planner (no LLM)")
    )
    view.show(cycle_end(["MemorySearch", "Finalize"]))
    view.end_reply()
    text = output.getvalue()
    assert text.count("favourite") == 1
    assert "Your favourite colour is green." in text
    assert "[offline · no model]" in text  # the badge


def test_an_answer_taller_than_the_terminal_streams_its_newest_lines_and_shows_once() -> None:
    terminal = Terminal(height=12)
    answer_id = f"{CYCLE}.1.1"
    rows = [f"row{number:02d}" for number in range(40)]
    terminal.view.begin_reply()
    for row in rows:
        terminal.view.show(delta(answer_id, f"{row}\n\n"))
    assert "row39" in terminal.screen()  # the newest text is the one in view
    terminal.view.show(message(answer_id, "\n\n".join(rows)))
    terminal.view.end_reply()
    screen = terminal.screen()
    assert [screen.count(row) for row in rows] == [1] * len(rows)


def test_a_repeated_message_is_shown_once_and_a_late_delta_is_ignored() -> None:
    view, output = transcript_view()
    answer_id = f"{CYCLE}.1.1"
    view.show(message(answer_id, "Saved."))
    view.show(message(answer_id, "Saved."))  # a step re-run after a crash
    view.show(delta(answer_id, "Sav"))  # replayed after a reconnect
    view.show(cycle_end(["Finalize"]))
    assert output.getvalue().count("Sav") == 1


def test_a_stream_without_its_final_message_is_kept_when_the_cycle_ends() -> None:
    view, output = transcript_view()
    view.show(delta(f"{CYCLE}.1.1", "The answer is"))
    view.show(cycle_end(["Finalize"]) | {"reason": "step_timeout"})
    text = output.getvalue()
    assert "The answer is" in text
    assert "(incomplete)" in text
    assert "step_timeout" in text


def test_the_users_own_line_is_not_echoed_on_the_terminal_they_typed_it_on() -> None:
    terminal = Terminal()
    accepted = {"type": "accepted", "id": "msg_01", "thread_id": THREAD, "queued": False}
    terminal.view.show(accepted)
    terminal.view.show(message("msg_01", "my words", role="user"))
    terminal.view.show(message("msg_02", "from the browser", role="user"))
    screen = terminal.screen()
    assert "my words" not in screen
    assert "you › from the browser" in screen


# -- what the content cannot do --------------------------------------------------------------


def test_control_characters_from_the_server_never_reach_the_terminal() -> None:
    hostile = "safe\x1b[2J\x1b]0;owned\x07 text\r\x9b31m\u202eend\x08"
    view, output = transcript_view()
    view.show(message(f"{CYCLE}.1.1", hostile, model="evil\x1b[31m model"))
    view.show(message(f"{CYCLE}.1.2", hostile, role="system"))
    view.show(message(f"{CYCLE}.1.3", MEMORY | {"content": hostile}, modal="memory", role="system"))
    view.show({"type": "error", "code": "invalid_frame", "message": hostile})
    text = output.getvalue()
    for char in ("\x1b", "\x07", "\r", "\x9b", "\u202e", "\x08"):
        assert char not in text
    # The words stay, their powers go: each character shows as what it is.
    assert "safe⟨U+001B⟩[2J⟨U+001B⟩]0;owned⟨U+0007⟩ text⟨U+000D⟩⟨U+009B⟩31m⟨U+202E⟩end" in text


def test_console_markup_in_content_is_shown_literally() -> None:
    view, output = transcript_view()
    view.show(message(f"{CYCLE}.1.1", "[red]alarm[/red]", role="system"))
    view.show(message(f"{CYCLE}.1.2", MEMORY | {"content": "[bold]x[/bold]"}, modal="memory"))
    assert "[red]alarm[/red]" in output.getvalue()
    assert "[bold]x[/bold]" in output.getvalue()


# -- memories, notices, ends ---------------------------------------------------------------


def test_a_memory_is_a_panel_with_its_type_content_bindings_match_and_id() -> None:
    view, output = transcript_view()
    found = message(f"{CYCLE}.1.m1", MEMORY, modal="memory", role="system")
    view.show(found | {"card": {"kind": "found", "match": "best"}})
    text = output.getvalue()
    assert "memory · constraint" in text
    assert "Is allergic to peanuts" in text
    assert "bindings: food allergy, peanuts" in text
    assert "best match" in text  # words, not a small number read as "weak"
    assert "0.87" not in text
    assert "mem_01abcdefghijklmnopqrstuvwx" in text
    assert "╭" in text  # a panel, not a bare line


def test_a_saved_and_an_updated_memory_say_so_and_what_was_replaced() -> None:
    view, output = transcript_view()
    saved = message(f"{CYCLE}.1.m1", MEMORY, modal="memory", role="system")
    view.show(saved | {"card": {"kind": "saved"}})
    updated = message(f"{CYCLE}.2.m1", MEMORY, modal="memory", role="system")
    view.show(updated | {"card": {"kind": "updated", "replaced": "Likes peanuts"}})
    text = output.getvalue()
    assert "memory saved · constraint" in text
    assert "memory updated · constraint" in text
    assert "was: Likes peanuts" in text
    # A card from before cards said how they matched: related, not a number.
    view.show(message(f"{CYCLE}.3.m1", MEMORY, modal="memory", role="system"))
    assert "related" in output.getvalue()


def test_a_system_notice_and_an_error_frame_are_shown_plainly() -> None:
    view, output = transcript_view()
    view.show(message(f"{CYCLE}.3.n", "The step took too long and was stopped.", role="system"))
    view.show({"type": "error", "code": "rate_limited", "message": "slow down; try again in 4 s"})
    view.show({"type": "something_new", "field": 1})  # ignored, as the protocol asks
    text = output.getvalue()
    assert "! The step took too long and was stopped." in text
    assert "error (rate_limited): slow down; try again in 4 s" in text
    assert "something_new" not in text


def test_the_end_of_a_cycle_lists_its_actions_and_what_it_cost() -> None:
    view, output = transcript_view()
    usage = {"input_tokens": 1830, "output_tokens": 41, "cost_usd": 0.00208, "by_model": {}}
    view.show(cycle_end(["MemorySearch", "Finalize"], usage))
    view.show(cycle_end(["Finalize"]))
    lines = output.getvalue().splitlines()
    assert lines[0] == "· MemorySearch → Finalize · 1,830 in / 41 out tokens · $0.0021"
    assert lines[1] == "· Finalize"


def test_frames_of_a_queued_message_say_so() -> None:
    view, output = transcript_view()
    view.show({"type": "accepted", "id": "msg_02", "thread_id": THREAD, "queued": True})
    assert "queued" in output.getvalue()


# -- command results -------------------------------------------------------------------------


def test_memory_ids_stay_whole_in_a_narrow_table() -> None:
    view, output = transcript_view(width=60)
    memory = Memory.model_validate(MEMORY | {"content": "a rather long memory " * 6})
    view.memories([memory], None)
    assert MEMORY_ID in output.getvalue()


def test_search_results_say_how_they_matched_and_an_empty_search_says_so() -> None:
    view, output = transcript_view()
    other = Memory.model_validate(MEMORY | {"memory_id": "mem_other", "relevance_score": 0.2})
    view.memories([Memory.model_validate(MEMORY), other], "allergy")
    view.memories([], "rockets")
    text = output.getvalue()
    assert "best match" in text and "related" in text
    assert "0.87" not in text
    assert "no memories match 'rockets'" in text


def test_the_thread_table_marks_the_current_thread() -> None:
    view, output = transcript_view()
    when = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
    view.threads(
        [
            Thread(
                thread_id="main",
                title="Trip",
                created_at=when,
                updated_at=when,
                message_count=4,
                last_message="Here is a plan",
            ),
            Thread(
                thread_id="t_2", title="New chat", created_at=when, updated_at=when, message_count=0
            ),
        ],
        current="main",
    )
    rows = [line for line in output.getvalue().splitlines() if "main" in line or "t_2" in line]
    assert "*" in rows[0]
    assert "Here is a plan" in rows[0]
    assert "*" not in rows[1]


FAMILY = "family \U0001f468\u200d\U0001f469\u200d\U0001f467"
HEART_ON_FIRE = "\u2764\ufe0f\u200d\U0001f525"


@pytest.mark.parametrize(
    ("stored", "printed"),
    [
        ("remember that my pin is \u202e1234\u202c", "my pin is ⟨U+202E⟩1234⟨U+202C⟩"),
        ("pay\u200bpal", "pay⟨U+200B⟩pal"),
        (
            "\ufeffhello \u2066x\u2069 \u200e\u200f",
            "⟨U+FEFF⟩hello ⟨U+2066⟩x⟨U+2069⟩ ⟨U+200E⟩⟨U+200F⟩",
        ),
        ("a\u200db", "a⟨U+200D⟩b"),
        (
            "family \U0001f468\u200d\U0001f469\u200d\U0001f467",
            "family \U0001f468\u200d\U0001f469\u200d\U0001f467",
        ),
        (
            "\u2764\ufe0f\u200d\U0001f525",
            "\u2764\ufe0f\u200d\U0001f525",
        ),  # heart on fire: one emoji
    ],
)
def test_invisible_characters_show_as_marked_code_points(stored: str, printed: str) -> None:
    """The finding: a memory "my pin is \u202e1234\u202c" read "my pin is 4321". Every
    invisible format or direction character is shown as what it is, in messages, memory
    cards, thread titles and tables alike; a joiner inside an emoji is part of the emoji."""
    view, output = transcript_view()
    view.show(message(f"{CYCLE}.1.1", stored))
    view.show(message(f"{CYCLE}.1.2", MEMORY | {"content": stored}, modal="memory", role="system"))
    text = output.getvalue()
    assert text.count(printed) == 2, text
    assert " ".join(printed.split()) in clean_line(stored)

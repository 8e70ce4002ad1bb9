"""How the chat looks: server frames and command results become lines, panels and tables.

On a terminal, while a reply is on its way, the bottom of the screen is a live region: the
answer as it streams in and one spinner line with the latest status ("Thinking...",
"Searching memories..."). The region is transient: when a message is complete it is printed
once above it, for good, and the region forgets its streamed copy, so nothing shows twice.
Without a terminal (a pipe, a file) there is no live region: status lines are skipped and
a streamed answer is printed once, whole, when its final message arrives.

Every string from the gateway goes through :mod:`.sanitize` and into a ``Text`` (never
console markup), so no content can drive the terminal or restyle the output.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.live import Live
from rich.markdown import Markdown
from rich.panel import Panel
from rich.segment import Segment
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

from memoria_cli.chat.sanitize import clean, clean_line, shown
from memoria_client import Memory, Thread
from memoria_contracts.cycles import Cycle, CycleEvent

Frame = Mapping[str, Any]

REFRESHES_PER_SECOND: Final = 8
REMEMBERED_MESSAGES: Final = 1000
"""Complete messages remembered by id, to drop a repeat (a re-run step, a replayed frame)."""
SNIPPET_CHARS: Final = 60
ERROR_HINTS: Final = {
    "broker_unavailable": "not sent: the gateway cannot queue messages right now; send it again",
    "rate_limited": "not sent: too many messages at once; send it again in a moment",
    "too_large": "not sent: the message is too long",
}
STYLE_USER: Final = "bold cyan"
STYLE_DIM: Final = "dim"
STYLE_WARNING: Final = "yellow"
STYLE_ERROR: Final = "bold red"
STYLE_MEMORY: Final = "magenta"
STYLE_OFFLINE: Final = "bold yellow"
OFFLINE_PLANNER: Final = "offline planner (no LLM)"
"""The offline planner's label on its answers (``memoria_offline.LABEL``)."""
OFFLINE_BADGE: Final = "offline · no model"
MATCH_WORDS: Final = {
    "en": {"best": "best match", "related": "related", "was": "was:"},
    "pt": {"best": "melhor resultado", "related": "relacionada", "was": "antes:"},
}


@dataclass
class _Stream:
    cycle_id: str | None
    text: str


class _Tail:
    """The last lines of a renderable that fit the screen: a live region taller than the
    terminal cannot be erased, and would leave copies of itself behind."""

    def __init__(self, renderable: RenderableType, reserved_lines: int) -> None:
        self._renderable = renderable
        self._reserved = reserved_lines

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        lines = console.render_lines(self._renderable, options.reset_height(), pad=False)
        keep = max(1, console.size.height - self._reserved)
        for line in lines[-keep:]:
            yield from line
            yield Segment.line()


class ChatView:
    """Draws the chat on ``console``. The session feeds it frames (already filtered to the
    current thread); the REPL marks when a reply is awaited, the only time a live region
    may take the bottom of the screen (never under the prompt)."""

    def __init__(self, console: Console, *, echo_input: bool, animate: bool = True) -> None:
        self.console = console
        self._echo_input = echo_input
        """Print the user's own messages too: False when they typed them on this screen."""
        self._live_allowed = console.is_interactive
        self._animate = animate
        """Refresh the live region on a timer (the spinner turns); tests refresh on change."""
        self._lock = threading.Lock()  # the live region is drawn from rich's refresh thread
        self._status: str | None = None
        self._streams: dict[str, _Stream] = {}
        self._shown: OrderedDict[str, str] = OrderedDict()
        self._typed_here: set[str] = set()
        self._awaiting = False
        self._live: Live | None = None

    # -- the wait for a reply ---------------------------------------------------------------

    def begin_reply(self) -> None:
        self._awaiting = True

    def end_reply(self) -> None:
        """The reply is over (or no longer awaited): the prompt gets the screen back."""
        self._awaiting = False
        with self._lock:
            self._status = None
        self._update_live()

    def echo(self, line: str) -> None:
        """A command read from a script: shown so that the output reads as a transcript."""
        if self._echo_input:
            self._print(Text.assemble(("you › ", STYLE_USER), clean_line(line)))

    def pending(self) -> RenderableType:
        """What the live region shows: streams in progress, then the status line."""
        with self._lock:
            texts = [stream.text for stream in self._streams.values()]
            status = self._status
        parts: list[RenderableType] = []
        if texts:
            answers = Group(*(Markdown(clean(text)) for text in texts))
            parts.append(_Tail(answers, reserved_lines=2))
        if status is not None:
            parts.append(Spinner("dots", Text(clean_line(status), style=STYLE_DIM)))
        return Group(*parts)

    # -- frames -----------------------------------------------------------------------------

    def show(self, frame: Frame) -> None:
        """Draw one server frame; unknown types and fields are ignored."""
        kind = frame.get("type")
        if kind == "message":
            self._message(frame)
        elif kind == "delta":
            self._delta(frame)
        elif kind == "cycle_end":
            self._cycle_end(frame)
        elif kind == "error":
            self._error(frame)
        elif kind == "accepted":
            self._accepted(frame)

    def _message(self, frame: Frame) -> None:
        modal, role = frame.get("modal"), frame.get("role")
        content = frame.get("content")
        if modal == "textForReplace":
            self._set_status(shown(content))
            return
        message_id = str(frame.get("id", ""))
        text = shown(content)
        with self._lock:
            self._status = None  # "the next message of the thread replaces it"
            self._streams.pop(message_id, None)
            repeat = self._shown.get(message_id) == text
            self._remember(message_id, text)
        # Redraw (or take away) the live region before printing above it: rich would
        # otherwise draw its last picture, the status just replaced, once more below.
        self._update_live()
        if repeat:
            return
        if modal == "memory":
            self._print(memory_panel(content, frame.get("card")))
        elif role == "user":
            if self._echo_input or message_id not in self._typed_here:
                self._print(Text.assemble(("you › ", STYLE_USER), text))
        elif role == "assistant":
            self._print(_answer(text, frame.get("model")))
        else:  # runtime notices: a timeout, a failed step
            self._print(Text(f"! {text}", style=STYLE_WARNING))

    def _delta(self, frame: Frame) -> None:
        message_id = str(frame.get("id", ""))
        piece = frame.get("content")
        if not isinstance(piece, str):
            return
        with self._lock:
            self._status = None
            if message_id in self._shown:  # already complete: a replay or a late piece
                return
            stream = self._streams.setdefault(message_id, _Stream(frame.get("cycle_id"), ""))
            stream.text += piece
        self._update_live()

    def _cycle_end(self, frame: Frame) -> None:
        cycle_id = frame.get("cycle_id")
        with self._lock:
            self._status = None
            # A stream whose final message never came (the step failed or timed out).
            cut = [
                (message_id, stream.text)
                for message_id, stream in self._streams.items()
                if stream.cycle_id == cycle_id
            ]
            for message_id, text in cut:
                del self._streams[message_id]
                self._remember(message_id, text)
        self._update_live()
        for _, text in cut:
            self._print(Markdown(clean(text)))
            self._print(Text("  (incomplete)", style=STYLE_DIM))
        self._print(cycle_summary(frame))

    def _error(self, frame: Frame) -> None:
        code = clean_line(str(frame.get("code", "error")))
        message = clean_line(str(frame.get("message", "")))
        hint = ERROR_HINTS.get(code)
        line = Text(f"error ({code}): {message}", style=STYLE_ERROR)
        if hint:
            line.append(f"\n  {hint}", style=STYLE_WARNING)
        self._print(line)

    def _accepted(self, frame: Frame) -> None:
        # Only the socket that sent a message gets its "accepted": the user's own line.
        self._typed_here.add(str(frame.get("id", "")))
        if frame.get("duplicate"):
            self.notice("already sent before; its reply follows")
        elif frame.get("queued"):
            self.notice("queued: another message of this thread is answered first")

    # -- lines of the CLI itself ------------------------------------------------------------

    def notice(self, text: str) -> None:
        self._print(Text(text, style=STYLE_DIM))

    def warning(self, text: str) -> None:
        self._print(Text(text, style=STYLE_WARNING))

    def error(self, text: str) -> None:
        self._print(Text(text, style=STYLE_ERROR))

    def help(self, entries: Iterable[tuple[str, str]]) -> None:
        table = Table(box=None, show_header=False, pad_edge=False)
        table.add_column(style="bold", no_wrap=True)
        table.add_column()
        for usage, meaning in entries:
            table.add_row(Text(usage), Text(meaning))
        self._print(table)
        self.notice("Anything else you type is sent to the current thread.")

    def threads(self, threads: Sequence[Thread], current: str) -> None:
        if not threads:
            self.notice("no threads yet")
            return
        table = Table(title="threads", title_justify="left")
        table.add_column("", no_wrap=True)
        table.add_column("thread", no_wrap=True)
        table.add_column("title")
        table.add_column("messages", justify="right")
        table.add_column("updated", no_wrap=True)
        table.add_column("last message")
        for thread in threads:
            table.add_row(
                Text("*" if thread.thread_id == current else ""),
                Text(clean_line(thread.thread_id)),
                Text(clean_line(thread.title or "")),
                Text("" if thread.message_count is None else str(thread.message_count)),
                Text(_when(thread.updated_at)),
                Text(_snippet(thread.last_message), style=STYLE_DIM),
            )
        self._print(table)

    def memories(self, memories: Sequence[Memory], query: str | None) -> None:
        if not memories:
            self.notice(f"no memories match {query!r}" if query else "no memories")
            return
        searched = any(memory.relevance_score is not None for memory in memories)
        count = len(memories)
        title = f"{count} memory" if count == 1 else f"{count} memories"
        table = Table(title=title, title_justify="left")
        table.add_column("id", no_wrap=True, style=STYLE_MEMORY)  # needed whole for /forget
        table.add_column("type", no_wrap=True)
        table.add_column("content")
        table.add_column("bindings", style=STYLE_DIM)
        if searched:
            table.add_column("match")
        for index, memory in enumerate(memories):
            cells = [
                Text(clean_line(memory.memory_id)),
                Text(clean_line(memory.memory_type)),
                Text(shown(memory.content)),
                Text(clean_line(", ".join(memory.bindings))),
            ]
            if searched:  # results come best first
                cells.append(Text(_match_words("best" if index == 0 else "related")))
            table.add_row(*cells)
        self._print(table)

    def trace(self, cycle: Cycle) -> None:
        """A cycle's events in order, one row each, timed from its start."""
        ended = f"{cycle.end_reason}" if cycle.end_reason else "still running"
        title = f"{cycle.cycle_id} · thread {cycle.thread_id} · {ended}"
        table = Table(title=clean_line(title), title_justify="left")
        table.add_column("+ms", justify="right", style=STYLE_DIM)
        table.add_column("stream", no_wrap=True, style=STYLE_DIM)
        table.add_column("event", no_wrap=True)
        table.add_column("what")
        for event in cycle.events:
            elapsed = (event.at - cycle.started_at).total_seconds() * 1000
            table.add_row(
                Text(f"{elapsed:.0f}"),
                Text(clean_line(event.stream)),
                Text(clean_line(event.type)),
                Text(_event_text(event)),
            )
        self._print(table)
        if cycle.truncated:
            self.warning(f"only the first {len(cycle.events)} events are shown")
        self.notice(f"trace id {cycle.trace_id or 'unknown'}")

    # -- drawing ----------------------------------------------------------------------------

    def _set_status(self, text: str) -> None:
        with self._lock:
            self._status = text
        self._update_live()

    def _remember(self, message_id: str, text: str) -> None:
        self._shown[message_id] = text
        self._shown.move_to_end(message_id)
        while len(self._shown) > REMEMBERED_MESSAGES:
            self._shown.popitem(last=False)

    def _print(self, renderable: RenderableType) -> None:
        # Above the live region when there is one: rich keeps that at the bottom.
        self.console.print(renderable)

    def _update_live(self) -> None:
        """Start, refresh or stop the live region to match what is pending."""
        with self._lock:
            wanted = self._awaiting and self._live_allowed
            busy = self._status is not None or bool(self._streams)
        if wanted and busy:
            if self._live is None:
                self._live = Live(
                    console=self.console,
                    get_renderable=self.pending,
                    transient=True,
                    auto_refresh=self._animate,
                    refresh_per_second=REFRESHES_PER_SECOND,
                    redirect_stdout=False,
                    redirect_stderr=False,
                )
                self._live.start(refresh=True)
            elif not self._animate:
                self._live.refresh()
        elif self._live is not None:
            self._live.stop()
            self._live = None


def _answer(text: str, model: Any) -> RenderableType:
    if not model:
        return Markdown(text)
    if model == OFFLINE_PLANNER:
        # The conversation's first answer says that no model answers; then this badge.
        return Group(Markdown(text), Text(f"  [{OFFLINE_BADGE}]", style=STYLE_OFFLINE))
    return Group(Markdown(text), Text(f"  — {clean_line(str(model))}", style=STYLE_DIM))


def _match_words(match: str) -> str:
    """How well a card matched, in words people read right (the API keeps the number)."""
    language = "pt" if os.environ.get("LANG", "").lower().startswith("pt") else "en"
    return MATCH_WORDS[language].get(match, match)


def memory_panel(content: Any, card: Any = None) -> RenderableType:
    """A memory found by a search (how well it matched, in words), saved, or updated (with
    what it replaced): what it says, its bindings and id."""
    if not isinstance(content, Mapping):
        return Panel(Text(shown(content)), title=Text("memory"), expand=False)
    note = card if isinstance(card, Mapping) else {}
    lines: list[RenderableType] = [Text(shown(content.get("content")))]
    if note.get("kind") == "updated" and note.get("replaced") is not None:
        lines.append(Text(f"{_match_words('was')} {shown(note.get('replaced'))}", style=STYLE_DIM))
    bindings = content.get("bindings")
    if isinstance(bindings, list) and bindings:
        joined = ", ".join(clean_line(str(binding)) for binding in bindings)
        lines.append(Text(f"bindings: {joined}", style=STYLE_DIM))
    match = note.get("match")
    if match is None and isinstance(content.get("relevance_score"), int | float):
        match = "related"  # a card shown before cards said how they matched
    if isinstance(match, str):
        lines.append(Text(_match_words(match), style=STYLE_DIM))
    kind = clean_line(str(content.get("memory_type") or ""))
    memory_id = clean_line(str(content.get("memory_id") or ""))
    shown_as = {"saved": "memory saved", "updated": "memory updated"}.get(
        str(note.get("kind")), "memory"
    )
    return Panel(
        Group(*lines),
        title=Text(f"{shown_as} · {kind}" if kind else shown_as),
        title_align="left",
        subtitle=Text(memory_id) if memory_id else None,
        subtitle_align="right",
        border_style=STYLE_MEMORY,
        expand=False,
    )


def cycle_summary(frame: Frame) -> Text:
    """The actions a cycle took, why it ended when not simply done, and what it cost."""
    actions = frame.get("actions")
    steps = [clean_line(str(action)) for action in actions] if isinstance(actions, list) else []
    line = Text("· " + (" → ".join(steps) if steps else "no actions"), style=STYLE_DIM)
    reason = frame.get("reason")
    if reason and reason != "done":
        line.append(f" ({clean_line(str(reason))})", style=STYLE_WARNING)
    usage = frame.get("usage")
    if isinstance(usage, Mapping):
        line.append(f" · {_usage(usage)}", style=STYLE_DIM)
    return line


def _usage(usage: Mapping[str, Any]) -> str:
    tokens_in, tokens_out = usage.get("input_tokens"), usage.get("output_tokens")
    text = f"{_count(tokens_in)} in / {_count(tokens_out)} out tokens"
    cost = usage.get("cost_usd")
    if isinstance(cost, int | float):
        text += f" · ${cost:.4f}"
    return text


def _count(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else "?"


def _event_text(event: CycleEvent) -> str:
    """One line that says what a trace event did."""
    if event.message is not None:
        message = event.message
        if message.tool_calls:  # tool-role history: the step's call and its result
            return f"tool call: {', '.join(call.name for call in message.tool_calls)}"
        if message.role == "tool":
            return f"tool result {message.name}: {_snippet(message.content)}"
        return f"{message.role}/{message.modal}: {_snippet(message.content)}"
    if event.type == "action.completed":
        outcome = f"{event.status}: {event.summary or ''}"
        if event.error:
            outcome += f" ({event.error})"
        return clean_line(f"step {event.step} {event.action} {outcome}")
    if event.step is not None:
        return clean_line(f"step {event.step} {event.action}")
    if event.type == "cycle.ended":
        return clean_line(f"{event.reason}: {', '.join(event.actions or [])}")
    return ""


def _when(moment: datetime | None) -> str:
    return "" if moment is None else moment.astimezone().strftime("%Y-%m-%d %H:%M")


def _snippet(value: Any) -> str:
    if isinstance(value, Mapping):  # a whole message, should a gateway send one
        value = value.get("content")
    text = clean_line(shown(value)) if value is not None else ""
    return text if len(text) <= SNIPPET_CHARS else text[: SNIPPET_CHARS - 1] + "…"

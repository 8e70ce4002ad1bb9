"""`memoria chat`: log in, open the socket, then read lines until the end.

A message waits for its cycle to end before the next line is read, so a script piped in
runs turn by turn, exactly as someone typing would; one the gateway cannot take yet (the rate
limit, the broker away) is sent again after the wait the gateway names (``resend``). Slash
commands use memoria_client.
"""

from __future__ import annotations

import asyncio
import secrets
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TextIO

from rich.console import Console

from memoria_cli.chat.commands import (
    THREAD_ID,
    Blank,
    ChatState,
    Quit,
    Say,
    parse,
    run_command,
)
from memoria_cli.chat.lines import LineReader, is_terminal, terminal_kept
from memoria_cli.chat.render import ChatView
from memoria_cli.chat.resend import RESENT_CODES, ResendPolicy, send_until_taken
from memoria_cli.chat.session import (
    CYCLE_SILENCE_S,
    RECONNECT_DELAYS_S,
    ChatSession,
    CycleOutcome,
    Frame,
    SessionEnded,
)
from memoria_cli.gateway_client import Connection, GatewayError, connect
from memoria_client import AsyncMemoria

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
DEFAULT_THREAD: Final = "main"
"""The web chat's default thread too: both open the same conversation."""
CLIENT_ID_BYTES: Final = 16  # 22 URL-safe characters: within the protocol's 8 to 64
WAIT_NOTES: Final = {
    "rate_limited": "too many messages for the gateway's rate limit",
    "broker_unavailable": "the gateway cannot queue messages right now",
}


@dataclass(frozen=True)
class _Context:
    session: ChatSession
    client: AsyncMemoria
    view: ChatView
    state: ChatState
    resend: ResendPolicy


def new_client_id() -> str:
    return secrets.token_urlsafe(CLIENT_ID_BYTES)


async def chat(
    connection: Connection,
    thread: str,
    view: ChatView,
    lines: LineReader,
    *,
    errors: Console,
    environ: Mapping[str, str] | None = None,
    reconnect_delays: Sequence[float] = RECONNECT_DELAYS_S,
    resend: ResendPolicy | None = None,
) -> int:
    """The whole command; the exit code."""
    state = ChatState(thread)

    def on_frame(frame: Frame) -> None:
        if frame.get("type") == "error" and frame.get("code") in RESENT_CODES:
            return  # a reply that _say waits out and sends again, or reports when it gives up
        # A socket carries every thread of the user; only the current one is on screen.
        if frame.get("thread_id") in (None, state.thread):
            view.show(frame)
            if frame.get("type") == "cycle_end" and isinstance(frame.get("cycle_id"), str):
                state.last_cycle = frame["cycle_id"]

    try:
        async with connect(connection, environ) as client:
            session = ChatSession(client, on_frame, view.warning, reconnect_delays=reconnect_delays)
            await session.open()
            try:
                view.notice(f"thread {thread} · /help lists the commands · Ctrl-D leaves")
                context = _Context(session, client, view, state, resend or ResendPolicy())
                return await _converse(context, lines)
            finally:
                view.end_reply()
                await session.close()
    except (GatewayError, SessionEnded) as exc:
        errors.print(
            f"chat failed: {exc}", style="bold red", markup=False, highlight=False, soft_wrap=True
        )
        return EXIT_FAILED


async def _converse(ctx: _Context, lines: LineReader) -> int:
    while True:
        line = await _next_line(ctx, lines)
        if line is None:
            return EXIT_OK
        command = parse(line)
        if isinstance(command, Quit):
            return EXIT_OK
        if isinstance(command, Say):
            await _say(ctx, command.text)
        elif not isinstance(command, Blank):
            ctx.view.echo(line)
            await run_command(command, ctx.client, ctx.view, ctx.state)


async def _next_line(ctx: _Context, lines: LineReader) -> str | None:
    """The next line, unless the session ends first (then its error is raised)."""
    reading = asyncio.ensure_future(lines.read(f"{ctx.state.thread}> "))
    ending = asyncio.ensure_future(ctx.session.ended())
    try:
        await asyncio.wait([reading, ending], return_when=asyncio.FIRST_COMPLETED)
    finally:
        ending.cancel()
    if reading.done():
        return reading.result()
    reading.cancel()
    raise ending.result()


async def _say(ctx: _Context, text: str) -> None:
    thread, client_id = ctx.state.thread, new_client_id()

    async def send() -> Frame:
        return await ctx.session.send(thread, text, client_id)

    def waiting(refusal: Mapping[str, Any], seconds: float) -> None:
        note = WAIT_NOTES.get(str(refusal.get("code")), "not taken")
        ctx.view.warning(f"{note}: sending it again in {seconds:g} s")

    ctx.view.begin_reply()
    try:
        reply = await send_until_taken(send, ctx.resend, waiting)
        if reply.get("type") != "accepted":
            if reply.get("code") in RESENT_CODES:
                ctx.view.show(reply)  # gave up waiting: on_frame left it to us
            return  # the message was not taken; the view has said why
        outcome = await ctx.session.wait_for_cycle(str(reply.get("id")))
    finally:
        ctx.view.end_reply()
    if outcome is CycleOutcome.INTERRUPTED:
        thread = ctx.state.thread
        ctx.view.warning(
            f"part of this reply was lost with the connection: /thread {thread} shows "
            "the thread's latest messages"
        )
    elif outcome is CycleOutcome.SILENT:
        ctx.view.warning(
            f"no answer for {CYCLE_SILENCE_S:.0f} s: not waiting any more "
            "(a late reply is still shown)"
        )


def run_chat(
    connection: Connection,
    thread: str | None = None,
    *,
    stdin: TextIO | None = None,
    console: Console | None = None,
    errors: Console | None = None,
    environ: Mapping[str, str] | None = None,
) -> int:
    """`memoria chat`; the exit code. Reads ``stdin`` (default: the process's): a terminal
    gets a prompt, anything else is read to its end, a line per message or command."""
    source = sys.stdin if stdin is None else stdin
    out = Console() if console is None else console
    err = Console(stderr=True) if errors is None else errors
    chosen = DEFAULT_THREAD if thread is None else thread
    if not THREAD_ID.fullmatch(chosen):
        err.print(f"not a thread id: {chosen!r}", style="bold red", markup=False, soft_wrap=True)
        return EXIT_FAILED
    typing = is_terminal(source)
    # Someone typing sees their words at the prompt already; a script's output shows them.
    view = ChatView(out, echo_input=not (typing and out.is_terminal))
    with terminal_kept(source):
        try:
            return asyncio.run(
                chat(
                    connection,
                    chosen,
                    view,
                    LineReader(source, prompt=typing),
                    errors=err,
                    environ=environ,
                )
            )
        except KeyboardInterrupt:  # Ctrl-C: a normal way to leave
            out.print()
            return EXIT_OK

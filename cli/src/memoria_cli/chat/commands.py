"""Slash commands: what a typed line means (a message to send, or a command and its
argument), and running a command through the gateway's HTTP API.

Parsing is a pure function, so the rules (what needs an argument, what a valid thread id
is, how to send a line that starts with a slash) can be read and tested alone.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from typing import Final

import httpx

from memoria_cli.chat import api
from memoria_cli.chat.render import ChatView
from memoria_cli.chat.sanitize import shown
from memoria_cli.gateway_client import GatewayError

THREAD_ID: Final = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
"""The protocol's thread id (docs/protocol.md): checked here so a typo is caught before a
message goes to a thread nobody meant."""
ESCAPE: Final = "//"
"""A line starting with ``//`` is sent as a message that starts with ``/``."""
RECENT_MESSAGES: Final = 10
"""Messages shown from a thread switched to, for context."""
CYCLE_ID: Final = re.compile(r"^cyc_[A-Za-z0-9_-]{1,80}$")
"""A cycle id as ``GET /api/cycles/{cycle_id}`` takes it."""
PERSONA_ID: Final = re.compile(r"^[a-z0-9][a-z0-9_-]{0,39}$")
"""A persona id as the session config takes it (docs/protocol.md#personas)."""


@dataclass
class ChatState:
    thread: str
    last_cycle: str | None = None
    """The newest cycle that ended in this chat, for ``/trace``."""


@dataclass(frozen=True)
class Say:
    """Send ``text`` to the current thread."""

    text: str


@dataclass(frozen=True)
class Blank:
    """Nothing to do: an empty line."""


@dataclass(frozen=True)
class Help:
    pass


@dataclass(frozen=True)
class Threads:
    pass


@dataclass(frozen=True)
class SwitchThread:
    thread_id: str


@dataclass(frozen=True)
class NewThread:
    pass


@dataclass(frozen=True)
class Memories:
    query: str | None = None
    """None lists the newest memories; a text searches them by meaning."""


@dataclass(frozen=True)
class Forget:
    memory_id: str


@dataclass(frozen=True)
class Edit:
    memory_id: str
    content: str


@dataclass(frozen=True)
class Trace:
    cycle_id: str | None = None
    """None: the last cycle of this chat."""


@dataclass(frozen=True)
class Persona:
    persona_id: str | None = None
    """None lists the personas (the current thread's marked); an id switches to it."""


@dataclass(frozen=True)
class Quit:
    pass


@dataclass(frozen=True)
class Invalid:
    """A slash command that cannot run as typed; ``reason`` says why."""

    reason: str


Command = (
    Say
    | Blank
    | Help
    | Threads
    | SwitchThread
    | NewThread
    | Memories
    | Forget
    | Edit
    | Trace
    | Persona
    | Quit
    | Invalid
)

HELP: Final = (
    ("/help", "this list"),
    ("/threads", "your threads"),
    ("/thread ID", "switch to thread ID (new or existing)"),
    ("/new", "start a new thread"),
    ("/memories [QUERY]", "your newest memories, or those that match QUERY"),
    ("/forget ID", "delete the memory ID"),
    ("/edit ID TEXT", "change the text of the memory ID to TEXT"),
    ("/trace [CYCLE_ID]", "every step of the last reply (or of CYCLE_ID), in order"),
    ("/persona [ID]", "the personas, or switch this thread to persona ID"),
    ("/quit", "leave (Ctrl-D and Ctrl-C too)"),
    ("//text", "send a message that starts with /"),
)


def parse(line: str) -> Command:
    text = line.strip()
    if not text:
        return Blank()
    if text.startswith(ESCAPE):
        return Say(text[1:])
    if not text.startswith("/"):
        return Say(text)
    name, _, rest = text[1:].partition(" ")
    return _command(name.lower(), rest.strip())


def _command(name: str, argument: str) -> Command:
    if name in {"help", "?"}:
        return Help()
    if name == "threads":
        return Threads()
    if name == "new":
        return NewThread()
    if name in {"quit", "exit"}:
        return Quit()
    if name == "memories":
        return Memories(argument or None)
    if name == "thread":
        if not argument:
            return Invalid("usage: /thread ID")
        if not THREAD_ID.fullmatch(argument):
            return Invalid(
                f"not a thread id: {argument!r} (1 to 64 letters, digits, '.', '_' or '-')"
            )
        return SwitchThread(argument)
    if name == "forget":
        if not argument or " " in argument:
            return Invalid("usage: /forget ID (the id /memories shows)")
        return Forget(argument)
    if name == "edit":
        memory_id, _, content = argument.partition(" ")
        if not memory_id or not content.strip():
            return Invalid("usage: /edit ID TEXT (the id /memories shows, then the new text)")
        return Edit(memory_id, content.strip())
    if name == "trace":
        if argument and not CYCLE_ID.fullmatch(argument):
            return Invalid(f"not a cycle id: {argument!r} (cyc_…, as /trace shows)")
        return Trace(argument or None)
    if name == "persona":
        if argument and not PERSONA_ID.fullmatch(argument):
            return Invalid(f"not a persona id: {argument!r} (/persona lists them)")
        return Persona(argument or None)
    return Invalid(f"unknown command /{name}: /help lists the commands")


async def run_command(
    command: Command, client: httpx.AsyncClient, view: ChatView, state: ChatState
) -> None:
    """Run a slash command (messages and /quit are the REPL's). A refusal from the gateway
    is reported and the chat goes on."""
    try:
        if isinstance(command, Invalid):
            view.error(command.reason)
        elif isinstance(command, Help):
            view.help(HELP)
        elif isinstance(command, Threads):
            view.threads(await api.list_threads(client), state.thread)
        elif isinstance(command, SwitchThread):
            await _switch(command.thread_id, client, view, state)
        elif isinstance(command, NewThread):
            await _switch(await _new_thread(client), client, view, state, recent=False)
        elif isinstance(command, Memories):
            if command.query is None:
                view.memories(await api.list_memories(client), None)
            else:
                found = await api.search_memories(client, command.query)
                view.memories(found, command.query)
        elif isinstance(command, Forget):
            forgotten = await api.forget(client, command.memory_id)
            if forgotten is None:
                view.error(f"no such memory: {command.memory_id}")
            else:
                view.notice(f"forgot {forgotten.memory_id}: {shown(forgotten.content)}")
        elif isinstance(command, Edit):
            edited = await api.edit(client, command.memory_id, command.content)
            if edited is None:
                view.error(f"no such memory: {command.memory_id}")
            else:
                view.notice(
                    f"changed {edited.memory_id}: {shown(edited.old_content)} → "
                    f"{shown(edited.new_content)}"
                )
        elif isinstance(command, Trace):
            await _trace(command.cycle_id or state.last_cycle, client, view)
        elif isinstance(command, Persona):
            await _persona(command.persona_id, client, view, state)
    except api.NotAvailable as exc:
        view.warning(str(exc))
    except (api.ApiError, GatewayError) as exc:
        view.error(str(exc))


async def _trace(cycle_id: str | None, client: httpx.AsyncClient, view: ChatView) -> None:
    if cycle_id is None:
        view.warning("no reply yet in this chat: send a message first, or /trace CYCLE_ID")
        return
    cycle = await api.cycle_trace(client, cycle_id)
    if cycle is None:
        view.error(f"no such cycle: {cycle_id}")
    else:
        view.trace(cycle)


async def _persona(
    persona_id: str | None, client: httpx.AsyncClient, view: ChatView, state: ChatState
) -> None:
    if persona_id is None:
        listed = await api.list_personas(client)
        current = await api.thread_persona(client, state.thread) or listed.default
        for persona in listed.personas:
            mark = "*" if persona.id == current else " "
            view.notice(
                f"{mark} {persona.id}: {shown(persona.name)} - {shown(persona.description)}"
            )
        return
    switched = await api.switch_persona(client, state.thread, persona_id)
    if switched is None:
        view.warning("this thread is not stored yet: send a message first, then /persona")
    else:
        view.notice(f"{switched} answers in thread {state.thread} from your next message")


async def _new_thread(client: httpx.AsyncClient) -> str:
    try:
        return await api.create_thread(client)
    except api.NotAvailable:
        # Threads need no creating on such a gateway: a new id is a new thread.
        return f"cli-{secrets.token_hex(4)}"


async def _switch(
    thread_id: str,
    client: httpx.AsyncClient,
    view: ChatView,
    state: ChatState,
    *,
    recent: bool = True,
) -> None:
    state.thread = thread_id
    view.notice(f"now in thread {thread_id}")
    if recent:
        for frame in await api.recent_messages(client, thread_id, RECENT_MESSAGES):
            view.show(frame)

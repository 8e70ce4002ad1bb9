"""Slash commands: what a typed line means (a message to send, or a command and its
argument), and running a command with memoria_client.

Parsing is a pure function, so the rules (what needs an argument, what a valid thread id
is, how to send a line that starts with a slash) can be read and tested alone.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Final, TypeVar

from memoria_cli.chat.render import ChatView
from memoria_cli.chat.sanitize import shown
from memoria_client import (
    APIError,
    AsyncMemoria,
    MemoriaError,
    MemoryUpdate,
    NotFound,
    UnreadableAnswer,
)
from memoria_client.errors import describe
from memoria_contracts.cycles import Cycle

T = TypeVar("T")

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
MEMORIES_SHOWN: Final = 50
MISSING_ROUTE: Final = frozenset({404, 405})


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
    command: Command, client: AsyncMemoria, view: ChatView, state: ChatState
) -> None:
    """Run a slash command (messages and /quit are the REPL's). A refusal from the gateway
    is reported and the chat goes on."""
    try:
        if isinstance(command, Invalid):
            view.error(command.reason)
        elif isinstance(command, Help):
            view.help(HELP)
        elif isinstance(command, Threads):
            threads = await _ask(client.threads(), "listing threads", route="threads")
            view.threads(threads, state.thread)
        elif isinstance(command, SwitchThread):
            await _switch(command.thread_id, client, view, state)
        elif isinstance(command, NewThread):
            await _switch(await _new_thread(client), client, view, state, recent=False)
        elif isinstance(command, Memories):
            if command.query is None:
                page = await _ask(client.list_page(limit=MEMORIES_SHOWN), "listing memories")
                view.memories(page.memories, None)
            else:
                found = await _ask(client.search(command.query), "searching memories")
                view.memories(found, command.query)
        elif isinstance(command, Forget):
            forgotten = await _ask(client.delete(command.memory_id), "forgetting", found=True)
            view.notice(f"forgot {forgotten.memory_id}: {shown(forgotten.deleted_content)}")
        elif isinstance(command, Edit):
            edited = await _edit(client, command.memory_id, command.content)
            view.notice(
                f"changed {command.memory_id}: {shown(edited.old_content)} → "
                f"{shown(edited.new_content)}"
            )
        elif isinstance(command, Trace):
            await _trace(command.cycle_id or state.last_cycle, client, view)
        elif isinstance(command, Persona):
            await _persona(command.persona_id, client, view, state)
    except NotAvailable as exc:
        view.warning(str(exc))
    except NotFound:
        view.error(_not_found(command))
    except (CommandFailed, MemoriaError) as exc:
        view.error(str(exc))


class NotAvailable(Exception):
    """The gateway has no such route (an older gateway)."""


class CommandFailed(Exception):
    """A request the gateway refused or answered in a way this CLI cannot read; the chat
    reports it and goes on."""


async def _ask(
    call: Awaitable[T], what: str, *, found: bool = False, route: str | None = None
) -> T:
    """``call``'s answer. ``found``: a 404 is the caller's (no such memory, cycle...) and
    left as :class:`NotFound`. ``route``: a gateway without the route (404 for a path it does
    not know, 405 for a method) is :class:`NotAvailable`, not a refusal."""
    try:
        return await call
    except NotFound:
        if found:
            raise
        if route is not None:
            raise NotAvailable(f"{route} are not available on this gateway") from None
        raise CommandFailed(f"{what} failed (404): not found") from None
    except APIError as exc:
        if route is not None and exc.status_code in MISSING_ROUTE:
            raise NotAvailable(f"{route} are not available on this gateway") from None
        raise CommandFailed(f"{what} failed ({exc.status_code}): {describe(exc.detail)}") from None
    except UnreadableAnswer:
        raise CommandFailed(f"{what}: the gateway sent an answer this CLI cannot read") from None


def _not_found(command: Command) -> str:
    """A 404 from a command's request: another user's id and a malformed one look alike."""
    if isinstance(command, Forget | Edit):
        return f"no such memory: {command.memory_id}"
    if isinstance(command, Trace):
        return f"no such cycle: {command.cycle_id}"
    return "not found"


async def _edit(client: AsyncMemoria, memory_id: str, content: str) -> MemoryUpdate:
    """Change a text memory's text (its history keeps the old one; the memory service
    renames the binding that was the old text). A JSON memory is refused here: a line of
    text would replace it with text."""
    memory = await _ask(client.get(memory_id), "reading the memory", found=True)
    if memory.content_kind != "text":
        raise CommandFailed(
            f"{memory_id} holds JSON: change it through the HTTP API "
            f"(PATCH /api/memories/{memory_id})"
        )
    return await _ask(client.update(memory_id, content=content), "changing the memory", found=True)


async def _trace(cycle_id: str | None, client: AsyncMemoria, view: ChatView) -> None:
    if cycle_id is None:
        view.warning("no reply yet in this chat: send a message first, or /trace CYCLE_ID")
        return
    try:
        trace = await _ask(client.cycle(cycle_id), "reading the cycle", found=True)
    except NotFound:
        view.error(f"no such cycle: {cycle_id}")
        return
    # The view draws the typed events of Memoria's own contracts.
    view.trace(Cycle.model_validate(trace.model_dump(mode="json")))


async def _persona(
    persona_id: str | None, client: AsyncMemoria, view: ChatView, state: ChatState
) -> None:
    if persona_id is None:
        listed = await _ask(client.personas(), "listing personas", route="personas")
        current = await _thread_persona(client, state.thread) or listed.default
        for persona in listed.personas:
            mark = "*" if persona.id == current else " "
            view.notice(
                f"{mark} {persona.id}: {shown(persona.name)} - {shown(persona.description)}"
            )
        return
    try:
        config = await _ask(
            client.update_thread_config(state.thread, persona=persona_id),
            "switching the persona",
            found=True,
        )
    except NotFound:
        view.warning("this thread is not stored yet: send a message first, then /persona")
        return
    view.notice(
        f"{config.config.get('persona')} answers in thread {state.thread} from your next message"
    )


async def _thread_persona(client: AsyncMemoria, thread_id: str) -> str | None:
    """The thread's persona; None for a thread not stored yet (nothing sent to it)."""
    try:
        config = await _ask(
            client.thread_config(thread_id), "reading the thread's config", found=True
        )
    except NotFound:
        return None
    persona = config.config.get("persona")
    return persona if isinstance(persona, str) else None


async def _new_thread(client: AsyncMemoria) -> str:
    try:
        return (await _ask(client.create_thread(), "creating a thread", route="threads")).thread_id
    except NotAvailable:
        # Threads need no creating on such a gateway: a new id is a new thread.
        return f"cli-{secrets.token_hex(4)}"


async def _switch(
    thread_id: str,
    client: AsyncMemoria,
    view: ChatView,
    state: ChatState,
    *,
    recent: bool = True,
) -> None:
    state.thread = thread_id
    view.notice(f"now in thread {thread_id}")
    if recent:
        latest = client.messages(thread_id, limit=RECENT_MESSAGES)
        for message in await _ask(latest, "reading the thread"):
            view.show(message.model_dump(mode="json", by_alias=True))

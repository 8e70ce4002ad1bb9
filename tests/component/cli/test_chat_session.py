"""`memoria chat` over a real WebSocket: a scripted gateway (a websockets server on a free
port) plays each connection's part of the protocol, and the chat runs as the command runs
it, its lines read from a script, its output a transcript."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import re
import socket as net
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from rich.console import Console
from websockets.asyncio.server import Server, ServerConnection, serve

from memoria_cli.chat.lines import LineReader
from memoria_cli.chat.render import ChatView
from memoria_cli.chat.repl import EXIT_FAILED, EXIT_OK, chat
from memoria_cli.chat.resend import ResendPolicy
from memoria_cli.chat.session import ChatSession, CycleOutcome
from memoria_cli.gateway_client import Connection
from memoria_client import AsyncMemoria
from memoria_client import Frame as ServerFrame
from memoria_client.chat import ws_url
from memoria_client.models import parse_frame

TOKEN = "a-token"
THREAD = "main"
CLIENT_ID = re.compile(r"^[A-Za-z0-9_-]{8,64}$")
FAST_RETRIES = (0.01, 0.01, 0.01)
EARLY_FRAME_WAIT_S = 1.0  # a chat that does not wait would have sent its next line by then
DEADLINE_S = 30.0  # against a hanging test, not a measurement

Frame = dict[str, Any]
Play = Callable[["Socket"], Awaitable[None]]


@dataclass
class Socket:
    """One connection as the scripted gateway sees it."""

    ws: ServerConnection
    query: dict[str, str]
    gateway: ScriptedGateway

    async def receive(self) -> Frame:
        frame: Frame = json.loads(await self.ws.recv())
        self.gateway.received.append(frame)
        return frame

    async def send(self, *frames: Frame) -> None:
        for frame in frames:
            await self.ws.send(json.dumps(frame))

    async def answer(self, cycle: Cycle, *, queued: bool = False) -> None:
        """Read a message, accept it and run its whole cycle."""
        await self.receive()
        await self.send(cycle.accepted(queued=queued), *cycle.frames())


@dataclass
class ScriptedGateway:
    plays: list[Play]
    """What each connection does, in the order they come."""
    received: list[Frame] = field(default_factory=list)
    queries: list[dict[str, str]] = field(default_factory=list)
    protocols: list[str | None] = field(default_factory=list)
    """Each connection's Sec-WebSocket-Protocol header."""
    server: Server | None = None

    def stop(self) -> None:
        """Stop listening and drop every connection."""
        assert self.server is not None
        self.server.close()

    async def handle(self, ws: ServerConnection) -> None:
        assert ws.request is not None
        query = {k: v[0] for k, v in parse_qs(urlsplit(ws.request.path).query).items()}
        self.queries.append(query)
        self.protocols.append(ws.request.headers.get("Sec-WebSocket-Protocol"))
        play = self.plays[len(self.queries) - 1]
        await play(Socket(ws, query, self))
        await ws.wait_closed()  # the client leaves when it is done


@dataclass
class Cycle:
    """The frames of one cycle, each with the next event id."""

    number: int
    text: str
    answer: str
    thread: str = THREAD
    actions: tuple[str, ...] = ("Finalize",)
    first_event: int = 1

    @property
    def message_id(self) -> str:
        return f"msg_{self.number}"

    @property
    def cycle_id(self) -> str:
        return f"cyc_{self.number}"

    def accepted(self, *, queued: bool = False) -> Frame:
        return {"type": "accepted", "id": self.message_id, "thread_id": self.thread,
                "queued": queued, "duplicate": False}  # fmt: skip

    def frames(self) -> list[Frame]:
        answer_id = f"{self.cycle_id}.1.1"
        half = len(self.answer) // 2
        frames = [
            self._message(self.message_id, self.text, role="user"),
            self._message(f"{self.cycle_id}.1.status", "Thinking...", role="system",
                          modal="textForReplace"),
            {"type": "delta", "id": answer_id, "content": self.answer[:half]},
            {"type": "delta", "id": answer_id, "content": self.answer[half:]},
            self._message(answer_id, self.answer, role="assistant", model="scripted"),
            {"type": "cycle_end", "actions": list(self.actions), "reason": "done",
             "usage": None},
        ]  # fmt: skip
        return [
            frame | {"thread_id": self.thread, "cycle_id": self.cycle_id,
                     "event_id": f"{self.first_event + n}-0"}
            for n, frame in enumerate(frames)
        ]  # fmt: skip

    def _message(self, message_id: str, content: str, **fields: Any) -> Frame:
        return {"type": "message", "id": message_id, "chat-history": True, "modal": "text",
                "content": content, "model": None, "created_at": "2025-06-01T12:00:00Z",
                **fields}  # fmt: skip


@dataclass
class Run:
    code: int
    output: str
    errors: str


StartGateway = Callable[[list[Play]], Awaitable[tuple[str, ScriptedGateway]]]


@pytest.fixture
async def gateway_url() -> AsyncIterator[StartGateway]:
    """Start a scripted gateway; its address and itself."""
    servers: list[Server] = []

    async def start(plays: list[Play]) -> tuple[str, ScriptedGateway]:
        gateway = ScriptedGateway(plays)
        server = await serve(gateway.handle, "127.0.0.1", 0)
        gateway.server = server
        servers.append(server)
        port = next(iter(server.sockets)).getsockname()[1]
        return f"http://127.0.0.1:{port}", gateway

    yield start
    for server in servers:
        server.close()
        await server.wait_closed()


async def run_chat(url: str, lines: list[str], *, resend: ResendPolicy | None = None) -> Run:
    output, errors = io.StringIO(), io.StringIO()
    view = ChatView(Console(file=output, width=100, color_system=None), echo_input=True)
    script = LineReader(io.StringIO("".join(f"{line}\n" for line in lines)), prompt=False)
    async with asyncio.timeout(DEADLINE_S):
        code = await chat(
            Connection(url, token=TOKEN),
            THREAD,
            view,
            script,
            errors=Console(file=errors, width=200, color_system=None),
            reconnect_delays=FAST_RETRIES,
            resend=resend,
        )
    return Run(code, output.getvalue(), errors.getvalue())


# -- a conversation --------------------------------------------------------------------------


async def test_each_line_is_sent_and_its_whole_reply_shown(gateway_url: StartGateway) -> None:
    hello = Cycle(1, "hello", "Hello there!")
    bye = Cycle(2, "bye", "Goodbye!", first_event=10)

    async def play(socket: Socket) -> None:
        await socket.answer(hello)
        await socket.answer(bye)

    url, gateway = await gateway_url([play])
    run = await run_chat(url, ["hello", "bye"])

    assert run.code == EXIT_OK, run.errors
    assert gateway.queries[0] == {}  # the token is not in the URL: servers log URLs
    assert gateway.protocols[0] == f"memoria.v1, bearer.{TOKEN}"
    sent = gateway.received
    assert [(f["type"], f["thread_id"], f["content"]) for f in sent] == [
        ("message", THREAD, "hello"),
        ("message", THREAD, "bye"),
    ]
    assert all(CLIENT_ID.fullmatch(frame["id"]) for frame in sent)
    assert sent[0]["id"] != sent[1]["id"]
    assert run.output.count("Hello there!") == 1
    assert run.output.count("Goodbye!") == 1
    assert run.output.index("you › hello") < run.output.index("Hello there!")
    assert run.output.index("Hello there!") < run.output.index("you › bye")


async def test_the_next_line_waits_for_the_end_of_its_own_cycle(gateway_url: StartGateway) -> None:
    """Queued behind another client's cycle of the same thread: that cycle's end is not
    this message's."""
    theirs = Cycle(1, "from the browser", "Answer to the browser.")
    mine = Cycle(2, "from the terminal", "Answer to the terminal.", first_event=10)
    early: list[Frame] = []

    async def play(socket: Socket) -> None:
        await socket.receive()
        await socket.send(mine.accepted(queued=True), *theirs.frames())
        with contextlib.suppress(TimeoutError):  # right: the chat waits for its own cycle
            early.append(await asyncio.wait_for(socket.receive(), EARLY_FRAME_WAIT_S))
        await socket.send(*mine.frames())
        await socket.answer(Cycle(3, "next", "Next answer.", first_event=20))

    url, _ = await gateway_url([play])
    run = await run_chat(url, ["from the terminal", "next"])

    assert run.code == EXIT_OK, run.errors
    assert early == []
    assert "queued" in run.output
    assert "Answer to the browser." in run.output
    assert "Answer to the terminal." in run.output
    assert "Next answer." in run.output


async def test_frames_of_other_threads_stay_off_screen(gateway_url: StartGateway) -> None:
    mine = Cycle(1, "hi", "Hi!")
    elsewhere = Cycle(9, "other thread", "Not for this screen.", thread="other")

    async def play(socket: Socket) -> None:
        await socket.receive()
        await socket.send(mine.accepted(), *elsewhere.frames(), *mine.frames())

    url, _ = await gateway_url([play])
    run = await run_chat(url, ["hi"])
    assert run.code == EXIT_OK
    assert "Not for this screen." not in run.output
    assert "Hi!" in run.output


async def test_a_refused_message_is_reported_and_the_chat_goes_on(
    gateway_url: StartGateway,
) -> None:
    async def play(socket: Socket) -> None:
        await socket.receive()
        await socket.send({"type": "error", "code": "too_large", "message": "over 8000 chars"})
        await socket.answer(Cycle(2, "again", "Got it."))

    url, gateway = await gateway_url([play])
    run = await run_chat(url, ["first", "again"])
    assert run.code == EXIT_OK, run.errors
    assert "error (too_large): over 8000 chars" in run.output
    assert "Got it." in run.output
    assert [frame["content"] for frame in gateway.received] == ["first", "again"]  # not resent


def rate_limited(retry_after: int) -> Frame:
    return {"type": "error", "code": "rate_limited", "retry_after": retry_after,
            "message": f"too many messages; try again in {retry_after} s"}  # fmt: skip


async def test_a_message_over_the_rate_limit_is_sent_again_when_the_gateway_says(
    gateway_url: StartGateway,
) -> None:
    """A script's line is not lost to the rate limit: the chat waits the frame's
    ``retry_after`` and sends the same frame (same client id) until it is taken."""
    sent_at: list[float] = []

    async def play(socket: Socket) -> None:
        loop = asyncio.get_running_loop()
        for wait in (1, 0):
            await socket.receive()
            sent_at.append(loop.time())
            await socket.send(rate_limited(wait))
        await socket.receive()
        sent_at.append(loop.time())
        cycle = Cycle(1, "first", "Taken at last.")
        await socket.send(cycle.accepted(), *cycle.frames())
        await socket.answer(Cycle(2, "second", "And the next line.", first_event=10))

    url, gateway = await gateway_url([play])
    run = await run_chat(url, ["first", "second"])

    assert run.code == EXIT_OK, run.errors
    firsts = [frame for frame in gateway.received if frame["content"] == "first"]
    assert len(firsts) == 3
    assert len({frame["id"] for frame in firsts}) == 1  # the gateway takes it at most once
    assert sent_at[1] - sent_at[0] >= 0.9  # waited the second it was told
    assert "sending it again in 1 s" in run.output
    assert "error (rate_limited)" not in run.output
    assert run.output.index("Taken at last.") < run.output.index("And the next line.")


async def test_a_message_the_broker_could_not_queue_is_sent_again(
    gateway_url: StartGateway,
) -> None:
    away = {"type": "error", "code": "broker_unavailable", "message": "nothing was accepted"}

    async def play(socket: Socket) -> None:
        await socket.receive()
        await socket.send(away)
        await socket.answer(Cycle(1, "hello", "Hello after the outage."))

    url, gateway = await gateway_url([play])
    run = await run_chat(url, ["hello"], resend=ResendPolicy(broker_delays=(0.01,)))

    assert run.code == EXIT_OK, run.errors
    assert [frame["content"] for frame in gateway.received] == ["hello", "hello"]
    assert "the gateway cannot queue messages right now: sending it again" in run.output
    assert "Hello after the outage." in run.output


async def test_a_refusal_that_does_not_lift_is_reported_and_the_chat_goes_on(
    gateway_url: StartGateway,
) -> None:
    async def play(socket: Socket) -> None:
        for _ in range(3):
            await socket.receive()
            await socket.send(rate_limited(0))
        await socket.answer(Cycle(2, "next", "The next line still runs."))

    url, gateway = await gateway_url([play])
    run = await run_chat(url, ["first", "next"], resend=ResendPolicy(rate_limited_tries=3))

    assert run.code == EXIT_OK, run.errors
    assert [frame["content"] for frame in gateway.received] == ["first"] * 3 + ["next"]
    assert run.output.count("error (rate_limited)") == 1
    assert "not sent: too many messages at once" in run.output
    assert "The next line still runs." in run.output


# -- a dropped connection ---------------------------------------------------------------------


async def test_a_dropped_socket_is_resumed_from_the_last_event(gateway_url: StartGateway) -> None:
    cycle = Cycle(1, "tell me", "A complete answer.")
    frames = cycle.frames()  # user message, status, delta, delta, message, cycle_end

    async def first(socket: Socket) -> None:
        await socket.receive()
        await socket.send(cycle.accepted(), *frames[:3])
        socket.ws.transport.abort()  # the network goes away mid-answer

    async def second(socket: Socket) -> None:
        await socket.send(*frames[3:])
        await socket.send({"type": "resumed", "since": socket.query["since"], "replayed": 3,
                           "complete": True})  # fmt: skip

    url, gateway = await gateway_url([first, second])
    run = await run_chat(url, ["tell me"])

    assert run.code == EXIT_OK, run.errors
    assert gateway.queries[1] == {"since": frames[2]["event_id"]}
    assert gateway.protocols[1] == f"memoria.v1, bearer.{TOKEN}"
    assert run.output.count("A complete answer.") == 1
    assert "reconnecting" in run.output
    assert "lost" not in run.output.replace("connection to the gateway lost", "")


async def test_a_message_whose_reply_was_lost_is_sent_again_under_the_same_id(
    gateway_url: StartGateway,
) -> None:
    cycle = Cycle(1, "once", "Only once.")

    async def first(socket: Socket) -> None:
        await socket.receive()
        socket.ws.transport.abort()  # before the gateway could answer

    async def second(socket: Socket) -> None:
        await socket.answer(cycle)

    url, gateway = await gateway_url([first, second])
    run = await run_chat(url, ["once"])

    assert run.code == EXIT_OK, run.errors
    assert len(gateway.received) == 2
    assert gateway.received[0] == gateway.received[1]  # same client id: accepted once
    assert "since" not in gateway.queries[1]  # no event had arrived yet
    assert "Only once." in run.output


async def test_when_frames_could_not_be_replayed_the_wait_ends_with_a_warning(
    gateway_url: StartGateway,
) -> None:
    cycle = Cycle(1, "tell me", "Never finished.")

    async def first(socket: Socket) -> None:
        await socket.receive()
        await socket.send(cycle.accepted(), *cycle.frames()[:3])
        socket.ws.transport.abort()

    async def second(socket: Socket) -> None:
        # The stream was trimmed: nothing to replay, and the cycle's end is gone.
        await socket.send({"type": "resumed", "since": socket.query["since"], "replayed": 0,
                           "complete": False})  # fmt: skip
        await socket.answer(Cycle(2, "still there?", "Yes.", first_event=50))

    url, _ = await gateway_url([first, second])
    run = await run_chat(url, ["tell me", "still there?"])

    assert run.code == EXIT_OK, run.errors
    assert "part of this reply was lost with the connection" in run.output
    assert "Yes." in run.output


async def test_a_gateway_that_stays_away_ends_the_chat_with_an_error(
    gateway_url: StartGateway,
) -> None:
    async def last(socket: Socket) -> None:
        await socket.receive()
        socket.gateway.stop()  # the gateway goes away for good: every reconnection fails

    url, _ = await gateway_url([last])
    run = await run_chat(url, ["anyone?"])
    assert run.code == EXIT_FAILED
    assert "lost the connection to the gateway (3 attempts)" in run.errors


async def test_a_gateway_that_drops_every_new_socket_cannot_keep_the_chat_looping(
    gateway_url: StartGateway,
) -> None:
    async def answer_then_drop(socket: Socket) -> None:
        await socket.receive()
        socket.ws.transport.abort()

    async def drop(socket: Socket) -> None:
        await socket.ws.close(code=1013)

    url, gateway = await gateway_url([answer_then_drop, *[drop] * 10])
    run = await run_chat(url, ["anyone?"])
    assert run.code == EXIT_FAILED
    assert "lost the connection to the gateway" in run.errors
    assert len(gateway.queries) == 1 + len(FAST_RETRIES)


# -- a refused token -------------------------------------------------------------------------


async def test_a_refused_token_ends_the_chat_with_a_clear_error(gateway_url: StartGateway) -> None:
    async def refuse(socket: Socket) -> None:
        await socket.send({"type": "error", "code": "unauthorized", "message": "token expired"})
        await socket.ws.close(code=4401, reason="unauthorized")

    url, _ = await gateway_url([refuse])
    run = await run_chat(url, ["hello", "more"])
    assert run.code == EXIT_FAILED
    assert "the gateway refused the token: token expired" in run.errors


async def test_one_socket_too_many_ends_the_chat_saying_so(gateway_url: StartGateway) -> None:
    """Reconnecting would be refused again until another socket of the user closes."""

    async def refuse(socket: Socket) -> None:
        message = "at most 20 connections per user on one server"
        await socket.send({"type": "error", "code": "too_many_connections", "message": message})
        await socket.ws.close(code=4429, reason="too many connections")

    url, gateway = await gateway_url([refuse, refuse, refuse])
    run = await run_chat(url, ["hello"])
    assert run.code == EXIT_FAILED
    assert "too many open for this user (at most 20 connections per user" in run.errors
    assert len(gateway.queries) == 1  # no reconnection attempts


async def test_an_unreachable_gateway_is_a_clear_error() -> None:
    with net.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    run = await run_chat(f"http://127.0.0.1:{port}", ["hello"])
    assert run.code == EXIT_FAILED
    assert f"cannot open the chat socket at ws://127.0.0.1:{port}/ws" in run.errors
    assert TOKEN not in run.errors


async def test_a_malformed_gateway_address_is_a_clear_error() -> None:
    run = await run_chat("http://127.0.0.1:99999", ["hello"])
    assert run.code == EXIT_FAILED
    assert "not a valid gateway address: http://127.0.0.1:99999" in run.errors


def test_the_socket_address_follows_the_gateway_address() -> None:
    assert ws_url("http://localhost:8000", None) == "ws://localhost:8000/ws"
    assert ws_url("https://chat.example/memoria/", since="5-0") == (
        "wss://chat.example/memoria/ws?since=5-0"
    )


def typed(frame: Frame) -> ServerFrame:
    parsed = parse_frame(json.dumps(frame))
    assert parsed is not None
    return parsed


async def test_a_cycle_end_handled_just_as_the_wait_begins_still_ends_the_wait() -> None:
    """The end of a cycle may be read between the wait's last look and the moment its
    waiting starts (the answer and the end arrive back to back): it must not be missed,
    or the next line waits for the silence timeout."""
    client = AsyncMemoria("http://127.0.0.1:1", "token")
    session = ChatSession(client, lambda frame: None, lambda notice: None, cycle_silence_s=30)
    cycle = Cycle(1, "hi", "Hello.")
    echo, *_, end = cycle.frames()
    session._handle(typed(echo))
    waiting = asyncio.create_task(session.wait_for_cycle(cycle.message_id))
    await asyncio.sleep(0)  # the wait has looked (not ended yet) and is about to wait
    session._handle(typed(end))
    assert await asyncio.wait_for(waiting, 5) is CycleOutcome.ENDED
    await client.aclose()

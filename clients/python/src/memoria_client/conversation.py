"""A long-lived chat connection: every frame of every thread of the user, for as long as it
is open, across dropped sockets.

One socket at a time, read by one task into a queue, so frames are kept in order whether or
not the program is iterating at that moment. The token rides in the handshake's
``bearer.<token>`` subprotocol, never in the URL. When the socket drops, the connection
reconnects with backoff and asks for what it missed with ``?since=<last event_id>``; the
gateway replays it, then sends ``resumed``. A message whose reply (``accepted``/``error``)
was lost with the socket is sent again under the same client id, which the gateway takes
once.

Besides the gateway's frames, the iteration yields three events of the connection itself
(:class:`Disconnected`, :class:`ReconnectFailed`, :class:`Reconnected`), so a program can
say what happens and reload a thread when frames were lost. It ends with
:class:`~memoria_client.errors.ChatClosed` when the gateway refuses the socket (the token:
close code 4401; one socket too many for the user: 4429) or every reconnection failed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Self
from urllib.parse import urlencode

from pydantic import ValidationError
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus, InvalidURI
from websockets.typing import Subprotocol

from memoria_client.errors import (
    AuthenticationError,
    ChatClosed,
    GatewayUnreachable,
    MemoriaError,
)
from memoria_client.models import AcceptedFrame, ErrorFrame, Frame, ResumedFrame, parse_frame

log = logging.getLogger("memoria_client.conversation")

SOCKET_SUBPROTOCOL: Final = "memoria.v1"
BEARER_SUBPROTOCOL_PREFIX: Final = "bearer."
SOCKET_REFUSED: Final = {4401: "unauthorized", 4429: "too_many_connections"}
"""Close codes that refuse the socket itself, and the error code of the frame before them:
reconnecting would only be refused again."""
RECONNECT_DELAYS_S: Final = (0.5, 1.0, 2.0, 4.0, 8.0, 16.0)
"""Waits before each reconnection attempt; after the last one fails the connection ends."""
RESUME_QUIET_S: Final = 5.0
"""After a reconnect with ``since``: no ``resumed`` and no frame for this long means the
gateway does not replay (an older one), so missed frames are gone."""
STABLE_AFTER_S: Final = 30.0
"""A socket that brought a frame or lasted this long worked: a drop after it starts the
reconnection attempts afresh. One that the gateway closes at once counts as a failed
attempt, so a gateway that accepts and drops every socket cannot keep it looping."""
OPEN_TIMEOUT_S: Final = 10.0
CLOSE_TIMEOUT_S: Final = 2.0  # leaving must not hang on a gateway that stopped answering
MAX_FRAME_BYTES: Final = 16 * 1024 * 1024


def ws_url(base_url: str, since: str | None) -> str:
    """The socket's URL. It holds no token: that travels as a subprotocol (URLs get logged
    by proxies and servers)."""
    base = base_url.rstrip("/")
    scheme, _, rest = base.partition("://")
    ws_scheme = {"https": "wss", "http": "ws"}.get(scheme, scheme)
    query = f"?{urlencode({'since': since})}" if since else ""
    return f"{ws_scheme}://{rest}/ws{query}"


def subprotocols(token: str) -> list[Subprotocol]:
    """What the gateway reads the token from: ``memoria.v1`` and ``bearer.<token>``; it
    echoes only the first."""
    return [Subprotocol(SOCKET_SUBPROTOCOL), Subprotocol(BEARER_SUBPROTOCOL_PREFIX + token)]


# -- events of the connection itself ----------------------------------------------------------


@dataclass(frozen=True)
class Disconnected:
    """The socket dropped; reconnection attempts follow."""


@dataclass(frozen=True)
class ReconnectFailed:
    """Reconnection attempt ``attempt`` (from 1) failed; ``reason`` says why."""

    attempt: int
    reason: str


@dataclass(frozen=True)
class Reconnected:
    """A new socket is open. ``complete``: the gateway replayed everything the dropped one
    missed (the frames came before this event); False means frames may be lost: no event id
    to resume from yet, a gateway that does not replay, or a replay it could not finish.
    Reload the threads you show (``AsyncMemoria.messages``) then."""

    since: str | None
    complete: bool


ConnectionEvent = Disconnected | ReconnectFailed | Reconnected
Incoming = Frame | ConnectionEvent
"""What iterating a :class:`Conversation` yields."""


@dataclass(frozen=True)
class _End:
    """The last item of the queue: the error that ended the connection, or None when the
    program closed it."""

    error: ChatClosed | None


class _Socket:
    """One socket and what its reader learned."""

    def __init__(self, ws: ClientConnection, *, since: str | None, reconnection: bool) -> None:
        self.ws = ws
        self.since = since
        self.reconnection = reconnection
        self.opened_at = asyncio.get_running_loop().time()
        self.closed = asyncio.Event()
        self.resumed = asyncio.Event()
        self.reported = False  # whether Reconnected was queued for it
        self.frames = 0

    def age(self) -> float:
        return asyncio.get_running_loop().time() - self.opened_at


class Conversation:
    """A chat connection that stays open: ``send`` messages to any thread, iterate to get
    every frame of every thread of the user (and the connection's own events) in order.

    Open it with ``async with AsyncMemoria.connect() as conversation``. ``since`` (an
    ``event_id`` received earlier) asks the gateway for the frames after it first.
    Iteration ends when the conversation is closed, or raises :class:`ChatClosed`. Frames
    wait in memory until they are read: a program that keeps it open keeps reading.
    """

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        since: str | None = None,
        reconnect_delays: Sequence[float] = RECONNECT_DELAYS_S,
        resume_quiet: float = RESUME_QUIET_S,
        trust_env: bool = True,
    ) -> None:
        self._base_url = base_url
        self._token = token
        self._delays = tuple(reconnect_delays)
        self._resume_quiet = resume_quiet
        self._trust_env = trust_env
        self._last_event_id = since
        self._incoming: asyncio.Queue[Incoming | _End] = asyncio.Queue()
        self._socket: _Socket | None = None
        self._connected = asyncio.Event()  # a socket is open to send on
        self._done = asyncio.Event()
        self._error: ChatClosed | None = None
        self._refusal: tuple[str, str] | None = None  # an error frame refusing the socket
        self._reply: asyncio.Future[AcceptedFrame | ErrorFrame] | None = None
        self._sending = asyncio.Lock()  # replies come in order: one request at a time
        self._tasks: set[asyncio.Task[None]] = set()
        self._closing = False

    @property
    def last_event_id(self) -> str | None:
        """The ``event_id`` of the latest frame received: ``since`` to resume from."""
        return self._last_event_id

    # -- lifetime ---------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    async def open(self) -> None:
        """Open the first socket; its failure is raised (there is nothing to resume yet):
        :class:`GatewayUnreachable`, :class:`AuthenticationError` for a token refused at the
        handshake, or :class:`MemoriaError` for an address that is not one."""
        since = self._last_event_id
        socket = await self._open(since, reconnection=False)
        self._install(socket)
        self._spawn(self._run(socket), "memoria-chat-socket")

    async def close(self) -> None:
        """Close the socket; iteration ends after the frames already received."""
        self._closing = True
        for task in list(self._tasks):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._socket is not None:
            await self._socket.ws.close()
        self._finish(None)

    # -- sending ----------------------------------------------------------------------------

    async def send(
        self, thread_id: str, content: str, *, message_id: str | None = None
    ) -> AcceptedFrame | ErrorFrame:
        """Send a message to ``thread_id``; the gateway's reply: ``accepted`` (its ``id`` is
        the message id the cycle's frames use) or ``error`` (not taken; ``rate_limited``
        carries ``retry_after``). ``message_id`` (8-64 of ``A-Za-z0-9_-``, random by
        default) makes a resend safe: the gateway takes the same id once. A reply lost with
        the socket is asked for again by sending once reconnected. Raises
        :class:`ChatClosed` when the conversation ended."""
        frame = {
            "type": "message",
            "thread_id": thread_id,
            "content": content,
            "id": message_id or uuid.uuid4().hex,
        }
        return await self._request(json.dumps(frame))

    async def _request(self, payload: str) -> AcceptedFrame | ErrorFrame:
        async with self._sending:
            while True:
                self._raise_if_ended()
                socket = self._socket
                if socket is None or socket.closed.is_set():
                    await _first_of(self._connected.wait(), self._done.wait())
                    continue
                reply: asyncio.Future[AcceptedFrame | ErrorFrame]
                reply = asyncio.get_running_loop().create_future()
                self._reply = reply
                try:
                    await socket.ws.send(payload)
                except ConnectionClosed:
                    await _first_of(socket.closed.wait(), self._done.wait())
                    continue
                await _first_of(reply, socket.closed.wait(), self._done.wait())
                if reply.done():
                    return reply.result()
                reply.cancel()  # the socket dropped first: send again on the next one

    # -- receiving --------------------------------------------------------------------------

    async def receive(self) -> Incoming:
        """The next frame or event (safe to cancel, e.g. within ``asyncio.timeout``).
        Raises :class:`ChatClosed` when the conversation ended on an error, and
        ``StopAsyncIteration`` once it was closed."""
        item = await self._incoming.get()
        if isinstance(item, _End):
            self._incoming.put_nowait(item)  # every later call ends the same way
            if item.error is not None:
                raise item.error
            raise StopAsyncIteration
        return item

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Incoming:
        return await self.receive()

    # -- the socket -------------------------------------------------------------------------

    async def _open(self, since: str | None, *, reconnection: bool) -> _Socket:
        where = ws_url(self._base_url, None)
        try:
            ws = await connect(
                ws_url(self._base_url, since),
                subprotocols=subprotocols(self._token),
                proxy=True if self._trust_env else None,
                open_timeout=OPEN_TIMEOUT_S,
                close_timeout=CLOSE_TIMEOUT_S,
                max_size=MAX_FRAME_BYTES,
            )
        except (InvalidURI, ValueError) as exc:  # e.g. a port out of range
            raise MemoriaError(f"not a valid gateway address: {self._base_url}") from exc
        except InvalidStatus as exc:
            status = exc.response.status_code
            message = f"the gateway refused the chat socket at {where}: HTTP {status}"
            if status == 401:
                raise AuthenticationError(status, message) from None
            raise GatewayUnreachable(message) from None
        except OSError as exc:
            # A socket error's text names the address only, never the handshake's headers.
            raise GatewayUnreachable(f"cannot open the chat socket at {where}: {exc}") from None
        except (TimeoutError, InvalidHandshake) as exc:
            # These may quote the handshake, token and all: their type only.
            raise GatewayUnreachable(
                f"cannot open the chat socket at {where}: {type(exc).__name__}"
            ) from None
        return _Socket(ws, since=since, reconnection=reconnection)

    def _install(self, socket: _Socket) -> None:
        self._socket = socket
        self._connected.set()
        if socket.reconnection:
            self._spawn(self._check_resume(socket), "memoria-chat-resume")

    async def _run(self, socket: _Socket) -> None:
        try:
            await self._follow(socket)
        except Exception as exc:  # a bug must end the conversation visibly, not hang it
            log.exception("chat socket reader failed")
            why = f"the chat stopped on an unexpected error: {exc!r}"
            self._finish(ChatClosed("internal", why))

    async def _follow(self, socket: _Socket) -> None:
        failures = 0  # attempts since the last socket that worked
        while True:
            await self._read(socket)
            if self._closing or self._done.is_set():
                return
            refused_by_close = SOCKET_REFUSED.get(socket.ws.close_code or 0)
            if refused_by_close is not None:
                self._finish(ChatClosed(refused_by_close, "the gateway refused the socket"))
                return
            if socket.frames or socket.age() >= STABLE_AFTER_S:
                failures = 0
            self._put(Disconnected())
            reopened: _Socket | None = None
            while reopened is None:
                if failures >= len(self._delays):
                    lost = f"lost the connection to the gateway ({failures} attempts)"
                    self._finish(ChatClosed("connection_lost", lost))
                    return
                await asyncio.sleep(self._delays[failures])
                failures += 1
                try:
                    reopened = await self._open(self._last_event_id, reconnection=True)
                except MemoriaError as exc:
                    self._put(ReconnectFailed(failures, str(exc)))
            socket = reopened
            self._install(socket)

    async def _read(self, socket: _Socket) -> None:
        try:
            async for raw in socket.ws:
                socket.frames += 1
                if not self._handle(socket, raw):
                    await socket.ws.close()
                    break
        except ConnectionClosed:
            pass
        finally:
            socket.closed.set()
            self._connected.clear()

    def _handle(self, socket: _Socket, raw: str | bytes) -> bool:
        """Queue one frame; False when it refused the socket (the conversation is over)."""
        try:
            frame = parse_frame(raw)
        except (ValidationError, ValueError):
            log.warning("skipped a chat frame this client cannot read")
            return True
        if frame is None:
            return True  # a frame type newer than this client
        event_id = getattr(frame, "event_id", None)
        if event_id:
            self._last_event_id = event_id
        if isinstance(frame, ErrorFrame) and frame.code in SOCKET_REFUSED.values():
            self._finish(ChatClosed(frame.code, frame.message))
            return False
        self._put(frame)
        if isinstance(frame, AcceptedFrame | ErrorFrame):
            if self._reply is not None and not self._reply.done():
                self._reply.set_result(frame)
        elif isinstance(frame, ResumedFrame) and socket.reconnection:
            socket.resumed.set()
            self._report(socket, complete=frame.complete)
        return True

    async def _check_resume(self, socket: _Socket) -> None:
        """Did the gateway replay what the dropped socket missed? Without ``since`` it has
        nothing to replay from; an older gateway never says ``resumed``."""
        if socket.since is not None:
            while not socket.resumed.is_set():
                seen = socket.frames
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(socket.resumed.wait(), self._resume_quiet)
                if not socket.resumed.is_set() and socket.frames == seen:
                    break  # quiet, and no "resumed": this gateway does not replay
            if socket.resumed.is_set():
                return  # the reader reported it, in order with the replayed frames
        self._report(socket, complete=False)

    def _report(self, socket: _Socket, *, complete: bool) -> None:
        if not socket.reported:
            socket.reported = True
            self._put(Reconnected(socket.since, complete))

    # -- bookkeeping ------------------------------------------------------------------------

    def _put(self, item: Incoming) -> None:
        if not self._done.is_set():
            self._incoming.put_nowait(item)

    def _finish(self, error: ChatClosed | None) -> None:
        if self._done.is_set():
            return
        self._error = error
        self._incoming.put_nowait(_End(error))
        self._done.set()
        self._connected.clear()

    def _raise_if_ended(self) -> None:
        if self._error is not None:
            raise self._error
        if self._done.is_set():
            raise ChatClosed("closed", "the conversation is closed")

    def _spawn(self, work: Any, name: str) -> None:
        task: asyncio.Task[None] = asyncio.create_task(work, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


async def _first_of(*waits: Any) -> None:
    """Until the first of ``waits`` (coroutines or futures) is done; the others are
    cancelled, except futures the caller owns."""
    futures = [asyncio.ensure_future(wait) for wait in waits]
    try:
        await asyncio.wait(futures, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for future, wait in zip(futures, waits, strict=True):
            if future is not wait:
                future.cancel()

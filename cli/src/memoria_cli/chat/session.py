"""The chat's WebSocket to the gateway: send a message, learn when its cycle ends, and
survive a dropped connection.

One connection at a time, read by one task that hands every frame to ``on_frame`` in
order; the token rides in the handshake's ``bearer.<token>`` subprotocol. When the socket
drops, the task reconnects with backoff, asking for the frames it missed with
``?since=<last event_id>``; the gateway replays them and then sends ``resumed``.
If it cannot (no event id yet, an older gateway, ``complete: false``), a wait for a cycle is
released with a warning instead of hanging on a ``cycle_end`` that went by unseen. A message
whose reply (``accepted``/``error``) was lost with the socket is sent again with the same
client id, which the gateway accepts only once.

The session ends for good (:class:`SessionEnded`) when the gateway refuses the socket (the
token, close code 4401; one socket too many for the user, 4429) or every reconnection attempt
failed; whoever waits on it is then told why.

Why not memoria-client's ``chat()``: that follows one message to its cycle's end, while the
REPL listens to every frame of the user for as long as it runs (other threads, other
devices, replies that outlive a line) and resumes across drops with one reader. The socket's
address and the token's subprotocol are the client's (``ws_url``, ``subprotocols``).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import json
import logging
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any, Final

import websockets
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus, InvalidURI

from memoria_cli.gateway_client import is_loopback
from memoria_client.chat import subprotocols, ws_url
from memoria_contracts.frames import SOCKET_REFUSALS

log = logging.getLogger("memoria.cli.chat")

Frame = dict[str, Any]

_REFUSED_BY_CLOSE: Final = {close: code for code, close in SOCKET_REFUSALS.items()}
RECONNECT_DELAYS_S: Final = (0.5, 1.0, 2.0, 4.0, 8.0, 16.0)
"""Waits before each reconnection attempt; after the last one fails the session ends."""
RESUME_QUIET_S: Final = 5.0
"""After a reconnect with ``since``: no ``resumed`` and no frame for this long means the
gateway does not replay (an older one), so missed frames are gone."""
CYCLE_SILENCE_S: Final = 300.0
"""Longest a wait for a cycle's end goes without any frame: longer than a step may take
(MEMORIA_STEP_TIMEOUT_SECONDS, 120 s by default), so only a lost cycle gets here."""
STABLE_AFTER_S: Final = 30.0
"""A connection that brought a frame or lasted this long worked: a drop after it starts the
reconnection attempts afresh. One that the gateway closes at once counts as a failed
attempt, so a gateway that accepts and drops every socket cannot keep the chat looping."""
OPEN_TIMEOUT_S: Final = 10.0
CLOSE_TIMEOUT_S: Final = 2.0  # leaving must not hang on a gateway that stopped answering
MAX_FRAME_BYTES: Final = 16 * 1024 * 1024


class SessionEnded(Exception):
    """The chat cannot go on; the message says why."""


class Unauthorized(SessionEnded):
    """The gateway refused the token."""


class TooManyConnections(SessionEnded):
    """The user already holds as many sockets on this gateway as it allows."""


class CycleOutcome(enum.Enum):
    ENDED = "ended"
    INTERRUPTED = "interrupted"  # the socket dropped and the missed frames are lost
    SILENT = "silent"  # nothing came for CYCLE_SILENCE_S


class _Link:
    """One connection and what its reader learned."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.opened_at = asyncio.get_running_loop().time()
        self.closed = asyncio.Event()
        self.resumed = asyncio.Event()
        self.resume_complete = True
        self.frames = 0

    def age(self) -> float:
        return asyncio.get_running_loop().time() - self.opened_at


class ChatSession:
    def __init__(
        self,
        base_url: str,
        token: str,
        on_frame: Callable[[Frame], None],
        notify: Callable[[str], None],
        *,
        reconnect_delays: Sequence[float] = RECONNECT_DELAYS_S,
        resume_quiet_s: float = RESUME_QUIET_S,
        cycle_silence_s: float = CYCLE_SILENCE_S,
    ) -> None:
        self._base_url = base_url
        self._token = token
        self._on_frame = on_frame
        self._notify = notify
        self._delays = tuple(reconnect_delays)
        self._resume_quiet_s = resume_quiet_s
        self._cycle_silence_s = cycle_silence_s
        self._link: _Link | None = None
        self._reader: asyncio.Task[None] | None = None
        self._resume_check: asyncio.Task[None] | None = None
        self._closing = False
        self._error: SessionEnded | None = None
        self._dead = asyncio.Event()
        self._changed = asyncio.Event()
        self._reply: asyncio.Future[Frame] | None = None
        self._refusal: tuple[str, str] | None = None  # (error code, message) refusing the socket
        self._last_event_id: str | None = None
        self._cycle_of: dict[str, str] = {}  # user message id -> the cycle it started
        self._ended: set[str] = set()
        self._gaps = 0  # reconnections that lost frames
        self._waiting = 0

    # -- lifetime ---------------------------------------------------------------------------

    async def open(self) -> None:
        """Connect once; a failure here ends the command (nothing to resume yet)."""
        self._link = await self._connect(since=None)
        self._reader = asyncio.create_task(self._run(), name="memoria-chat-socket")

    async def close(self) -> None:
        self._closing = True
        for task in (self._reader, self._resume_check):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if self._link is not None:
            await self._link.ws.close()

    async def ended(self) -> SessionEnded:
        """Wait until the session ends for good; why."""
        await self._dead.wait()
        assert self._error is not None
        return self._error

    # -- requests ---------------------------------------------------------------------------

    async def send(self, frame: Mapping[str, Any]) -> Frame:
        """Send a client frame; its reply, ``accepted`` or ``error``. A reply lost with the
        socket is asked for again by sending the frame again once reconnected."""
        payload = json.dumps(frame)
        while True:
            self._raise_if_ended()
            link = self._link
            if link is None or link.closed.is_set():
                await self._next_change()  # reconnecting
                continue
            reply: asyncio.Future[Frame] = asyncio.get_running_loop().create_future()
            self._reply = reply
            try:
                await link.ws.send(payload)
            except ConnectionClosed:
                await link.closed.wait()
                continue
            await self._first_of(reply, link.closed)
            if not reply.done():
                continue
            answer = reply.result()
            if answer.get("type") == "error" and answer.get("code") in SOCKET_REFUSALS:
                code, message = str(answer["code"]), str(answer.get("message", ""))
                raise self._end(_refusal_of(code, message))
            return answer

    async def wait_for_cycle(self, message_id: str) -> CycleOutcome:
        """Until the cycle that ``message_id`` (an accepted message's id) started is over."""
        gaps = self._gaps
        self._waiting += 1
        try:
            while True:
                self._raise_if_ended()
                cycle_id = self._cycle_of.get(message_id)
                if cycle_id is not None and cycle_id in self._ended:
                    return CycleOutcome.ENDED
                if self._gaps != gaps:
                    return CycleOutcome.INTERRUPTED
                try:
                    await asyncio.wait_for(self._next_change(), self._cycle_silence_s)
                except TimeoutError:
                    return CycleOutcome.SILENT
        finally:
            self._waiting -= 1

    # -- the connection ---------------------------------------------------------------------

    async def _connect(self, since: str | None) -> _Link:
        where = ws_url(self._base_url, None)
        try:
            loopback = is_loopback(self._base_url)
            ws = await websockets.connect(
                ws_url(self._base_url, since),
                subprotocols=subprotocols(self._token),
                # Like the HTTP client: a proxy from the environment must not see localhost.
                proxy=None if loopback else True,
                open_timeout=OPEN_TIMEOUT_S,
                close_timeout=CLOSE_TIMEOUT_S,
                max_size=MAX_FRAME_BYTES,
            )
        except (InvalidURI, ValueError) as exc:  # e.g. a port out of range
            raise SessionEnded(f"not a valid gateway address: {self._base_url}") from exc
        except InvalidStatus as exc:
            status = exc.response.status_code
            message = f"the gateway refused the chat socket at {where}: HTTP {status}"
            raise SessionEnded(message) from exc
        except (OSError, TimeoutError, InvalidHandshake) as exc:
            raise SessionEnded(f"cannot open the chat socket at {where}: {exc}") from exc
        return _Link(ws)

    async def _run(self) -> None:
        try:
            await self._follow()
        except Exception as exc:  # a bug must end the chat visibly, not leave it hanging
            log.exception("chat socket reader failed")
            self._end(SessionEnded(f"the chat stopped on an unexpected error: {exc!r}"))

    async def _follow(self) -> None:
        link = self._link
        failures = 0  # attempts since the last connection that worked
        while link is not None:
            await self._read(link)
            if self._closing:
                return
            refused_by_close = _REFUSED_BY_CLOSE.get(link.ws.close_code or 0)
            if self._refusal is not None or refused_by_close is not None:
                code, message = self._refusal or (str(refused_by_close), "")
                self._end(_refusal_of(code, message))
                return
            if link.frames or link.age() >= STABLE_AFTER_S:
                failures = 0
            self._notify("connection to the gateway lost; reconnecting...")
            link = None
            while link is None:
                if failures >= len(self._delays):
                    self._end(
                        SessionEnded(f"lost the connection to the gateway ({failures} attempts)")
                    )
                    return
                await asyncio.sleep(self._delays[failures])
                failures += 1
                since = self._last_event_id
                try:
                    link = await self._connect(since)
                except SessionEnded as exc:
                    self._notify(f"reconnection attempt {failures} failed: {exc}")
            self._link = link
            self._pulse()
            self._resume_check = asyncio.create_task(self._check_resume(link, since))

    async def _read(self, link: _Link) -> None:
        try:
            async for raw in link.ws:
                link.frames += 1
                self._handle(link, raw)
        except ConnectionClosed:
            pass
        finally:
            link.closed.set()
            self._pulse()

    async def _check_resume(self, link: _Link, since: str | None) -> None:
        """Did the gateway replay what the dropped socket missed? If not, say so, and release
        a wait for a cycle whose end may have gone by."""
        if since is not None:
            while not link.resumed.is_set():
                seen = link.frames
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(link.resumed.wait(), self._resume_quiet_s)
                if not link.resumed.is_set() and link.frames == seen:
                    break  # quiet, and no "resumed": this gateway does not replay
            if link.resumed.is_set() and link.resume_complete:
                self._notify("reconnected; nothing was missed")
                return
        self._gaps += 1
        self._pulse()
        if self._waiting:
            self._notify("reconnected, but part of the reply was lost with the connection")
        else:
            self._notify("reconnected")

    # -- frames -----------------------------------------------------------------------------

    def _handle(self, link: _Link, raw: str | bytes) -> None:
        try:
            frame = json.loads(raw)
        except ValueError:
            return  # not ours to judge: a client ignores what it cannot read
        if not isinstance(frame, dict):
            return
        event_id = frame.get("event_id")
        if isinstance(event_id, str) and event_id:
            self._last_event_id = event_id
        kind = frame.get("type")
        if kind == "resumed":
            link.resume_complete = frame.get("complete") is not False
            link.resumed.set()
            return
        if kind == "error" and frame.get("code") in SOCKET_REFUSALS:
            self._refusal = (str(frame["code"]), str(frame.get("message", "")))
        elif kind == "message" and frame.get("role") == "user":
            if isinstance(frame.get("id"), str) and isinstance(frame.get("cycle_id"), str):
                self._cycle_of[frame["id"]] = frame["cycle_id"]
        elif kind == "cycle_end" and isinstance(frame.get("cycle_id"), str):
            self._ended.add(frame["cycle_id"])
        if kind in {"accepted", "error"} and self._reply is not None and not self._reply.done():
            self._reply.set_result(frame)
        if self._refusal is None:  # the refusal is reported once, as the session's end
            self._on_frame(frame)
        self._pulse()

    # -- waiting ----------------------------------------------------------------------------

    def _pulse(self) -> None:
        """Wake everyone waiting for something to change."""
        self._changed.set()
        self._changed = asyncio.Event()

    def _next_change(self) -> Coroutine[Any, Any, bool]:
        """What to await for the next change. The event is taken *now*: ``asyncio.wait_for``
        starts the wait in a task a loop turn later, and a frame handled in between (a
        ``cycle_end`` right behind the answer) would otherwise replace the event before the
        wait began and be missed until the next frame — or the silence timeout."""
        return self._changed.wait()

    async def _first_of(self, reply: asyncio.Future[Frame], closed: asyncio.Event) -> None:
        watchers: list[asyncio.Future[Any]] = [
            asyncio.ensure_future(closed.wait()),
            asyncio.ensure_future(self._dead.wait()),
        ]
        try:
            await asyncio.wait([reply, *watchers], return_when=asyncio.FIRST_COMPLETED)
        finally:
            for watcher in watchers:
                watcher.cancel()
        if not reply.done():
            self._raise_if_ended()

    def _end(self, error: SessionEnded) -> SessionEnded:
        if self._error is None:
            self._error = error
            self._dead.set()
            self._pulse()
        return self._error

    def _raise_if_ended(self) -> None:
        if self._error is not None:
            raise self._error


def _refusal_of(code: str, detail: str) -> SessionEnded:
    if code == "too_many_connections":
        text = "the gateway refused the chat socket: too many open for this user"
        return TooManyConnections(text + (f" ({detail})" if detail else ""))
    return Unauthorized("the gateway refused the token" + (f": {detail}" if detail else ""))

"""The sockets connected to this gateway replica, and other readers of a user's frames.

Each socket has its own outbound queue and writer task: fan-out only enqueues, so one slow
client never delays frames for anyone else. A client that falls too far behind is
disconnected (it can reconnect with ``?since=`` and get what it missed) rather than buffered
without bound. A resuming socket orders its live frames around the replay (``resume.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict
from collections.abc import Callable, Iterator

from starlette.websockets import WebSocket

from memoria_gateway.frames import OutboundFrame
from memoria_gateway.resume import LiveGate
from memoria_runtime.bus.entry_id import EntryId
from memoria_runtime.health import stop_task

log = logging.getLogger("memoria.gateway.hub")

OUTBOX_FRAMES = 2000  # frames a socket may lag behind (a long streamed answer is ~500)
SLOW_CLIENT_CLOSE_CODE = 1013  # "try again later"
_SEND_TIMEOUT_S = 10.0


class SocketGone(Exception):
    """The socket was closed (by the client, or for falling behind) while frames waited."""


class Connection:
    def __init__(self, websocket: WebSocket, user_id: str) -> None:
        self.websocket = websocket
        self.user_id = user_id
        self._outbox: asyncio.Queue[str] = asyncio.Queue(maxsize=OUTBOX_FRAMES)
        self._writer: asyncio.Task[None] | None = None
        self._live = LiveGate()
        self.closed = False

    def start(self) -> None:
        self._writer = asyncio.create_task(self._write())

    def send(self, text: str) -> bool:
        """Queue a frame; False when the client is too far behind (it is then closed)."""
        if self.closed:
            return False
        try:
            self._outbox.put_nowait(text)
        except asyncio.QueueFull:
            self._give_up(f"{OUTBOX_FRAMES} frames behind")
            return False
        return True

    def deliver(self, entry_id: EntryId, text: str) -> None:
        """A frame from chat.out: sent now, or held or dropped around a replay."""
        if self.closed:
            return
        if self._live.offer(entry_id, text):
            self.send(text)
        elif self._live.held > OUTBOX_FRAMES:
            self._give_up(f"{OUTBOX_FRAMES} live frames waiting for a replay")

    def hold_live(self) -> None:
        """Hold live frames back: a replay is about to be read. Call before the hub adds
        the socket, so that no live frame goes out ahead of the replay."""
        self._live.hold()

    async def send_in_turn(self, text: str) -> None:
        """Queue a frame, waiting while the outbox is full (a replay can be longer than the
        outbox); raise :class:`SocketGone` when the socket is closed or stops reading."""
        if self.closed:
            raise SocketGone
        try:
            await asyncio.wait_for(self._outbox.put(text), _SEND_TIMEOUT_S)
        except TimeoutError as exc:
            self._give_up("not reading its replay")
            raise SocketGone from exc

    async def release_live(self, after: EntryId | None) -> None:
        """The replay went out up to ``after``: send the live frames held meanwhile that
        come later, then send live frames as they arrive."""
        while held := self._live.release(after):
            for text in held:
                await self.send_in_turn(text)
        self._live.open()  # no await since the last release: no frame can be left behind

    def give_up(self, why: str) -> None:
        """Close the socket with "try again later": the client resumes where it left off."""
        self._give_up(why)

    def _give_up(self, why: str) -> None:
        log.warning("closing a socket of %s: %s", self.user_id, why)
        self.closed = True
        asyncio.get_running_loop().create_task(self._close(SLOW_CLIENT_CLOSE_CODE))

    async def _write(self) -> None:
        try:
            while True:
                text = await self._outbox.get()
                # Not asyncio.wait_for: on Python 3.11 it can swallow the cancel of stop()
                # when the send finishes at that moment, and this task then waits forever on
                # an outbox nobody fills (the socket's handler never ends: a leak per socket,
                # and uvicorn's shutdown waits for it until the process is killed).
                async with asyncio.timeout(_SEND_TIMEOUT_S):
                    await self.websocket.send_text(text)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a dead socket: the receive loop will notice and clean up
            log.info("stopped writing to a socket of %s: %r", self.user_id, exc)
            self.closed = True

    async def _close(self, code: int) -> None:
        with contextlib.suppress(Exception):
            await self.websocket.close(code=code, reason="too far behind")

    async def stop(self) -> None:
        self.closed = True
        if self._writer is not None:
            await stop_task(self._writer)


class FrameListener:
    """A reader of one user's frames that is not a socket (an HTTP request waiting for its
    cycle's answer). It keeps at most ``OUTBOX_FRAMES``; past that it is marked overflowed
    and gets nothing more, like a socket that falls behind. Once told its cycle
    (:meth:`only`), it keeps that cycle's frames alone: the user's other cycles, however
    many run at once, cannot crowd it out."""

    def __init__(self, user_id: str) -> None:
        self.user_id = user_id
        self.frames: asyncio.Queue[OutboundFrame] = asyncio.Queue(maxsize=OUTBOX_FRAMES)
        self.overflowed = False
        self.cycle_id: str | None = None

    def only(self, cycle_id: str) -> None:
        """From now on keep the frames of ``cycle_id`` only, and drop those of other cycles
        already queued (the listener listened before its cycle was known)."""
        self.cycle_id = cycle_id
        kept = [frame for frame in _drain(self.frames) if frame.cycle_id == cycle_id]
        for frame in kept:
            self.frames.put_nowait(frame)

    def deliver(self, frame: OutboundFrame) -> None:
        if self.overflowed or (self.cycle_id is not None and frame.cycle_id != self.cycle_id):
            return
        try:
            self.frames.put_nowait(frame)
        except asyncio.QueueFull:
            self.overflowed = True


def _drain(queue: asyncio.Queue[OutboundFrame]) -> list[OutboundFrame]:
    taken = []
    while not queue.empty():
        taken.append(queue.get_nowait())
    return taken


FrameObserver = Callable[[str, OutboundFrame], None]
"""Told of every chat.out frame a user's sockets are sent (user id, frame)."""


class ConnectionHub:
    def __init__(self) -> None:
        self._by_user: defaultdict[str, set[Connection]] = defaultdict(set)
        self._listeners: defaultdict[str, set[FrameListener]] = defaultdict(set)
        self._observers: list[FrameObserver] = []

    def observe(self, observer: FrameObserver) -> None:
        self._observers.append(observer)

    def send_to(self, user_id: str, text: str) -> None:
        """A frame of this gateway's own (not from chat.out) to every socket of the user."""
        for connection in list(self._by_user.get(user_id, ())):
            connection.send(text)

    def add(self, connection: Connection) -> None:
        connection.start()
        self._by_user[connection.user_id].add(connection)

    async def remove(self, connection: Connection) -> None:
        connections = self._by_user.get(connection.user_id)
        if connections is not None:
            connections.discard(connection)
            if not connections:
                del self._by_user[connection.user_id]
        await connection.stop()

    @property
    def count(self) -> int:
        return sum(len(c) for c in self._by_user.values())

    def sockets_of(self, user_id: str) -> int:
        return len(self._by_user.get(user_id, ()))

    def drop(self, user_id: str, why: str) -> None:
        """Close the user's sockets here (they reconnect and resume with ``?since=``)."""
        for connection in list(self._by_user.get(user_id, ())):
            connection.give_up(why)

    @contextlib.contextmanager
    def listen(self, user_id: str) -> Iterator[FrameListener]:
        """Every frame of ``user_id`` this replica delivers while the block runs."""
        listener = FrameListener(user_id)
        self._listeners[user_id].add(listener)
        try:
            yield listener
        finally:
            listeners = self._listeners.get(user_id)
            if listeners is not None:
                listeners.discard(listener)
                if not listeners:
                    del self._listeners[user_id]

    def deliver(self, user_id: str, entry_id: EntryId, frame: OutboundFrame) -> None:
        """Queue a chat.out frame for every socket and listener of the user on this replica
        (serialised once, and only when a socket is there to take it)."""
        connections = self._by_user.get(user_id)
        if connections:
            text = frame.model_dump_json()
            for connection in list(connections):
                connection.deliver(entry_id, text)
            for observer in self._observers:
                observer(user_id, frame)
        for listener in list(self._listeners.get(user_id, ())):
            listener.deliver(frame)

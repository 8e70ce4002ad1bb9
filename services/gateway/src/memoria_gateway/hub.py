"""The sockets connected to this gateway replica, by user.

Each socket has its own outbound queue and writer task: fan-out only enqueues, so one slow
client never delays frames for anyone else. A client that falls too far behind is
disconnected (it can reconnect and reload the thread) rather than buffered without bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict

from starlette.websockets import WebSocket

log = logging.getLogger("memoria.gateway.hub")

OUTBOX_FRAMES = 2000  # frames a socket may lag behind (a long streamed answer is ~500)
SLOW_CLIENT_CLOSE_CODE = 1013  # "try again later"
_SEND_TIMEOUT_S = 10.0


class Connection:
    def __init__(self, websocket: WebSocket, user_id: str) -> None:
        self.websocket = websocket
        self.user_id = user_id
        self._outbox: asyncio.Queue[str] = asyncio.Queue(maxsize=OUTBOX_FRAMES)
        self._writer: asyncio.Task[None] | None = None
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
            log.warning("closing a socket of %s: %d frames behind", self.user_id, OUTBOX_FRAMES)
            self.closed = True
            asyncio.get_running_loop().create_task(self._close(SLOW_CLIENT_CLOSE_CODE))
            return False
        return True

    async def _write(self) -> None:
        try:
            while True:
                text = await self._outbox.get()
                await asyncio.wait_for(self.websocket.send_text(text), _SEND_TIMEOUT_S)
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
            self._writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._writer


class ConnectionHub:
    def __init__(self) -> None:
        self._by_user: defaultdict[str, set[Connection]] = defaultdict(set)

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

    def deliver(self, user_id: str, text: str) -> None:
        """Queue a frame for every socket of the user on this replica."""
        for connection in list(self._by_user.get(user_id, ())):
            connection.send(text)

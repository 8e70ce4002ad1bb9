"""A test client for the WebSocket protocol: send messages, collect frames per cycle."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import websockets
from websockets.asyncio.client import ClientConnection

Frame = dict[str, Any]
DEFAULT_TIMEOUT_S = 30.0
REPLY_TYPES = {"accepted", "error"}


class ChatClient:
    def __init__(self, connection: ClientConnection) -> None:
        self.connection = connection
        self.frames: list[Frame] = []  # every frame received, in order
        self._replies: asyncio.Queue[Frame] = asyncio.Queue()
        self._arrived = asyncio.Condition()
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for raw in self.connection:
            frame: Frame = json.loads(raw)
            if frame["type"] in REPLY_TYPES:
                await self._replies.put(frame)
            async with self._arrived:
                self.frames.append(frame)
                self._arrived.notify_all()

    async def send_raw(self, data: str | bytes, timeout: float = DEFAULT_TIMEOUT_S) -> Frame:
        await self.connection.send(data)
        return await asyncio.wait_for(self._replies.get(), timeout)

    async def send(self, thread_id: str, content: str, client_id: str | None = None) -> Frame:
        frame: Frame = {"type": "message", "thread_id": thread_id, "content": content}
        if client_id:
            frame["id"] = client_id
        return await self.send_raw(json.dumps(frame))

    async def wait_for(self, predicate: Any, timeout: float = DEFAULT_TIMEOUT_S) -> Frame:
        """The first frame (already received or coming) that satisfies ``predicate``."""
        async with asyncio.timeout(timeout), self._arrived:
            while True:
                for frame in self.frames:
                    if predicate(frame):
                        return frame
                await self._arrived.wait()

    async def cycle(self, message_id: str, timeout: float = DEFAULT_TIMEOUT_S) -> list[Frame]:
        """All frames of the cycle started by ``message_id``, through its cycle_end."""
        cycle_id = f"cyc_{message_id.removeprefix('msg_')}"
        await self.wait_for(
            lambda f: f["type"] == "cycle_end" and f.get("cycle_id") == cycle_id, timeout
        )
        return [f for f in self.frames if f.get("cycle_id") == cycle_id]

    async def close(self) -> None:
        self._reader.cancel()
        await self.connection.close()


@asynccontextmanager
async def chat(url: str) -> AsyncIterator[ChatClient]:
    async with websockets.connect(url, max_size=None) as connection:
        client = ChatClient(connection)
        try:
            yield client
        finally:
            client._reader.cancel()


async def one_cycle(url: str, thread_id: str, content: str, timeout: float = 60.0) -> list[Frame]:
    """On a socket of its own: send one message and return its cycle's frames."""
    async with chat(url) as client:
        accepted = await client.send(thread_id, content)
        return await client.cycle(accepted["id"], timeout=timeout)

"""A stand-in for a client's WebSocket, for tests that drive the gateway's hub directly: it
keeps every frame the gateway sends it, parsed."""

from __future__ import annotations

import asyncio
import json
from typing import Any


class RecordingSocket:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    async def send_text(self, text: str) -> None:
        self.sent.append(json.loads(text))

    async def close(self, code: int = 1000, reason: str = "") -> None:
        return None

    async def sent_at_least(self, count: int, timeout_s: float = 10.0) -> list[dict[str, Any]]:
        """The frames sent, once there are ``count`` of them (the hub sends from its tasks)."""
        async with asyncio.timeout(timeout_s):
            while len(self.sent) < count:
                await asyncio.sleep(0.01)
        return self.sent

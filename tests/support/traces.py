"""Read a cycle's trace once it is whole.

The memory service records a cycle's events by reading the streams on its own, so right
after a client sees ``cycle_end`` the trace may still lack its last events (or not exist
yet). Tests that compare or inspect a trace wait for its end to be recorded first.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

import httpx

TRACE_WAIT_S = 10.0


async def ended_trace(
    http: httpx.AsyncClient, cycle_id: str, timeout_s: float = TRACE_WAIT_S
) -> dict[str, Any]:
    """``GET /api/cycles/{cycle_id}`` with ``http``'s credentials, polled until the trace has
    its ``ended_at``; raises ``TimeoutError`` if it does not within ``timeout_s``."""
    async with asyncio.timeout(timeout_s):
        while True:
            response = await http.get(f"/api/cycles/{cycle_id}")
            if response.status_code == 200 and response.json()["ended_at"] is not None:
                return cast(dict[str, Any], response.json())
            await asyncio.sleep(0.1)

"""Services start in any order: docker-compose starts the gateway once Redis and the memory
service are healthy, Kubernetes keeps no order at all. On a first deployment a user can
send a message before decision and the workers have ever run; it must be answered when they
come: not skipped by consumer groups created after it (ADR 0018), nor refused with
`no_workers` by a decision that came up a moment before the workers."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis
from stack import START_TIMEOUT_S, Stack, free_port, stack_env
from ws_client import chat

from memoria_contracts.streams import Stream

pytestmark = pytest.mark.integration

ANSWER = "Answered once decision came."
SCRIPT: dict[str, Any] = {
    "rules": [{"match": ".*", "decide": ["Finalize"], "chat": {"Finalize": ANSWER}}]
}


def wait_serving(stack: Stack) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{stack.base_url}/readyz").status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"the gateway did not get ready:\n{stack.all_logs()}")


async def test_a_message_sent_before_decision_ever_started_is_answered(
    redis: Redis, redis_url: str, milvus_server: Any, tmp_path: Path
) -> None:
    # `redis` starts from an empty broker, as a first deployment does.
    port = free_port()
    stack = Stack(
        redis_url, tmp_path, port, stack_env(redis_url, milvus_server.uri, tmp_path, port, SCRIPT)
    )
    try:
        stack.start("memory")
        stack.start("gateway")
        wait_serving(stack)
        async with chat(stack.ws_url("ana")) as client:
            accepted = await client.send("t-first", "hello, is anyone there?")
            assert accepted["type"] == "accepted"
            assert await redis.xlen(Stream.CHAT_IN.value) == 1  # taken, and nobody to read it

            # Decision first: the cycle waits for the worker's actions (no_workers_wait_seconds).
            stack.start("decision")
            stack.start("action-worker")
            frames = await client.cycle(accepted["id"], timeout=START_TIMEOUT_S)
    finally:
        stack.shutdown()

    answers = [f for f in frames if f["type"] == "message" and f["role"] == "assistant"]
    assert answers and answers[-1]["content"] == ANSWER
    assert frames[-1]["type"] == "cycle_end" and frames[-1]["reason"] == "done"

"""Many users at once while the LLM is slow: decision keeps every one of their decisions in
flight instead of queueing them behind a few slots (a decision handler mostly waits on the
LLM, so the bus' default of 16 at once made users wait on each other, not on the machine).

The four services run as processes with the scripted LLM taking DECISION_DELAY_S per
decision. USERS users, each on their own socket, send one message at once; decision's
``memoria_bus_handlers_running`` gauge is read while they wait. No timing is asserted: the
delay only keeps the decisions in flight long enough to be counted."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest
from scraped_metrics import metrics_url, scrape, total
from stack import Stack, free_port, running_stack
from ws_client import chat

from memoria_decision.app import DECISION_SLOTS
from memoria_runtime.bus.consumer import DEFAULT_SLOTS

pytestmark = pytest.mark.integration

USERS = 40  # more than the bus' default slots, fewer than decision's
DECISION_DELAY_S = 3.0
POLL_S = 0.1
CYCLE_TIMEOUT_S = 60.0
SCRIPT: dict[str, Any] = {
    "rules": [{"match": "", "decide": ["Finalize"], "chat": {"Finalize": "Done."}}],
    "delay_seconds": {"reasoningHeavy": DECISION_DELAY_S},
}
RUNNING = "memoria_bus_handlers_running"
SLOTS = "memoria_bus_handler_slots"
CHAT_IN = {"service": "decision", "stream": "memoria:chat.in", "group": "decision"}


@pytest.fixture(scope="module")
def stack(
    valkey_server: Any, milvus_server: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    data_dir: Path = tmp_path_factory.mktemp("concurrency-stack")
    with running_stack(
        f"redis://127.0.0.1:{valkey_server.port}/13",
        milvus_server.uri,
        data_dir,
        SCRIPT,
        service_settings={"decision": {"metrics_port": str(free_port())}},
        log_level="WARNING",
    ) as running:
        yield running


@pytest.mark.timeout(180)
async def test_decision_runs_every_waiting_users_decision_at_once(stack: Stack) -> None:
    assert DEFAULT_SLOTS < USERS <= DECISION_SLOTS  # the bus' default would hold some back
    url = metrics_url(stack, "decision")
    before = await scrape(url)
    assert total(before, SLOTS, **CHAT_IN) == DECISION_SLOTS
    assert total(before, RUNNING, **CHAT_IN) == 0

    async with AsyncExitStack() as sockets:
        clients = [
            await sockets.enter_async_context(chat(stack.ws_url(f"crowd-{n}")))
            for n in range(USERS)
        ]
        accepted = await asyncio.gather(*(c.send("t-crowd", "hello") for c in clients))
        ends = asyncio.gather(
            *(
                c.cycle(a["id"], timeout=CYCLE_TIMEOUT_S)
                for c, a in zip(clients, accepted, strict=True)
            )
        )
        most = 0
        while not ends.done():
            most = max(most, int(total(await scrape(url), RUNNING, **CHAT_IN)))
            await asyncio.sleep(POLL_S)
        cycles = await ends

    # Every user's decision was waiting on the LLM at the same moment: none queued behind
    # another user's.
    assert most == USERS
    assert [frames[-1]["type"] for frames in cycles] == ["cycle_end"] * USERS
    assert {frames[-1]["reason"] for frames in cycles} == {"done"}
    after = await scrape(url)
    assert total(after, RUNNING, **CHAT_IN) == 0

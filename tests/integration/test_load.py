"""200 users chatting at once: the load of bench/load.py at a smaller message count, against
the four services as processes with the zero-latency scripted LLM. No timing is asserted
(CI machines vary); what must hold is that nobody gets an error, a dropped socket or a
missing cycle_end, and that every client got every one of its cycles and nobody else's.
The gateway's own limits must not refuse this legitimate load (each client sends fewer
messages than MEMORIA_WS_BURST, and the settings are the defaults)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from stack import Stack, running_stack

from bench.load import LOAD_SCRIPT, raise_open_files_limit, report, run_load

pytestmark = pytest.mark.integration

CLIENTS = 200
MESSAGES = 1
CYCLE_TIMEOUT_S = 90.0


@pytest.fixture(scope="module")
def stack(
    valkey_server: Any, milvus_server: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    redis_url = f"redis://127.0.0.1:{valkey_server.port}/12"
    data_dir: Path = tmp_path_factory.mktemp("load-stack")
    with running_stack(
        redis_url,
        milvus_server.uri,
        data_dir,
        LOAD_SCRIPT,
        log_level="WARNING",  # a line per cycle and per socket is noise here
        shutdown_grace_seconds="2",
    ) as running:
        yield running


@pytest.mark.timeout(240)  # the stack's start on a busy 2-core machine, then ~20-40 s of load
async def test_200_clients_each_get_every_cycle_without_an_error(stack: Stack) -> None:
    raise_open_files_limit(CLIENTS)
    result = await run_load(
        stack.base_url,
        clients=CLIENTS,
        messages=MESSAGES,
        scenario="finalize",
        timeout_s=CYCLE_TIMEOUT_S,
        user_prefix="load-test",
    )
    print(report(result))
    assert result.errors == []
    assert len(result.cycles) == CLIENTS
    assert set(result.cycles.values()) == {MESSAGES}
    assert len(result.latencies_s) == CLIENTS * MESSAGES
    for process in stack.processes.values():
        assert process.poll() is None

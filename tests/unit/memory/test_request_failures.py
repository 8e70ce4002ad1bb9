"""A request to the memory service that can never succeed (its data cannot be stored or
read, whatever the number of tries) is answered at once with a failure of its own kind,
not raised: raising would redeliver it five times and dead-letter it while its caller waits
for an answer that never comes."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest

from memoria_contracts.cycles import CycleGet
from memoria_contracts.events import Envelope, RpcFailure
from memoria_contracts.memory import MemoryFailure, MemorySave
from memoria_contracts.threads import ThreadFailure, ThreadRename
from memoria_memory.handlers import CANNOT_BE_DONE, MemoryHandlers, cannot_be_done
from memoria_memory.storage import MemoryStorage
from memoria_memory.threads import ThreadRepository
from memoria_runtime.bus import Delivery
from memoria_runtime.settings import Settings

DELIVERY = Delivery(
    stream="memoria:memory.rpc", group="memory", entry_id="1-0", data=b"", redelivered=False
)


def failing(error: BaseException) -> Any:
    async def fail(*args: Any, **kwargs: Any) -> Any:
        raise error

    return fail


def handlers_failing_with(error: BaseException) -> MemoryHandlers:
    handlers = MemoryHandlers(Settings.load(_env_file=None))
    storage = SimpleNamespace(writer=SimpleNamespace(save=failing(error)))
    threads = SimpleNamespace(rename=failing(error))
    handlers.attach(cast(MemoryStorage, storage), cast(ThreadRepository, threads))
    return handlers


def request(payload: Any) -> Envelope:
    return Envelope(user_id="ana", thread_id="t1", payload=payload)


SAVE = MemorySave(idempotency_key="k", content="x", bindings=["x"])


@pytest.mark.parametrize(
    "error", [ValueError("Invalid isoformat string"), OverflowError("date out of range")]
)
async def test_a_save_that_cannot_be_stored_is_answered_as_invalid(error: Exception) -> None:
    reply = await handlers_failing_with(error).on_request(request(SAVE), DELIVERY)
    assert reply.payload == MemoryFailure(code="invalid", error_message=CANNOT_BE_DONE)
    assert "isoformat" not in CANNOT_BE_DONE  # internals stay in the log


async def test_a_thread_request_fails_as_a_thread_failure() -> None:
    handlers = handlers_failing_with(TypeError("unexpected"))
    reply = await handlers.on_request(request(ThreadRename(thread_id="t1", title="x")), DELIVERY)
    assert isinstance(reply.payload, ThreadFailure) and reply.payload.code == "invalid"


async def test_a_failure_that_may_pass_is_still_raised_to_be_tried_again() -> None:
    handlers = handlers_failing_with(ConnectionError("the store is away"))
    with pytest.raises(ConnectionError):
        await handlers.on_request(request(SAVE), DELIVERY)


def test_any_other_request_fails_in_the_bus_shape() -> None:
    assert isinstance(cannot_be_done(CycleGet(cycle_id="cyc_1")), RpcFailure)

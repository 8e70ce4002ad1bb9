"""The stream entry behind an event, as a handler argument, without a thread hop.

FastStream's ``faststream.redis.annotations.RedisStreamMessage`` is ``Context("message")``, a
FastDepends custom field whose ``use`` is a plain function. FastDepends runs every plain
function of an async handler's signature in a worker thread (``anyio.to_thread``), so each
entry handled that way first waits for a thread to look the message up in the context and
for the event loop to be woken with the answer. On a loaded machine that hand-over costs
about as much as the rest of the hop (measured in bench/cycle_overhead.py's notes). The
same lookup written as a coroutine runs on the event loop.
"""

from __future__ import annotations

from typing import Annotated, Any

from faststream._internal.context.context_type import Context
from faststream.redis.message import RedisStreamMessage as _RedisStreamMessage


class _OnTheLoop(Context):
    """``Context`` whose lookup FastDepends awaits instead of sending to a thread."""

    async def use(self, /, **kwargs: Any) -> dict[str, Any]:  # type: ignore[override]
        return super().use(**kwargs)


StreamMessage = Annotated[_RedisStreamMessage, _OnTheLoop("message")]
"""Use instead of ``faststream.redis.annotations.RedisStreamMessage`` in a handler."""

"""A consumer of ``memoria:chat.in`` (group ``decision``) in a process of its own, for
test_bus_on_redis.py to kill with SIGKILL while it handles an event, as a crashed service
would be.

``python bus_consumer_process.py REDIS_URL CONSUMER RECLAIM_IDLE_MS`` prints ``ready`` once
it reads the stream, then ``handling <event id>`` for each event, and never finishes one.
"""

from __future__ import annotations

import asyncio
import sys

from memoria_contracts.events import Envelope
from memoria_contracts.streams import Group, Stream
from memoria_runtime.bus import Delivery, create_bus, subscribe_group
from memoria_runtime.settings import Settings

READY = "ready"  # test_bus_on_redis.py waits for these two
HANDLING = "handling"


async def consume_forever(redis_url: str, consumer: str, reclaim_idle_ms: int) -> None:
    settings = Settings.load(
        redis_url=redis_url, consumer_name=consumer, reclaim_idle_ms=reclaim_idle_ms
    )
    broker = create_bus(settings.bus)
    never = asyncio.Event()

    async def handler(event: Envelope, delivery: Delivery) -> None:
        print(f"{HANDLING} {event.event_id}", flush=True)
        await never.wait()

    subscribe_group(
        broker,
        settings.bus,
        stream=Stream.CHAT_IN,
        group=Group.DECISION,
        handler=handler,
        description="a consumer that is killed mid-handler",
    )
    await broker.start()  # the group exists once this returns
    print(READY, flush=True)
    await never.wait()


if __name__ == "__main__":
    url, name, idle_ms = sys.argv[1:4]
    asyncio.run(consume_forever(url, name, int(idle_ms)))

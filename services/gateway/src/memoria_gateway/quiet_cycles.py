"""A running cycle that has gone quiet gets a status line, so its user is told rather than
left in silence: the gateway cannot reach the broker, a service has stopped announcing
itself (cut off from the broker, or down), or the cycle is only slow.

Decision, the workers and the memory service tell the user what a cycle does; when one of
them is cut off, nobody else would. The gateway knows which of its users wait for a cycle
(it accepted their message and has not yet delivered the cycle's end), so it watches how
long each has heard nothing and, after ``MEMORIA_CYCLE_QUIET_STATUS_SECONDS``, sends a
``textForReplace`` message of its own (id ``wait:<cycle_id>``, no ``event_id``: it is not
on chat.out, so it is never replayed), again every as many seconds while the quiet lasts.
The next frame of the cycle replaces it, as any status line.

:class:`QuietCycles` is the bookkeeping, without I/O; :class:`QuietCycleNotices` runs it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, Literal

from redis.exceptions import RedisError

from memoria_contracts.events import Language
from memoria_contracts.frames import MessageFrame
from memoria_gateway.frames import OutboundFrame
from memoria_gateway.hub import ConnectionHub
from memoria_runtime import presence
from memoria_runtime.health import stop_task
from memoria_text import i18n

log = logging.getLogger("memoria.gateway.quiet")

STATUS_ID_PREFIX: Final = "wait:"
WATCHED_SERVICES: Final = ("decision", "action-worker", "memory")
"""The services a cycle needs besides the gateway, named to the user when one is missing."""
CHECK_TIMEOUT_S: Final = 2.0
"""How long the gateway waits for the broker when it looks for the cause."""
CHECKS_PER_QUIET: Final = 4

Cause = Literal["broker", "service", "slow"]


@dataclass
class Watch:
    """A thread of a user with cycles accepted on this gateway and not yet ended; only the
    oldest runs (the others wait in the thread's queue), so the thread is what is quiet."""

    user_id: str
    thread_id: str
    language: Language
    last_news: float
    cycles: list[str] = field(default_factory=list)

    @property
    def cycle_id(self) -> str:
        return self.cycles[0]


class QuietCycles:
    """Which threads wait for a cycle, and since when their user heard nothing of them."""

    def __init__(self, quiet_s: float) -> None:
        self.quiet_s = quiet_s
        self._watches: dict[tuple[str, str], Watch] = {}

    def __len__(self) -> int:
        return len(self._watches)

    def started(
        self, user_id: str, thread_id: str, cycle_id: str, language: Language, now: float
    ) -> None:
        """A message of the thread was accepted: its cycle runs now or after those before."""
        watch = self._watches.get((user_id, thread_id))
        if watch is None:
            watch = self._watches[(user_id, thread_id)] = Watch(
                user_id, thread_id, language, last_news=now
            )
        if cycle_id not in watch.cycles:
            watch.cycles.append(cycle_id)
        watch.language = language

    def heard(
        self, user_id: str, thread_id: str, cycle_id: str | None, *, ended: bool, now: float
    ) -> None:
        """A frame of the thread reached the user (any of its cycles: the queue moves)."""
        watch = self._watches.get((user_id, thread_id))
        if watch is None:
            return
        watch.last_news = now
        if ended and cycle_id in watch.cycles:
            watch.cycles.remove(cycle_id)
            if not watch.cycles:
                del self._watches[(user_id, thread_id)]

    def due(self, now: float) -> list[Watch]:
        """The threads quiet for ``quiet_s`` or longer."""
        return [w for w in self._watches.values() if now - w.last_news >= self.quiet_s]

    def told(self, watch: Watch, now: float) -> None:
        """A status went out: the next one after another ``quiet_s`` of quiet."""
        watch.last_news = now

    def forget_user(self, user_id: str) -> None:
        """The user has no socket here any more: a reconnect gets the frames replayed."""
        for key in [k for k in self._watches if k[0] == user_id]:
            del self._watches[key]


def status_text(cause: Cause, language: Language, missing: list[str]) -> str:
    if cause == "broker":
        return i18n.text("quiet_broker", language)
    if cause == "service":
        return i18n.text("quiet_service", language, services=", ".join(missing))
    return i18n.text("quiet_slow", language)


def status_frame(watch: Watch, content: str, now: datetime) -> MessageFrame:
    return MessageFrame(
        id=f"{STATUS_ID_PREFIX}{watch.cycle_id}",
        thread_id=watch.thread_id,
        cycle_id=watch.cycle_id,
        chat_history=False,
        modal="textForReplace",
        role="system",
        content=content,
        created_at=now,
    )


class QuietCycleNotices:
    """Runs :class:`QuietCycles` on the gateway: fed by the sockets (accepted messages) and
    the hub (delivered frames), it looks every quarter of the quiet period for quiet threads
    and tells their users why, as far as the gateway can tell."""

    def __init__(
        self,
        hub: ConnectionHub,
        redis: Any,
        quiet_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._hub = hub
        self._redis = redis
        self._clock = clock
        self.cycles = QuietCycles(quiet_s)
        self._task: asyncio.Task[None] | None = None
        hub.observe(self.on_frame)

    def accepted(self, user_id: str, thread_id: str, cycle_id: str, content: str) -> None:
        language = i18n.detect_language(content)
        self.cycles.started(user_id, thread_id, cycle_id, language, self._clock())

    def on_frame(self, user_id: str, frame: OutboundFrame) -> None:
        self.cycles.heard(
            user_id,
            frame.thread_id,
            frame.cycle_id,
            ended=frame.type == "cycle_end",
            now=self._clock(),
        )

    async def start(self) -> None:
        if self.cycles.quiet_s > 0:
            self._task = asyncio.create_task(self._watch_forever(), name="quiet cycles")

    async def stop(self) -> None:
        if self._task is not None:
            await stop_task(self._task)
            self._task = None

    async def _watch_forever(self) -> None:
        while True:
            await asyncio.sleep(self.cycles.quiet_s / CHECKS_PER_QUIET)
            try:
                await self.tell_quiet_users()
            except Exception:  # telling is best effort; the loop must go on
                log.exception("could not tell users about quiet cycles")

    async def tell_quiet_users(self) -> int:
        """One look: a status to each quiet thread's user; how many were told."""
        due = self.cycles.due(self._clock())
        if not due:
            return 0
        cause, missing = await self._cause()
        told = 0
        for watch in due:
            if not self._hub.sockets_of(watch.user_id):
                self.cycles.forget_user(watch.user_id)
                continue
            content = status_text(cause, watch.language, missing)
            frame = status_frame(watch, content, datetime.now(UTC))
            self._hub.send_to(watch.user_id, frame.model_dump_json())
            self.cycles.told(watch, self._clock())
            told += 1
        if told:
            log.info("told %d users of quiet cycles (%s %s)", told, cause, missing or "")
        return told

    async def _cause(self) -> tuple[Cause, list[str]]:
        """Why it may be quiet: the broker out of reach, services not announcing
        themselves, or neither (slow)."""
        try:
            async with asyncio.timeout(CHECK_TIMEOUT_S):
                serving = await presence.serving_services(self._redis)
        except (RedisError, OSError, TimeoutError):
            return "broker", []
        missing = [name for name in WATCHED_SERVICES if name not in serving]
        return ("service", missing) if missing else ("slow", [])

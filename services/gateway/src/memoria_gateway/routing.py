"""Which users this gateway holds sockets (or waiting HTTP requests) of, registered in the
broker for routed fan-out: while a user is here, this gateway's name is in the user's route
set, and every chat.out frame of the user is copied to this gateway's inbox
(memoria_runtime.bus.routed).

A user is registered before anything of theirs is read (a socket's replay, a request's
cycle), so no frame falls between the replay and the live ones; and taken out once their
last socket or request here is gone. Registrations and removals of one user run one at a
time, in the order they were asked for, so a quick reconnect never ends unregistered.

With broadcast fan-out (one server) every method does nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import Iterable
from typing import Any

from redis.exceptions import RedisError

from memoria_runtime import keys
from memoria_runtime.bus.routed import ROUTE_TTL_S
from memoria_runtime.partitions import Partitions

log = logging.getLogger("memoria.gateway.routing")


class UserRoutes:
    def __init__(self, redis: Any, partitions: Partitions, gateway: str, *, routed: bool):
        """``gateway``: this replica's name, the one its inboxes carry."""
        self._redis = redis
        self._partitions = partitions
        self.gateway = gateway
        self.routed = routed
        self._present: Counter[str] = Counter()
        self._registered: set[str] = set()
        self._locks: dict[str, asyncio.Lock] = {}
        self._settling: set[asyncio.Task[None]] = set()

    @property
    def users(self) -> frozenset[str]:
        """The users registered here now."""
        return frozenset(self._registered)

    async def enter(self, user_id: str) -> None:
        """The user has a new socket or request here: registered once this returns. Raises
        ``RedisError`` when the broker cannot be told (nothing of the user's would arrive)."""
        if not self.routed:
            return
        self._present[user_id] += 1
        try:
            async with self._lock(user_id):
                if user_id not in self._registered:
                    await self._register([user_id])
                    self._registered.add(user_id)
        except BaseException:
            self._leave_now(user_id)
            raise

    def leave(self, user_id: str) -> None:
        """A socket or request of the user is gone; the last one takes the user out (soon,
        in the background)."""
        if not self.routed:
            return
        self._leave_now(user_id)

    async def renew(self) -> None:
        """Register every user here again (the route sets' expiry pushed back), in one round
        trip per primary."""
        if self.routed and self._registered:
            await self._register(sorted(self._registered))

    async def forget(self, users: Iterable[str]) -> None:
        """Register ``users`` again after this gateway's inbox was lost (the copies made
        meanwhile took the gateway out of their sets)."""
        present = [user for user in users if user in self._registered]
        if present:
            await self._register(present)

    async def close(self) -> None:
        for task in list(self._settling):
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _leave_now(self, user_id: str) -> None:
        self._present[user_id] -= 1
        if self._present[user_id] <= 0:
            del self._present[user_id]
        task = asyncio.get_running_loop().create_task(self._settle(user_id))
        self._settling.add(task)
        task.add_done_callback(self._settling.discard)

    async def _settle(self, user_id: str) -> None:
        async with self._lock(user_id):
            if self._present[user_id] or user_id not in self._registered:
                return
            self._registered.discard(user_id)
            part = self._partitions.of(user_id)
            try:
                await self._redis.srem(keys.user_route(part, user_id), self.gateway)
            except RedisError as exc:
                # Copies keep coming to this inbox and are dropped here (no socket) until
                # the set expires or a copy finds the inbox gone.
                log.warning("could not take %s out of this gateway's routes: %s", user_id, exc)
        if not self._present[user_id] and not self._lock(user_id).locked():
            self._locks.pop(user_id, None)

    def _lock(self, user_id: str) -> asyncio.Lock:
        return self._locks.setdefault(user_id, asyncio.Lock())

    async def _register(self, users: list[str]) -> None:
        async with self._redis.pipeline(transaction=False) as pipe:
            for user_id in users:
                route = keys.user_route(self._partitions.of(user_id), user_id)
                pipe.sadd(route, self.gateway)
                pipe.expire(route, ROUTE_TTL_S)
            await pipe.execute()

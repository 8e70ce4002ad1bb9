"""``pendingAction``: what a thread waits to have confirmed, kept in Redis per thread.

When the runtime needs the user's confirmation (deleting every memory) or choice (which
memory an ambiguous update, or an ambiguous "forget that", meant), it stores the action here
and asks; the next message in the same thread resolves it (see
:mod:`memoria_decision.fast_paths`). It is per thread, not per user, so a "yes" in another
conversation confirms nothing; and it expires, so a "yes" written the next day is an
ordinary message again instead of the trigger of an old, forgotten request.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Literal

from pydantic import BaseModel, Field, ValidationError

from memoria_contracts.chat import utcnow
from memoria_contracts.events import Language
from memoria_contracts.memory import ContentKind
from memoria_runtime import keys
from memoria_runtime.partitions import Partitions

log = logging.getLogger("memoria.decision.pending")

PENDING_ACTION_TTL_S: Final = 10 * 60
"""How long a confirmation question stays answerable."""

PendingKind = Literal["delete_all", "choose_update", "choose_forget"]


@dataclass(frozen=True)
class Prefetched:
    """The thread's pending action as read (None: none) earlier in the same delivery."""

    raw: bytes | None


class UpdateCandidate(BaseModel):
    memory_id: str
    content: Any
    """The memory's content when the question was asked (its excerpt is what was shown)."""


def pending_id_for(cycle_id: str) -> str:
    """One asking cycle, one pending action: a redelivered cycle stores the same one again."""
    return f"pa_{cycle_id.removeprefix('cyc_')}"


class PendingAction(BaseModel):
    id: str
    kind: PendingKind
    language: Language
    """The language the question was asked in."""
    asked_in_cycle: str
    asked_at: datetime = Field(default_factory=utcnow)
    candidates: list[UpdateCandidate] = Field(default_factory=list)
    """``choose_update``/``choose_forget``: the memories the user chooses among, in the order
    shown (numbered from 1). Memories of the session's user: the action worker offers only
    memories loaded in this thread, "forget that" only those written in it, and both run as
    the session's user, so another's id is refused."""
    content: Any = None
    """``choose_update``: the new content of the chosen memory."""
    content_kind: ContentKind | None = None


class PendingActions:
    """The store. Cycles of one thread never overlap (the thread gate), so get-then-clear
    needs no transaction: nobody else can touch a thread's pending action meanwhile."""

    def __init__(
        self, redis: Any, partitions: Partitions, *, ttl_s: int = PENDING_ACTION_TTL_S
    ) -> None:
        self._redis = redis
        self._partitions = partitions
        self.ttl_s = ttl_s

    def key(self, user_id: str, thread_id: str) -> str:
        return keys.pending_action(self._partitions.of(user_id), user_id, thread_id)

    async def get(self, user_id: str, thread_id: str) -> PendingAction | None:
        raw = await self._redis.get(self.key(user_id, thread_id))
        return await self.parse(user_id, thread_id, raw)

    async def parse(self, user_id: str, thread_id: str, raw: bytes | None) -> PendingAction | None:
        """:meth:`get` of the value as read already (with the thread gate's ``open``)."""
        if raw is None:
            return None
        try:
            return PendingAction.model_validate_json(raw)
        except ValidationError:
            # Written by another version, or by hand: asking again is safer than guessing.
            log.warning("unreadable pending action for %s/%s dropped", user_id, thread_id)
            await self._redis.delete(self.key(user_id, thread_id))
            return None

    async def put(self, user_id: str, thread_id: str, action: PendingAction) -> None:
        await self._redis.set(self.key(user_id, thread_id), action.model_dump_json(), ex=self.ttl_s)

    async def clear(self, user_id: str, thread_id: str, action_id: str) -> None:
        """Remove the pending action ``action_id``; a newer one (asked since) stays."""
        current = await self.get(user_id, thread_id)
        if current is not None and current.id == action_id:
            await self._redis.delete(self.key(user_id, thread_id))

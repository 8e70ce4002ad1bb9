"""One cycle at a time per thread, and no message lost while waiting.

A thread's **lock** names the message whose cycle is running. A message that arrives while
the lock is held waits in the thread's **queue** (a Redis list). Both scripts below are
atomic, so there is no moment where a message is neither queued nor on ``chat.in``:

* ``admit`` (gateway): if the thread is free, take the lock and append the message to
  ``chat.in``; otherwise queue it. A client-chosen id is remembered, so a resend after a
  reconnect is recognised instead of handled twice.
* ``release`` (decision, when a cycle ends): if the ending message still owns the lock, hand
  the lock to the oldest waiting message and append it to ``chat.in``, or free the thread.
  Running it twice is harmless (the second time the owner differs), which makes cycle ends
  safe to redeliver.

Queue entries are ``<message id>\\t<FastStream-framed entry>``; the framed bytes keep the
message's own trace headers, so a queued message's cycle is still its own trace.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from memoria_contracts.streams import Stream
from memoria_runtime import keys

_ADMIT = """
if ARGV[6] ~= '' then
  local first = redis.call('SET', KEYS[4], ARGV[1], 'NX', 'EX', ARGV[5])
  if not first then return {'duplicate', redis.call('GET', KEYS[4])} end
end
local entry = ARGV[1] .. '\\t' .. ARGV[2]
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('RPUSH', KEYS[2], entry)
  return {'queued', ARGV[1]}
end
if redis.call('LLEN', KEYS[2]) > 0 then
  -- the lock expired while messages waited (a cycle died): serve the oldest first
  redis.call('RPUSH', KEYS[2], entry)
  entry = redis.call('LPOP', KEYS[2])
end
local tab = string.find(entry, '\\t', 1, true)
local id = string.sub(entry, 1, tab - 1)
redis.call('SET', KEYS[1], id, 'EX', ARGV[4])
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[3], '*', '__data__', string.sub(entry, tab + 1))
if id == ARGV[1] then return {'dispatched', id} end
return {'queued', ARGV[1]}
"""

_RELEASE = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return '' end
local entry = redis.call('LPOP', KEYS[2])
if not entry then
  redis.call('DEL', KEYS[1])
  return ''
end
local tab = string.find(entry, '\\t', 1, true)
local id = string.sub(entry, 1, tab - 1)
redis.call('SET', KEYS[1], id, 'EX', ARGV[2])
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[3], '*', '__data__', string.sub(entry, tab + 1))
return id
"""

_REFRESH = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('EXPIRE', KEYS[1], ARGV[2])
end
return 0
"""

_TAKE_OVER = """
local owner = redis.call('GET', KEYS[1])
if owner == ARGV[1] then return 1 end
if not owner then
  redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
  return 1
end
return 0
"""

Admission = Literal["dispatched", "queued", "duplicate"]
_SEEN_TTL_S = 24 * 3600  # how long a client-chosen message id is remembered


@dataclass(frozen=True)
class AdmitResult:
    outcome: Admission
    message_id: str
    """The id the message is known by (for a duplicate: the first one's id)."""


class ThreadGate:
    def __init__(self, redis: Any, *, lock_ttl_s: int, stream_maxlen: int) -> None:
        self._redis = redis
        self._lock_ttl_s = lock_ttl_s
        self._maxlen = stream_maxlen
        self._admit = redis.register_script(_ADMIT)
        self._release = redis.register_script(_RELEASE)
        self._refresh = redis.register_script(_REFRESH)
        self._take_over = redis.register_script(_TAKE_OVER)

    async def admit(
        self,
        user_id: str,
        thread_id: str,
        message_id: str,
        framed: bytes,
        client_message_id: str | None = None,
    ) -> AdmitResult:
        outcome, known_id = await self._admit(
            keys=[
                keys.thread_lock(user_id, thread_id),
                keys.thread_queue(user_id, thread_id),
                Stream.CHAT_IN.value,
                keys.message_seen(user_id, client_message_id or "-"),
            ],
            args=[
                message_id,
                framed,
                self._maxlen,
                self._lock_ttl_s,
                _SEEN_TTL_S,
                client_message_id or "",
            ],
        )
        return AdmitResult(outcome=outcome.decode(), message_id=known_id.decode())

    async def release(self, user_id: str, thread_id: str, message_id: str) -> str | None:
        """Return the id of the message dispatched next, if any."""
        next_id = await self._release(
            keys=[
                keys.thread_lock(user_id, thread_id),
                keys.thread_queue(user_id, thread_id),
                Stream.CHAT_IN.value,
            ],
            args=[message_id, self._lock_ttl_s, self._maxlen],
        )
        return next_id.decode() or None

    async def refresh(self, user_id: str, thread_id: str, message_id: str) -> bool:
        """Extend the lock while ``message_id``'s cycle makes progress."""
        return bool(
            await self._refresh(
                keys=[keys.thread_lock(user_id, thread_id)], args=[message_id, self._lock_ttl_s]
            )
        )

    async def take_over(self, user_id: str, thread_id: str, message_id: str) -> bool:
        """True when ``message_id`` owns the thread (already, or because it was free)."""
        return bool(
            await self._take_over(
                keys=[keys.thread_lock(user_id, thread_id)], args=[message_id, self._lock_ttl_s]
            )
        )

    async def requeue_first(
        self, user_id: str, thread_id: str, message_id: str, framed: bytes
    ) -> None:
        """Put a message back at the head of the queue (it arrived while another owned the
        thread, which only happens after a lock expired)."""
        await self._redis.lpush(
            keys.thread_queue(user_id, thread_id), message_id.encode() + b"\t" + framed
        )

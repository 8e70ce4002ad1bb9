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

On a partitioned bus every key of a call (the thread's lock, queue and seen id, the keys a
caller passes, the ``chat.in`` the scripts append to) is in the user's partition, under its
hash tag (partitions.py): each script runs on one cluster slot.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from redis.exceptions import NoScriptError

from memoria_contracts.streams import Stream
from memoria_runtime import keys
from memoria_runtime.bus.topology import groups_of
from memoria_runtime.partitions import Partitions

# chat.in is created only with the groups that read it (ARGV: their names, space-separated),
# as every stream is (bus/topology.py): a message admitted before decision ever started must
# not be skipped by a group created after it. A script is atomic, so nothing comes between.
_APPEND = """
local function append(stream, maxlen, data, groups)
  if redis.call('EXISTS', stream) == 0 then
    for group in string.gmatch(groups, '%S+') do
      redis.call('XGROUP', 'CREATE', stream, group, '$', 'MKSTREAM')
    end
  end
  redis.call('XADD', stream, 'MAXLEN', '~', maxlen, '*', '__data__', data)
end
"""

_ADMIT = (
    _APPEND
    + """
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
append(KEYS[3], ARGV[3], string.sub(entry, tab + 1), ARGV[7])
if id == ARGV[1] then return {'dispatched', id} end
return {'queued', ARGV[1]}
"""
)

_RELEASE = (
    _APPEND
    + """
if #KEYS > 3 then redis.call('SET', KEYS[4], ARGV[5], 'EX', ARGV[6]) end
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return '' end
local entry = redis.call('LPOP', KEYS[2])
if not entry then
  redis.call('DEL', KEYS[1])
  return ''
end
local tab = string.find(entry, '\\t', 1, true)
local id = string.sub(entry, 1, tab - 1)
redis.call('SET', KEYS[1], id, 'EX', ARGV[2])
append(KEYS[3], ARGV[3], string.sub(entry, tab + 1), ARGV[4])
return id
"""
)

_REFRESH = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('EXPIRE', KEYS[1], ARGV[2])
end
return 0
"""

# Open a message's cycle (a redelivery's too): the stored state if it started already (then
# nothing is taken: the cycle may have ended and released the thread); else take the thread
# over if it is free or owned by this message (refreshing the lock), and read KEYS[3].
_OPEN = """
local started = redis.call('GET', KEYS[2])
if started then return {0, started, ''} end
local owner = redis.call('GET', KEYS[1])
if owner == ARGV[1] then
  redis.call('EXPIRE', KEYS[1], ARGV[2])
elseif not owner then
  redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
else
  return {0, '', ''}
end
return {1, '', redis.call('GET', KEYS[3]) or ''}
"""

Admission = Literal["dispatched", "queued", "duplicate"]


@dataclass(frozen=True)
class KeyWrite:
    """A value to SET with an expiry in the same atomic step as a gate operation."""

    key: str
    value: str
    ttl_s: int


@dataclass(frozen=True)
class Opening:
    """What :meth:`ThreadGate.open` found, in one round trip."""

    started: bytes | None
    """The cycle's stored state: it started before (nothing was taken over then)."""
    owns: bool
    """The message owns the thread, its lock set or refreshed just now (when not started)."""
    read: bytes | None
    """The value of ``then_read``, read once the thread was owned (None: absent)."""


_SEEN_TTL_S = 24 * 3600  # how long a client-chosen message id is remembered
_CHAT_IN_GROUPS = " ".join(groups_of(Stream.CHAT_IN.value))


@dataclass(frozen=True)
class AdmitResult:
    outcome: Admission
    message_id: str
    """The id the message is known by (for a duplicate: the first one's id)."""


class ThreadGate:
    """The gate of every thread. Each call touches the keys of one thread and its
    partition's ``chat.in``, all under the partition's hash tag (one cluster slot)."""

    def __init__(
        self, redis: Any, *, lock_ttl_s: int, stream_maxlen: int, partitions: Partitions
    ) -> None:
        self._redis = redis
        self.partitions = partitions
        self._lock_ttl_s = lock_ttl_s
        self._maxlen = stream_maxlen
        self._admit = redis.register_script(_ADMIT)
        self._release = redis.register_script(_RELEASE)
        self._refresh = redis.register_script(_REFRESH)
        self._open = redis.register_script(_OPEN)

    async def admit(
        self,
        user_id: str,
        thread_id: str,
        message_id: str,
        framed: bytes,
        client_message_id: str | None = None,
    ) -> AdmitResult:
        part = self.partitions.of(user_id)
        outcome, known_id = await self._admit(
            keys=[
                keys.thread_lock(part, user_id, thread_id),
                keys.thread_queue(part, user_id, thread_id),
                part.scoped(Stream.CHAT_IN.value),
                keys.message_seen(part, user_id, client_message_id or "-"),
            ],
            args=[
                message_id,
                framed,
                self._maxlen,
                self._lock_ttl_s,
                _SEEN_TTL_S,
                client_message_id or "",
                _CHAT_IN_GROUPS,
            ],
        )
        return AdmitResult(outcome=outcome.decode(), message_id=known_id.decode())

    async def release(
        self, user_id: str, thread_id: str, message_id: str, *, save: KeyWrite | None = None
    ) -> str | None:
        """Return the id of the message dispatched next, if any. ``save`` is written in the
        same atomic step, whoever owns the lock (the ending cycle's last state: a crash
        cannot come between recording the end and releasing the thread); its key must be of
        the thread's partition."""
        part = self.partitions.of(user_id)
        lock_keys = [
            keys.thread_lock(part, user_id, thread_id),
            keys.thread_queue(part, user_id, thread_id),
            part.scoped(Stream.CHAT_IN.value),
        ]
        args: list[Any] = [message_id, self._lock_ttl_s, self._maxlen, _CHAT_IN_GROUPS]
        if save is not None:
            lock_keys.append(save.key)
            args += [save.value, save.ttl_s]
        next_id = await self._release(keys=lock_keys, args=args)
        return next_id.decode() or None

    async def refresh(self, user_id: str, thread_id: str, message_id: str) -> bool:
        """Extend the lock while ``message_id``'s cycle makes progress."""
        return bool(await self._refresh(**self._refresh_call(user_id, thread_id, message_id)))

    def queue_refresh(self, pipe: Any, user_id: str, thread_id: str, message_id: str) -> None:
        """:meth:`refresh` queued on a pipeline, to share a round trip. The script is called
        by its hash alone (a pipeline would first ask whether it is loaded, one more round
        trip); :meth:`refreshed` runs it again should the broker have forgotten it."""
        call = self._refresh_call(user_id, thread_id, message_id)
        # As a raw command: a cluster pipeline refuses its evalsha() method, not the command
        # (routed by its key, the lock's partition).
        pipe.execute_command(
            "EVALSHA", self._refresh.sha, len(call["keys"]), *call["keys"], *call["args"]
        )

    async def refreshed(self, result: Any, user_id: str, thread_id: str, message_id: str) -> bool:
        """The outcome of a :meth:`queue_refresh` (its pipeline run with
        ``raise_on_error=False``)."""
        if isinstance(result, NoScriptError):  # a restarted broker: load it and refresh
            return await self.refresh(user_id, thread_id, message_id)
        if isinstance(result, Exception):
            raise result
        return bool(result)

    def _refresh_call(self, user_id: str, thread_id: str, message_id: str) -> dict[str, Any]:
        return {
            "keys": [keys.thread_lock(self.partitions.of(user_id), user_id, thread_id)],
            "args": [message_id, self._lock_ttl_s],
        }

    async def open(
        self, user_id: str, thread_id: str, message_id: str, *, started: str, then_read: str
    ) -> Opening:
        """Before a message's cycle runs, in one round trip: its stored state (key
        ``started``) if it started before; else whether the message owns the thread (free, or
        its own already; the lock is set or refreshed) and, if it does, ``then_read``'s
        value. Both keys must be of the thread's partition."""
        part = self.partitions.of(user_id)
        owns, state, read = await self._open(
            keys=[keys.thread_lock(part, user_id, thread_id), started, then_read],
            args=[message_id, self._lock_ttl_s],
        )
        return Opening(started=state or None, owns=bool(owns), read=read or None)

    async def requeue_first(
        self, user_id: str, thread_id: str, message_id: str, framed: bytes
    ) -> None:
        """Put a message back at the head of the queue (it arrived while another owned the
        thread, which only happens after a lock expired)."""
        await self._redis.lpush(
            keys.thread_queue(self.partitions.of(user_id), user_id, thread_id),
            message_id.encode() + b"\t" + framed,
        )

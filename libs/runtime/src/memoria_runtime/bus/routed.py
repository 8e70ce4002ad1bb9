"""Routed fan-out: a frame appended to chat.out is copied, in the same atomic step, to the
inbox of each gateway that holds a socket of its user — and to no other gateway.

Past one primary, every gateway reading all of chat.out would read every user's frames to
deliver a few; here a gateway reads only its own inboxes (one per partition). The user →
gateway registry is a set per user (``keys.user_route``) that gateways add themselves to
while they hold a socket of the user; an inbox expires unless its gateway keeps it alive
(a lease), and a copy that finds no inbox (``XADD NOMKSTREAM`` answers nil) takes that
gateway out of the set. The chat.out entry, the route set and the inboxes of a partition
share its hash tag, so the script runs on one slot: the copies are in chat.out's order, and
a gateway that joins the set either gets a frame copied or finds it in chat.out when it
reads the user's replay after joining (docs/adr/0029-partitioned-bus.md).

A copy is the framed entry, unchanged (still signed for chat.out), with the id of the
chat.out entry it copies, which is the frame's ``event_id``.
"""

from __future__ import annotations

from typing import Any, Final

from memoria_contracts.streams import Stream
from memoria_runtime import keys
from memoria_runtime.bus.topology import groups_of
from memoria_runtime.partitions import Partition

ENTRY_FIELD: Final = b"entry"
"""Field of an inbox entry: the id of the chat.out entry it copies."""
INBOX_MAXLEN: Final = 10_000
"""Copies an inbox keeps (approximately): a live gateway reads them within milliseconds."""
INBOX_LEASE_S: Final = 30
"""An inbox (and so a gateway's routes) outlives its gateway by at most this long."""
ROUTE_TTL_S: Final = 24 * 3600
"""A user's route set outlives its last registration by this long (gateways renew it)."""

_INBOX_SUFFIX = ":inbox"

# KEYS: chat.out's partition, the user's route set. ARGV: the framed entry, chat.out's
# MAXLEN, the partition's inbox prefix, the inboxes' MAXLEN, the groups chat.out is created
# with when it is missing (space-separated, as the thread gate's scripts do:
# bus/topology.py).
_APPEND_AND_ROUTE = (
    """
local id = redis.call('XADD', KEYS[1], 'NOMKSTREAM', 'MAXLEN', '~', ARGV[2], '*',
  '__data__', ARGV[1])
if not id then
  for group in string.gmatch(ARGV[5], '%S+') do
    redis.call('XGROUP', 'CREATE', KEYS[1], group, '$', 'MKSTREAM')
  end
  id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], '*', '__data__', ARGV[1])
end
for _, gateway in ipairs(redis.call('SMEMBERS', KEYS[2])) do
  local inbox = ARGV[3] .. gateway .. '"""
    + _INBOX_SUFFIX
    + """'
  local copied = redis.call('XADD', inbox, 'NOMKSTREAM', 'MAXLEN', '~', ARGV[4], '*',
    '__data__', ARGV[1], 'entry', id)
  if not copied then redis.call('SREM', KEYS[2], gateway) end
end
return id
"""
)

_CHAT_OUT_GROUPS = " ".join(groups_of(Stream.CHAT_OUT.value))


def inbox_prefix(part: Partition) -> str:
    """``keys.gateway_inbox(part, gateway)`` is this, the gateway's name, then ``:inbox``."""
    inbox = keys.gateway_inbox(part, "")
    return inbox[: -len(_INBOX_SUFFIX)]


class RoutedAppend:
    """The chat.out append of a routed deployment (the publisher's, for chat.out only)."""

    def __init__(self, redis: Any, *, maxlen: int) -> None:
        self._script = redis.register_script(_APPEND_AND_ROUTE)
        self._maxlen = maxlen

    def _call(self, part: Partition, user_id: str, framed: bytes) -> tuple[list[str], list[Any]]:
        return (
            [part.scoped(Stream.CHAT_OUT.value), keys.user_route(part, user_id)],
            [framed, self._maxlen, inbox_prefix(part), INBOX_MAXLEN, _CHAT_OUT_GROUPS],
        )

    async def append(self, part: Partition, user_id: str, framed: bytes) -> Any:
        """Append and copy; the chat.out entry's id."""
        script_keys, args = self._call(part, user_id, framed)
        return await self._script(keys=script_keys, args=args)

    def queue(self, pipe: Any, part: Partition, user_id: str, framed: bytes) -> None:
        """:meth:`append` queued on a pipeline, by the script's hash (a raw EVALSHA: a cluster
        pipeline refuses its evalsha() method). A broker that forgot the script answers
        ``NoScriptError`` in that reply: :meth:`append` it again then."""
        script_keys, args = self._call(part, user_id, framed)
        pipe.execute_command("EVALSHA", self._script.sha, len(script_keys), *script_keys, *args)

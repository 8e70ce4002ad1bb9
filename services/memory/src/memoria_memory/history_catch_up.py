"""A history read sees every message posted before it.

The memory service stores chat messages by reading ``chat.out`` in its own group, apart from
the requests that read them. Under load that group runs behind, and a cycle that starts right
after the previous one ended (a queued message released at once) would read a history without
the previous answer. So before a history read the memory service takes the stream's newest
entry as a mark and waits until the group (every replica of it) has acknowledged every entry
up to that mark: delivered that far, and none of them still pending.

The wait is bounded: past ``WAIT_LIMIT_S`` a read answers with what is stored and counts a
read behind (``memoria_history_reads_behind_total``). An entry held by a crashed replica stays
pending until it is reclaimed (``MEMORIA_RECLAIM_IDLE_MS``, 30 s by default); waiting for it
would cost every read in that window its full bound. So a read does not wait for an entry
that has been pending longer than a read may wait: its holder is gone or stuck, and the
reclaim, not the read, will see it stored. A crash thus delays reads for one bound after it,
not for the whole reclaim window.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Final

from redis.asyncio import Redis
from redis.exceptions import RedisError

from memoria_contracts.streams import Group, Stream
from memoria_runtime import metrics
from memoria_runtime.partitions import Partitions

log = logging.getLogger("memoria.memory.history")

WAIT_LIMIT_S: Final = 1.0
# A lagging group usually catches up within milliseconds; a read that waits longer asks the
# broker less often (each ask is a script over XINFO and XPENDING).
FIRST_POLL_S: Final = 0.005
MAX_POLL_S: Final = 0.05
WARN_EVERY_S: Final = 10.0  # a stuck group can hold every read: one line per interval
# How many of the entries pending before the mark one check looks at. The group holds at most
# its replicas' slots in flight, plus what crashed replicas left; past this many the check
# cannot tell and the read waits (still within its bound).
PENDING_LOOKED_AT: Final = 512

# Returns {mark, 1 if the group acknowledged everything up to it else 0}; an entry pending for
# ARGV[4] ms or longer counts as acknowledged (given up on: see the module's docstring). The
# mark is taken on the first call (ARGV[2] empty) and passed back on the next ones. No stream
# or no group: nothing can be waited for (nobody posted, or no memory service ever read).
_CAUGHT_UP = """
local mark = ARGV[2]
if mark == '' then
  local newest = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
  if #newest == 0 then return {'', 1} end
  mark = newest[1][1]
end
local ok, groups = pcall(redis.call, 'XINFO', 'GROUPS', KEYS[1])
if not ok then return {mark, 1} end
local delivered = nil
for _, group in ipairs(groups) do
  local name, last = nil, nil
  for i = 1, #group, 2 do
    if group[i] == 'name' then name = group[i + 1] end
    if group[i] == 'last-delivered-id' then last = group[i + 1] end
  end
  if name == ARGV[1] then delivered = last end
end
if delivered == nil then return {mark, 1} end
local function parts(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  return tonumber(ms), tonumber(seq)
end
local d_ms, d_seq = parts(delivered)
local m_ms, m_seq = parts(mark)
if d_ms < m_ms or (d_ms == m_ms and d_seq < m_seq) then return {mark, 0} end
local looked_at = tonumber(ARGV[3])
local given_up_ms = tonumber(ARGV[4])
local held = redis.call('XPENDING', KEYS[1], ARGV[1], '-', mark, looked_at)
for _, entry in ipairs(held) do
  if entry[3] < given_up_ms then return {mark, 0} end
end
if #held >= looked_at then return {mark, 0} end
return {mark, 1}
"""


class HistoryCatchUp:
    """Waits, before a history read, for the history group to store what came before it."""

    def __init__(
        self,
        redis: Redis,
        partitions: Partitions,
        *,
        stream: Stream = Stream.CHAT_OUT,
        group: Group = Group.MEMORY_HISTORY,
        wait_limit_s: float = WAIT_LIMIT_S,
        given_up_after_s: float | None = None,
    ) -> None:
        """``given_up_after_s``: how long an entry may be pending before reads stop waiting
        for it; by default the wait's own bound, since a later read would wait that in vain."""
        self._script = redis.register_script(_CAUGHT_UP)
        self._partitions = partitions
        self._stream = stream.value
        self._group = group.value
        self._wait_limit_s = wait_limit_s
        self._given_up_after_ms = max(1, round((given_up_after_s or wait_limit_s) * 1000))
        self._behind = metrics.history_reads_behind_counter()
        self._unreported = 0  # reads behind since the last warning
        self._warned_at = -WARN_EVERY_S

    async def wait(self, user_id: str) -> bool:
        """True once everything posted for ``user_id`` (in the user's partition of the
        stream) before the call is stored; False when the bound or a broker error ended the
        wait first (the read goes on with what is stored)."""
        deadline = time.monotonic() + self._wait_limit_s
        key = self._partitions.of(user_id).scoped(self._stream)
        mark = ""
        poll_s = FIRST_POLL_S
        try:
            while True:
                mark, caught_up = await self._check(key, mark)
                if caught_up:
                    return True
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                await asyncio.sleep(min(poll_s, left))
                poll_s = min(poll_s * 2, MAX_POLL_S)
        except RedisError as exc:
            self._report(f"could not tell whether history is stored up to date: {exc}")
        else:
            self._report(
                f"{self._stream} entries up to {mark} not yet stored after "
                f"{self._wait_limit_s:.1f} s"
            )
        self._behind.inc()
        return False

    def _report(self, why: str) -> None:
        self._unreported += 1
        now = time.monotonic()
        if now - self._warned_at < WARN_EVERY_S:
            return
        log.warning("%d history read(s) answered with what was stored: %s", self._unreported, why)
        self._unreported = 0
        self._warned_at = now

    async def _check(self, key: str, mark: str) -> tuple[str, bool]:
        reply = await self._script(
            keys=[key],
            args=[self._group, mark, PENDING_LOOKED_AT, self._given_up_after_ms],
        )
        found, caught_up = reply
        text = found.decode() if isinstance(found, bytes) else str(found)
        return text, int(caught_up) == 1

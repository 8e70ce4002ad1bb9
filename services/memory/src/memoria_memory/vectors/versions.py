"""Which version of a user's vectors is current, shared by every memory service replica.

A replica that holds a user's vectors in process (``cached.CachedVectorStore``) must know
when another replica (or the ``memoria`` CLI) changed them. Every write of a user's rows
replaces the user's version in the broker with a new random token; a copy made at a token
is good while the broker still holds that token.

Tokens are random rather than counted so that a broker that lost its keys (restarted
without its AOF, flushed, the key expired) can never hand back a value an old copy was made
at: a missing key is recreated with a fresh token, which matches no copy.
"""

from __future__ import annotations

import secrets

from redis.asyncio import Redis

KEY = "memoria:vectors:version:{collection}:{user_id}"
# Versions of users nobody writes to or searches for leave the broker after this long; a
# copy made at an expired version is simply made again.
TTL_S = 7 * 24 * 3600

# Read the version, creating it when missing: one round trip on the search path.
_CURRENT = """
local version = redis.call('GET', KEYS[1])
if version then return version end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
return ARGV[1]
"""


def new_token() -> str:
    return secrets.token_hex(8)


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class VectorVersions:
    """The per-user version tokens of one collection, kept in the broker."""

    def __init__(self, redis: Redis, collection: str) -> None:
        self._redis = redis
        self._collection = collection
        self._current = redis.register_script(_CURRENT)

    def _key(self, user_id: str) -> str:
        return KEY.format(collection=self._collection, user_id=user_id)

    async def current(self, user_id: str) -> str:
        """The user's version now (a new one if the broker had none)."""
        return _text(await self._current(keys=[self._key(user_id)], args=[new_token(), TTL_S]))

    async def replace(self, user_id: str, token: str) -> str | None:
        """Make ``token`` the user's version; returns the version it replaced (None if
        there was none), atomically, so a writer knows whether anyone wrote in between."""
        previous = await self._redis.set(self._key(user_id), token, ex=TTL_S, get=True)
        return None if previous is None else _text(previous)

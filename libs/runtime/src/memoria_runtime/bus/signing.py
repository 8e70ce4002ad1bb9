"""Signed envelopes: who may write on the bus.

The trust boundary (docs/adr/0008-bus-trust-boundary.md): whoever reaches Redis can read the
streams, but only a holder of ``MEMORIA_BUS_SECRET`` can write an entry that a Memoria service
acts on. Every entry a service writes carries an HMAC-SHA256 of its channel and body in the
header ``x-memoria-sig``; consumers dead-letter what is unsigned or signed wrongly, so a forged
event ("user bob says: delete all my memories") never reaches a handler.

The channel is part of what is signed: an entry signed for ``memoria:chat.out`` is refused on
``memoria:chat.in``, and a reply is signed for the request it answers (``reply:<event id>``),
so neither can be replayed somewhere else.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import Mapping
from typing import Any

from pydantic import SecretStr

from memoria_runtime.local_secrets import load_or_create_secret
from memoria_runtime.settings import BusSettings

log = logging.getLogger("memoria.bus")

SIGNATURE_HEADER = "x-memoria-sig"
KEY_ID_KEY = "memoria:bus:key-id"
"""Redis key: the fingerprint of the bus secret the running services share."""
_SECRET_FILE = "bus_secret"
_FINGERPRINT_LABEL = b"memoria bus key id"


class SharedKeyMismatch(RuntimeError):
    """This process' bus secret is not the one the other services use."""


def reply_channel(request_event_id: str) -> str:
    """What a reply to the request with this event id is signed for."""
    return f"reply:{request_event_id}"


def _sign(key: bytes, channel: str, body: bytes) -> str:
    mac = hmac.new(key, channel.encode() + b"\n", hashlib.sha256)
    mac.update(body)
    return mac.hexdigest()


def _fingerprint(key: bytes) -> str:
    return hmac.new(key, _FINGERPRINT_LABEL, hashlib.sha256).hexdigest()[:16]


def _key(secret: str | None) -> bytes | None:
    return secret.encode() if secret else None


class Signer:
    """Signs with ``secret``. During a rotation it also accepts what is signed with the
    ``next`` secret (the one about to replace it) or the ``previous`` one (the one it
    replaced), never signing with either."""

    def __init__(
        self, secret: str, *, next_secret: str | None = None, previous_secret: str | None = None
    ) -> None:
        if not secret:
            raise ValueError("the bus secret is empty")
        self._key = secret.encode()
        self._next = _key(next_secret)
        self._previous = _key(previous_secret)
        # The signing key first: outside a rotation it is the only one, one HMAC per check.
        self._accepted = [self._key, *(k for k in (self._next, self._previous) if k)]

    def signature(self, channel: str, body: bytes) -> str:
        return _sign(self._key, channel, body)

    def headers(self, channel: str, body: bytes) -> dict[str, str]:
        return {SIGNATURE_HEADER: self.signature(channel, body)}

    def problem(self, channel: str, body: bytes, headers: Mapping[str, Any] | None) -> str | None:
        """Why the entry must not be trusted, or None when its signature holds."""
        given = (headers or {}).get(SIGNATURE_HEADER)
        if not given:
            return "missing signature (not written by a Memoria service)"
        if not isinstance(given, str) or not any(
            hmac.compare_digest(given, _sign(key, channel, body)) for key in self._accepted
        ):
            return (
                f"bad signature for {channel} (forged, altered, moved from another stream, "
                "or signed with another MEMORIA_BUS_SECRET)"
            )
        return None

    @property
    def fingerprint(self) -> str:
        """Names the signing key without revealing it (safe to store in Redis and logs)."""
        return _fingerprint(self._key)

    @property
    def next_fingerprint(self) -> str | None:
        return _fingerprint(self._next) if self._next else None

    @property
    def previous_fingerprint(self) -> str | None:
        return _fingerprint(self._previous) if self._previous else None


def signer_for(settings: BusSettings) -> Signer:
    """The configured secret, else one generated once in the data directory (what the
    processes of `memoria run`, which share it, use); with the rotation's secrets, if set."""
    return Signer(
        load_or_create_secret(settings, settings.bus_secret, _SECRET_FILE),
        next_secret=_value(settings.bus_secret_next),
        previous_secret=_value(settings.bus_secret_previous),
    )


def _value(secret: SecretStr | None) -> str | None:
    return secret.get_secret_value() if secret is not None else None


# Replaces the recorded key id only if it is still the one the caller read: two services
# starting together at step 2 of a rotation both move it forward, never back.
_MOVE_KEY_ID = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2])
end
return redis.call('GET', KEYS[1])
"""


async def ensure_shared_key(redis: Any, signer: Signer) -> None:
    """Refuse to start with another secret than the running services': every entry this
    process wrote would be dead-lettered by the others, and theirs by it.

    The first process to start records its key's fingerprint. A rotation (ADR 0008) moves
    it on without a stop: a service given the next secret starts while the others still
    sign with the current one (step 1); the first service that signs with the new secret
    and still accepts the old one (step 2) records the new fingerprint; from then on a
    service that knows only the old secret refuses to start, since it would refuse what the
    others now write."""
    mine = signer.fingerprint
    await redis.set(KEY_ID_KEY, mine, nx=True)
    recorded = _text(await redis.get(KEY_ID_KEY))
    previous = signer.previous_fingerprint
    if previous is not None and recorded == previous:
        recorded = _text(await redis.eval(_MOVE_KEY_ID, 1, KEY_ID_KEY, previous, mine))
        if recorded == mine:
            log.info("bus key rotation: the services now sign with key id %s", mine)
    if recorded is not None and recorded in (mine, signer.next_fingerprint):
        return
    raise SharedKeyMismatch(
        f"this service's MEMORIA_BUS_SECRET (key id {mine}) is not the one the other "
        f"services use (key id {recorded}). Give every service the same secret. To change "
        f"it without a stop, rotate it in three steps (MEMORIA_BUS_SECRET_NEXT, then "
        f"MEMORIA_BUS_SECRET_PREVIOUS: docs/adr/0008-bus-trust-boundary.md); or stop them "
        f"all, delete the Redis key {KEY_ID_KEY} and start them with the new secret."
    )


def _text(value: Any) -> str | None:
    return value.decode() if isinstance(value, bytes) else value

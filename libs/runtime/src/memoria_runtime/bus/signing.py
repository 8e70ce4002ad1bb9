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

from memoria_runtime.local_secrets import load_or_create_secret
from memoria_runtime.settings import Settings

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


class Signer:
    def __init__(self, secret: str) -> None:
        if not secret:
            raise ValueError("the bus secret is empty")
        self._key = secret.encode()

    def signature(self, channel: str, body: bytes) -> str:
        mac = hmac.new(self._key, channel.encode() + b"\n", hashlib.sha256)
        mac.update(body)
        return mac.hexdigest()

    def headers(self, channel: str, body: bytes) -> dict[str, str]:
        return {SIGNATURE_HEADER: self.signature(channel, body)}

    def problem(self, channel: str, body: bytes, headers: Mapping[str, Any] | None) -> str | None:
        """Why the entry must not be trusted, or None when its signature holds."""
        given = (headers or {}).get(SIGNATURE_HEADER)
        if not given:
            return "missing signature (not written by a Memoria service)"
        if not isinstance(given, str) or not hmac.compare_digest(
            given, self.signature(channel, body)
        ):
            return (
                f"bad signature for {channel} (forged, altered, moved from another stream, "
                "or signed with another MEMORIA_BUS_SECRET)"
            )
        return None

    @property
    def fingerprint(self) -> str:
        """Names the key without revealing it (safe to store in Redis and logs)."""
        return hmac.new(self._key, _FINGERPRINT_LABEL, hashlib.sha256).hexdigest()[:16]


def signer_for(settings: Settings) -> Signer:
    """The configured secret, else one generated once in the data directory (what the
    processes of `memoria run`, which share it, use)."""
    return Signer(load_or_create_secret(settings, settings.bus_secret, _SECRET_FILE))


async def ensure_shared_key(redis: Any, signer: Signer) -> None:
    """Refuse to start with another secret than the running services': every entry this
    process wrote would be dead-lettered by the others, and theirs by it.

    The first process to start records the key's fingerprint; after changing
    MEMORIA_BUS_SECRET on every service, delete that key (see the ADR)."""
    await redis.set(KEY_ID_KEY, signer.fingerprint, nx=True)
    recorded = await redis.get(KEY_ID_KEY)
    recorded = recorded.decode() if isinstance(recorded, bytes) else recorded
    if recorded != signer.fingerprint:
        raise SharedKeyMismatch(
            f"this service's MEMORIA_BUS_SECRET (key id {signer.fingerprint}) is not the one "
            f"the other services use (key id {recorded}). Give every service the same secret; "
            f"after changing it everywhere, stop them all and delete the Redis key {KEY_ID_KEY}."
        )

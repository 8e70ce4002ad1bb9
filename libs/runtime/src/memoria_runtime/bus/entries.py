"""Stream entries as the bus writes them, read without FastStream's subscriber machinery.

Every entry a Memoria service writes holds one field, ``__data__``: FastStream's frame of
the envelope's JSON bytes and its headers (signature, trace context, correlation id, reply
channel). The group consumers (consumer.py) and the reply inbox (replies.py) read that frame
with FastStream's own message format, so entries stay exactly what FastStream publishers,
subscribers and the thread gate's Lua script write and read.

An entry written without ``__data__`` (anyone who can reach Redis can ``XADD`` one, with
any bytes as field names and values) is read as one with no headers: the signature check
refuses it like any other forgery, and its fields are never decoded.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from faststream.redis.parser.message import MessageFormat
from pydantic import ValidationError

from memoria_contracts.events import Envelope
from memoria_runtime.bus.signing import Signer

DATA_FIELD = b"__data__"  # where FastStream stores the framed message in a stream entry


@dataclass(frozen=True, slots=True)
class Entry:
    """One stream entry, unframed."""

    entry_id: str
    data: bytes
    """The ``__data__`` field as stored (empty for an entry written without one)."""
    body: bytes
    headers: Mapping[str, Any]

    @property
    def correlation_id(self) -> str:
        return str(self.headers.get("correlation_id", ""))

    @property
    def reply_to(self) -> str:
        return str(self.headers.get("reply_to", ""))


def read_entry(
    entry_id: bytes | str, fields: Mapping[bytes, bytes], message_format: type[MessageFormat]
) -> Entry:
    """Unframe an entry. One written without ``__data__`` gets no headers, so the signature
    check refuses it ("missing signature") like any other forgery."""
    ident = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
    data = fields.get(DATA_FIELD)
    if data is None:
        return Entry(entry_id=ident, data=b"", body=b"", headers={})
    body, headers = message_format.parse(data)
    return Entry(entry_id=ident, data=data, body=body, headers=headers)


def opened(stream: str, entry: Entry, signer: Signer) -> Envelope | str:
    """The entry's envelope, or why nothing may act on it: unsigned, signed wrongly (forged,
    altered, moved from another stream) or not an envelope. Parsing starts only once the
    signature holds."""
    problem = signer.problem(stream, entry.body, entry.headers)
    if problem is not None:
        return problem
    try:
        return Envelope.model_validate_json(entry.body)
    except ValidationError as exc:
        return f"unparseable envelope: {exc.errors(include_input=False)[:3]}"

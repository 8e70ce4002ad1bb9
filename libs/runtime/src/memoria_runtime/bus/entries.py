"""Stream entries that FastStream can always frame.

FastStream reads an entry written without its ``__data__`` field (anyone who can reach Redis
can ``XADD`` one) by dumping the entry's fields as JSON. Field names or values that are not
UTF-8 make that dump raise ``UnicodeDecodeError`` inside the parser, before any handler —
and so before the reclaimer can dead-letter the entry: it stays pending in every group for
ever and is claimed again every reclaim window. Rewriting such fields as readable text
(undecodable bytes become U+FFFD) lets the entry reach the signature check, which refuses
it ("missing signature") and sends it to the dead-letter stream like any other forgery.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from faststream.message import StreamMessage

DATA_FIELD = b"__data__"  # where FastStream stores the framed message in a stream entry

Parse = Callable[[Mapping[str, Any]], Awaitable[StreamMessage[Any]]]


def _readable(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace").encode()
    return value


def readable_entry(message: Mapping[str, Any]) -> Mapping[str, Any]:
    """``message`` (a raw stream read) with fields FastStream can dump; unchanged when it
    holds FastStream's own frame or is already readable."""
    data = message.get("data")
    if not isinstance(data, Mapping) or DATA_FIELD in data:
        return message
    return {**message, "data": {_readable(k): _readable(v) for k, v in data.items()}}


async def tolerant_parser(message: Mapping[str, Any], original: Parse) -> StreamMessage[Any]:
    """The broker's ``parser=`` (create_broker): see the module's docstring. Anything but
    a stream entry without FastStream's frame passes through unchanged."""
    return await original(readable_entry(message))

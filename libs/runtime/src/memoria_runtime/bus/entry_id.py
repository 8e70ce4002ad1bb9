"""Stream entry ids, ``<milliseconds>-<sequence>``, ordered as Redis orders them: read from
a client (a resume position, checked) or from Redis itself (trim points, group positions)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

_ENTRY_ID: Final = re.compile(r"([0-9]{1,20})-([0-9]{1,20})")
_MAX_PART: Final = 2**64 - 1  # Redis keeps both parts of an entry id as unsigned 64-bit


@dataclass(frozen=True, order=True, slots=True)
class EntryId:
    """A Redis stream entry id, ``<milliseconds>-<sequence>``, ordered as Redis orders them."""

    millis: int
    sequence: int

    @classmethod
    def parse(cls, text: str | bytes) -> EntryId | None:
        """The id, or None when ``text`` is not one."""
        if isinstance(text, bytes):
            text = text.decode("ascii", errors="replace")
        match = _ENTRY_ID.fullmatch(text)
        if match is None:
            return None
        millis, sequence = int(match[1]), int(match[2])
        if millis > _MAX_PART or sequence > _MAX_PART:
            return None
        return cls(millis, sequence)

    def __str__(self) -> str:
        return f"{self.millis}-{self.sequence}"

    @classmethod
    def of(cls, raw: bytes | str) -> EntryId:
        """An id Redis gave; as Redis reads one, a missing sequence is 0 (``42`` is ``42-0``)."""
        text = raw.decode() if isinstance(raw, bytes) else raw
        millis, _, sequence = text.partition("-")
        return cls(int(millis), int(sequence or 0))

    def next(self) -> EntryId:
        """The smallest id after this one."""
        return EntryId(self.millis, self.sequence + 1)

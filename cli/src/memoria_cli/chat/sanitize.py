"""Make text from the gateway safe to put on a terminal.

Everything the server sends (answers, memories, thread titles, ids) may hold bytes a
terminal obeys: an escape sequence can move the cursor, rewrite the title bar or hide text,
and a carriage return can overwrite what was printed. Only line feeds and tabs are kept;
every other control character (C0, DEL, C1) and the Unicode bidirectional overrides, which
can make text read differently from what it is, are removed.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

_UNSAFE: Final = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f"  # C0 but \t and \n, DEL, C1 (holds the 8-bit CSI)
    "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"  # bidirectional marks and overrides
)


def clean(text: str) -> str:
    """``text`` without control characters (line feeds and tabs stay)."""
    return _UNSAFE.sub("", text)


def clean_line(text: str) -> str:
    """``text`` on one line: line breaks become spaces, for table cells and headings."""
    return " ".join(clean(text).split())


def shown(value: Any) -> str:
    """Any JSON value as clean text: strings as they are, the rest as compact JSON."""
    if isinstance(value, str):
        return clean(value)
    return clean(json.dumps(value, ensure_ascii=False, separators=(", ", ": ")))

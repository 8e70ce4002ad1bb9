"""Make text from the gateway safe to put on a terminal, and unable to disguise itself.

Everything the server sends (answers, memories, thread titles, ids) may hold characters a
terminal obeys or that show as nothing: an escape sequence can move the cursor, rewrite the
title bar or hide text, a carriage return can overwrite what was printed, and a direction
override makes "my pin is \\u202e1234" read "my pin is 4321". Line feeds and tabs stay; every
other control character (C0, DEL, C1) and every invisible format or direction character is
shown as its marked code point (``⟨U+202E⟩``), as the web page shows it, so that what is
printed is what is stored and no byte of it drives the terminal.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

from memoria_contracts.text import mark, marked

_CONTROL: Final = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f"  # C0 but \t and \n, DEL, C1 (holds the 8-bit CSI)
    "\u061c]"  # the Arabic letter mark, a direction mark like those marked() shows
)


def clean(text: str) -> str:
    """``text`` with its control and invisible characters shown as marked code points
    (line feeds and tabs stay)."""
    return marked(_CONTROL.sub(lambda found: mark(found.group()), text))


def clean_line(text: str) -> str:
    """``text`` on one line: line breaks become spaces, for table cells and headings."""
    return " ".join(clean(text).split())


def shown(value: Any) -> str:
    """Any JSON value as clean text: strings as they are, the rest as compact JSON."""
    if isinstance(value, str):
        return clean(value)
    return clean(json.dumps(value, ensure_ascii=False, separators=(", ", ": ")))

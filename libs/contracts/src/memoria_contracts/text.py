"""Text shown in one line (a memory's excerpt, a quote in a reply, a line of history), and
text as the same fact however it was typed."""

from __future__ import annotations

import json
import unicodedata

ELLIPSIS = "…"
_END_PUNCTUATION = ".!;,"


def as_text(content: object) -> str:
    """Text as it is; anything else (a memory's JSON content) as compact JSON."""
    return content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)


def one_line(content: object, limit: int) -> str:
    """``content`` with its whitespace runs made single spaces, cut to at most ``limit``
    characters; a cut ends in an ellipsis."""
    flat = " ".join(as_text(content).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + ELLIPSIS


def saying(text: str) -> str:
    """What ``text`` says, as two typings of the same fact compare equal: Unicode form, case,
    spacing and end punctuation aside ("I live in Berlin." and "i live in  berlin"). The
    memory service keys a memory's content by it; the offline planner compares with it."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(folded.split()).rstrip(_END_PUNCTUATION).strip()

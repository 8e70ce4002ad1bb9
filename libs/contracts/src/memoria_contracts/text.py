"""Text shown in one line: a memory's excerpt, a quote in a reply, a line of history."""

from __future__ import annotations

import json

ELLIPSIS = "…"


def as_text(content: object) -> str:
    """Text as it is; anything else (a memory's JSON content) as compact JSON."""
    return content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)


def one_line(content: object, limit: int) -> str:
    """``content`` with its whitespace runs made single spaces, cut to at most ``limit``
    characters; a cut ends in an ellipsis."""
    flat = " ".join(as_text(content).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + ELLIPSIS

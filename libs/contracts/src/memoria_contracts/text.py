"""Text shown in one line (a memory's excerpt, a quote in a reply, a line of history), and
text as the same fact however it was typed."""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Annotated, Final

from pydantic import AfterValidator
from pydantic_core import PydanticCustomError

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


# -- text people type --------------------------------------------------------------------------

_CONTROL: Final = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]|\r(?!\n)")
"""Control characters no text field takes: C0 and DEL, except tab and newline (a carriage
return only as the first half of a CRLF newline). NUL ends strings in C; the others move a
terminal's cursor, clear lines or ring bells, so a stored one can rewrite what someone reads."""

CONTROL_CHARACTER: Final = "control_character"
"""The pydantic error type of :data:`PlainText` (its context names ``code_point``)."""


def code_point(character: str) -> str:
    return f"U+{ord(character):04X}"


def control_in(text: str) -> str | None:
    """The first control character ``text`` may not hold, or None."""
    found = _CONTROL.search(text)
    return None if found is None else found.group()[0]


def refuse_controls(text: str) -> str:
    """``text`` unchanged, or a ``control_character`` validation error."""
    found = control_in(text)
    if found is not None:
        raise PydanticCustomError(
            CONTROL_CHARACTER,
            "text may not hold the control character {code_point} (only tab and newline)",
            {"code_point": code_point(found)},
        )
    return text


NO_CONTROLS: Final = AfterValidator(refuse_controls)
PlainText = Annotated[str, NO_CONTROLS]
"""Text a person typed: any Unicode but the control characters of :func:`control_in`."""

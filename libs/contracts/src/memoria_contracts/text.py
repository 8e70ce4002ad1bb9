"""Text shown in one line (a memory's excerpt, a quote in a reply, a line of history), and
text as the same fact however it was typed."""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated, Any, Final

import annotated_types
from pydantic import AfterValidator, Field, StringConstraints
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
CONTROL_FREE_PATTERN: Final = r"^(?:[^\x00-\x08\x0b\x0c\x0e-\x1f\x7f\r]|\r\n)*$"
"""What :func:`control_in` allows, as JSON Schema says it (documentation: the check is
:data:`NO_CONTROLS`, which also names the character it refuses)."""
CONTROL_FREE: Final = Field(json_schema_extra={"pattern": CONTROL_FREE_PATTERN})
NOT_BLANK: Final = Field(
    json_schema_extra={"pattern": r"^(?=[\s\S]*\S)" + CONTROL_FREE_PATTERN.removeprefix("^")}
)
"""As :data:`CONTROL_FREE`, for text whose surrounding blanks are stripped and that may not
be empty: something other than blanks."""
PlainText = Annotated[str, NO_CONTROLS, CONTROL_FREE]
"""Text a person typed: any Unicode but the control characters of :func:`control_in`."""


@dataclass(frozen=True)
class TrimmedText(annotated_types.GroupedMetadata):
    """``Annotated[str, TrimmedText(n)]``: text stripped of its surrounding blanks, then 1 to
    ``max_length`` characters, not only blanks, without control characters."""

    max_length: int

    def __iter__(self) -> Iterator[Any]:
        yield StringConstraints(strip_whitespace=True, min_length=1, max_length=self.max_length)
        yield NO_CONTROLS
        yield NOT_BLANK


# -- text that cannot disguise itself --------------------------------------------------------

INVISIBLE: Final = frozenset(
    chr(code)
    for first, last in ((0x200B, 0x200F), (0x202A, 0x202E), (0x2066, 0x2069), (0xFEFF, 0xFEFF))
    for code in range(first, last + 1)
)
"""Format and direction-control characters that show as nothing: zero-width spaces and
joiners, direction marks, embeddings, overrides and isolates, the BOM. Stored as sent; every
surface that shows text to people shows each as a marked code point (:func:`marked`), so
that "my pin is \\u202e1234" cannot read "my pin is 4321"."""
ZERO_WIDTH_JOINER: Final = "\u200d"
VARIATION_SELECTOR_16: Final = "\ufe0f"
_EMOJI_RANGES: Final = (
    (0x00A9, 0x00A9),
    (0x00AE, 0x00AE),
    (0x203C, 0x203C),
    (0x2049, 0x2049),
    (0x2122, 0x2122),
    (0x2139, 0x2139),
    (0x2194, 0x21AA),
    (0x231A, 0x23FF),
    (0x24C2, 0x24C2),
    (0x25AA, 0x25FE),
    (0x2600, 0x27BF),
    (0x2934, 0x2935),
    (0x2B05, 0x2B55),
    (0x3030, 0x3030),
    (0x303D, 0x303D),
    (0x3297, 0x3299),
    (0x1F000, 0x1FAFF),
)
_MARKED: Final = re.compile("[\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")
MARK_OPEN: Final = "⟨"
MARK_CLOSE: Final = "⟩"


def mark(character: str) -> str:
    """How a character that would not show is shown: ``⟨U+202E⟩``."""
    return f"{MARK_OPEN}{code_point(character)}{MARK_CLOSE}"


def _pictographic(character: str) -> bool:
    code = ord(character)
    return any(first <= code <= last for first, last in _EMOJI_RANGES)


def joins_emoji(text: str, index: int) -> bool:
    """Whether the zero-width joiner at ``index`` joins two emoji (a family, a profession,
    a flag): a part of how the emoji is drawn, not a character that hides."""
    before = index - 1
    if before >= 0 and text[before] == VARIATION_SELECTOR_16:
        before -= 1
    after = index + 1
    return (
        before >= 0
        and after < len(text)
        and _pictographic(text[before])
        and (_pictographic(text[after]))
    )


def marked(text: str) -> str:
    """``text`` with every :data:`INVISIBLE` character shown as its marked code point, but a
    zero-width joiner inside an emoji sequence."""
    if _MARKED.search(text) is None:
        return text
    return "".join(
        mark(character)
        if character in INVISIBLE
        and not (character == ZERO_WIDTH_JOINER and joins_emoji(text, index))
        else character
        for index, character in enumerate(text)
    )

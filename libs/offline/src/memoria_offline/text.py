"""Text helpers for the rules: match without accents or case, keep the user's own words.

Rules run on a *folded* copy of the message (lower case, no accents, single spaces), but what
gets stored must be what the user wrote, so :class:`Folded` maps every folded position back
to the original text.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

_SPACES = re.compile(r"\s+")
_EDGES = re.compile(r"^[\s,:;.!-]+|[\s.!;,]+$")
# Phones type "I’m" with a typographic apostrophe; the rules are written with "'".
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "`": "'"})


def straight_apostrophes(text: str) -> str:
    return text.translate(_APOSTROPHES)


def fold_char(ch: str) -> str:
    ch = straight_apostrophes(ch)
    decomposed = unicodedata.normalize("NFKD", ch)
    return "".join(c for c in decomposed if not unicodedata.combining(c)).lower()


@dataclass(frozen=True)
class Folded:
    original: str
    text: str
    _origin: tuple[int, ...]

    @classmethod
    def of(cls, original: str) -> Folded:
        chars: list[str] = []
        origin: list[int] = []
        for index, ch in enumerate(original):
            if ch.isspace():
                if chars and chars[-1] != " ":
                    chars.append(" ")
                    origin.append(index)
                continue
            for folded in fold_char(ch):
                chars.append(folded)
                origin.append(index)
        while chars and chars[-1] == " ":
            chars.pop()
            origin.pop()
        return cls(original, "".join(chars), tuple(origin))

    def original_between(self, start: int, end: int) -> str:
        """The user's text from the character that became ``start`` up to the one that
        became ``end``."""
        if end >= len(self._origin):
            return self.original_from(start)
        return self.original_from(start)[: self._origin[end] - self._origin[start]]

    def original_from(self, folded_index: int) -> str:
        """The user's text from the character that became ``folded_index``."""
        if folded_index >= len(self._origin):
            return ""
        return self.original[self._origin[folded_index] :]


def fold(text: str) -> str:
    return Folded.of(text).text


def strip_edges(text: str) -> str:
    """Single spaces, no leading/trailing punctuation; the letters as the user typed them."""
    return _EDGES.sub("", _SPACES.sub(" ", text).strip())


def tidy(text: str) -> str:
    """A statement as it will be stored: :func:`strip_edges`, first letter capitalised."""
    text = strip_edges(text)
    return text[:1].upper() + text[1:] if text else text


def is_question(text: str) -> bool:
    return text.rstrip().endswith("?")

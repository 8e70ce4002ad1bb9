"""Folding: text compared without case or accents, the user's own words kept.

Rules run on a *folded* copy of a message (case folded, accents removed, typographic
apostrophes made straight, whitespace runs as one space, no space at the ends): "Apague TODAS
as minhas memórias" and "apague todas as minhas memorias" are one text, and so are "ação" and
"acao" in the lexical index. What gets stored must be what the user wrote, so
:class:`Folded` maps every folded position back to the original text.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Final

_SPACES: Final = re.compile(r"\s+")
_EDGES: Final = re.compile(r"^[\s,:;.!-]+|[\s.!;,]+$")
# Phones type "I’m" with a typographic apostrophe; the rules are written with "'".
_APOSTROPHES: Final = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "`": "'"})


def straight_apostrophes(text: str) -> str:
    return text.translate(_APOSTROPHES)


def fold_letters(text: str) -> str:
    """Case folded, accents dropped, apostrophes straight; spacing left as it is. Character
    by character: one may fold to none (a combining accent) or to more than one ("ß", "ss")."""
    decomposed = unicodedata.normalize("NFKD", straight_apostrophes(text).casefold())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def fold(text: str) -> str:
    """``text`` folded; the same as ``Folded.of(text).text``, without the position map."""
    return _SPACES.sub(" ", fold_letters(text)).strip()


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
            for folded in fold_letters(ch):
                space = folded.isspace()
                if space and (not chars or chars[-1] == " "):
                    continue
                chars.append(" " if space else folded)
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


def strip_edges(text: str) -> str:
    """Single spaces, no leading/trailing punctuation; the letters as the user typed them."""
    return _EDGES.sub("", _SPACES.sub(" ", text).strip())


def tidy(text: str) -> str:
    """A statement as it will be stored: :func:`strip_edges`, first letter capitalised."""
    text = strip_edges(text)
    return text[:1].upper() + text[1:] if text else text


def is_question(text: str) -> bool:
    return text.rstrip().endswith("?")

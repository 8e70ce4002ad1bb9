"""Memories told back to the user as an answer: in the second person ("You live in Recife"),
with no quotation marks around them unless they hold something to repeat exactly (a code, a
number, a password), one or two as a sentence and more as a short list."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Final

from memoria_contracts.text import as_text, one_line
from memoria_offline.person import Language, addressed
from memoria_text.folding import fold
from memoria_text.i18n import language_of

MAX_CHARS: Final = 240
MAX_LISTED: Final = 10
SENTENCE_ITEMS: Final = 2
"""One or two memories read as one sentence; more as a list."""

# What is repeated exactly, in quotation marks: a token mixing letters and digits ("AB1234",
# "sunflower42"), a long number that is no date or year, or what a password, code or PIN
# "is" ("my wifi password is open sesame").
_CODE: Final = re.compile(
    r"(?<![\w\"'])(?=[\w-]*\d)(?=[\w-]*[A-Za-z])[\w-]{4,}(?![\w\"'])"
    r"|(?<![\w\"'/:.-])\+?\d[\d ]{4,}\d(?![\w\"'/:.-])"
)
_DATE_LIKE: Final = re.compile(r"^\d{4}(?:-\d{2}){0,2}$|^\d{1,2}h\d{0,2}$|^\d+(?:st|nd|rd|th)$")
_SECRET: Final = re.compile(
    r"\b(?:password|passcode|pin|code|senha|codigo|pin)\b[^:]*?(?:\bis\b|\be\b|:)\s+(?P<value>.+)$"
)
_NOT_NAMES_TEXT: Final = (
    "you your yours you're you've you'd you'll the a an voce seu sua seus suas o a os as um uma "
    "ontem hoje yesterday today tomorrow last next every on in at"
)
_NOT_NAMES: Final = frozenset(_NOT_NAMES_TEXT.split())
"""First words that are capitalised only because they start a sentence."""
_AND: Final = {"en": "and", "pt": "e"}


def _language(text: str, fallback: Language) -> Language:
    return language_of(text) or fallback


def _verbatim(text: str) -> str:
    """``text`` with what is to be repeated exactly in quotation marks."""
    folded = fold(text)
    secret = _SECRET.search(folded)
    if secret is not None and len(folded) == len(text):
        start = secret.start("value")
        value = text[start:].rstrip(" .!")
        return f'{text[:start]}"{value}"{text[start + len(value) :]}'

    def quoted(match: re.Match[str]) -> str:
        token = match.group()
        return token if _DATE_LIKE.match(token) else f'"{token}"'

    return _CODE.sub(quoted, text)


def told(content: Any, language: Language) -> str:
    """One memory as said back to its author, without its final full stop."""
    if not isinstance(content, str):
        return f'"{one_line(as_text(content), MAX_CHARS)}"'  # structured: shown as it is
    line = one_line(content, MAX_CHARS).rstrip(" .")
    return _verbatim(addressed(line, _language(line, language)))


def mid_sentence(text: str) -> str:
    """``text`` to follow other words: its first letter lower case unless it starts a
    name."""
    first = text.split(" ", 1)[0]
    return text[:1].lower() + text[1:] if fold(first) in _NOT_NAMES else text


def sentence(contents: Sequence[Any], language: Language) -> str:
    """Memories as one sentence ("You live in Recife, and your sister plays the oboe.")."""
    said = [told(content, language) for content in contents]
    if not said:
        return ""
    rest = [mid_sentence(item) for item in said[1:]]
    if rest:
        rest[-1] = f"{_AND[language]} {rest[-1]}"
    joined = ", ".join([said[0], *rest])
    return joined + ("" if joined.endswith(("?", "!")) else ".")


def bullet_list(items: Sequence[str]) -> str:
    return "\n".join(f"- {item}" for item in items[:MAX_LISTED])


def listed(contents: Sequence[Any], language: Language) -> list[str]:
    return [told(content, language) for content in contents]

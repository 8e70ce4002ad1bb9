"""A correction applied to the memory it corrects, keeping what it does not correct.

"Actually, my sister plays the oboe" against "My sister Ingrid plays the bassoon" gives "My
sister Ingrid plays the oboe"; "I drink tea now" against "I drink coffee every morning"
gives "I drink tea every morning". The two sentences are aligned word by word
(``difflib``): where they agree, the words stay (as the correction types them); what the
correction says in place of the memory's words replaces them; a detail only the memory has
(a name between two agreeing words) stays; a time or frequency the correction leaves out
("every morning", "todas as manhãs") stays after its new value. A correction that shares no
content word with the memory's start is a new fact, and replaces the memory whole ("I moved
to Hamburg" for "I live in Berlin")."""

from __future__ import annotations

import re
from difflib import SequenceMatcher
from typing import Final

from memoria_offline.facts import content_word
from memoria_text.folding import fold, tidy

_TOKEN: Final = re.compile(r"[\w’'-]+|[^\w\s]")
_ATTACHED: Final = frozenset(",.;:!?)")
# Words that say the fact changed, not what it is: dropped before aligning.
_CHANGE_MARKS: Final = re.compile(
    r"^(?:now|nowadays|these days|agora|hoje em dia|atualmente)\b[\s,]*|"
    r"[\s,]*\b(?:now|nowadays|these days|instead|agora|hoje em dia|atualmente)[\s.!]*$",
    re.IGNORECASE,
)
# Where a time or frequency starts, in folded words: kept from the memory when the
# correction gives none of its own.
_WHEN: Final = re.compile(
    r"^(?:every|each|daily|weekly|monthly|twice|once|before|after|during|"
    r"on (?:[a-z]+days?|weekends?|the weekend|weekdays)|at (?:night|weekends?|the weekend)|"
    r"in the (?:morning|afternoon|evening)s?|todo|toda|todos|todas|cada|diariamente|"
    r"semanalmente|durante|antes|depois|aos|as|nas|nos|de (?:manha|tarde|noite)|a noite)\b"
)


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text)


def _joined(tokens: list[str]) -> str:
    text = ""
    for token in tokens:
        glued = token in _ATTACHED or not text or text.endswith("(")
        text += token if glued else f" {token}"
    return text


def _when_start(words: list[str]) -> int | None:
    """Where a time or frequency starts in ``words`` (folded), after its first word."""
    for index in range(1, len(words)):
        if _WHEN.match(" ".join(words[index:])):
            return index
    return None


def without_change_marks(statement: str) -> str:
    return tidy(_CHANGE_MARKS.sub("", statement)) or statement


def kept_details(memory: str, correction: str) -> str:
    """``memory`` corrected by ``correction``, what the correction does not touch kept."""
    new = _tokens(without_change_marks(correction))
    old = _tokens(memory)
    old_words = [fold(t) for t in old]
    new_words = [fold(t) for t in new]
    blocks = SequenceMatcher(None, old_words, new_words, autojunk=False).get_opcodes()
    if not blocks or blocks[0][0] != "equal":
        return without_change_marks(correction)
    agreed = [w for tag, i1, i2, _, _ in blocks if tag == "equal" for w in old_words[i1:i2]]
    if not any(content_word(word) for word in agreed):
        return without_change_marks(correction)
    merged: list[str] = []
    for tag, i1, i2, j1, j2 in blocks:
        if tag == "equal":
            merged += new[j1:j2]  # as the user typed it now ("São", not "Sao")
        elif tag == "insert":
            merged += new[j1:j2]
        elif tag == "delete":
            last = i2 == len(old)
            when = _when_start(["", *old_words[i1:i2]])
            if not last:
                merged += old[i1:i2]  # a detail between agreeing words ("Ingrid")
            elif when is not None:
                merged += old[i1 + when - 1 : i2]
        else:  # replace
            merged += new[j1:j2]
            when = _when_start(old_words[i1:i2])
            if when is not None and _when_start(new_words[j1:j2]) is None:
                merged += old[i1 + when : i2]
    return tidy(_joined(merged).rstrip(" ."))

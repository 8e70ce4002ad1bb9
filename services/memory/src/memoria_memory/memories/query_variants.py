"""Rule-based rewrites of a search query, searched beside it (no model involved).

A memory is stored as something said ("I don't like mushrooms"), a search usually asks a
question ("What food do I dislike?"). The embedder places a question nearer other
questions than the statement that answers it, and BM25 counts the question's own
vocabulary ("kind", "many", "often") as evidence. So each query also searches as:

* its **statement form**: the question word and its auxiliary dropped, the asked phrase moved
  behind the clause ("What food do I dislike?" → "I dislike food"; "Qual é a minha comida
  favorita?" → "a minha comida favorita");
* its **key terms**: the words left once stop words, question words, auxiliaries and the
  question's generic nouns are dropped ("How many times has Elise been to Turks and Caicos?" →
  "Elise Turks Caicos").

English and Portuguese. A query that is no question yields no statement form; a variant equal
to one already listed is left out, so a plain keyword query searches once.
"""

from __future__ import annotations

import re
from typing import Final

from memoria_memory.vectors.analysis import STOP_WORDS, listed
from memoria_text.folding import fold

# Question words, longest first, so "how many" wins over "how" and "o que" over "que".
_EN_WH: Final = (
    r"what\s+kind\s+of|what\s+type\s+of|what\s+sort\s+of|how\s+many|how\s+much|how\s+often"
    r"|how\s+long|how|what|which|where|when|who|whom|whose|why"
)
_EN_AUX: Final = (
    r"do|does|did|is|are|was|were|has|have|had|can|could|will|would|should|shall|may|might"
    r"|am|don't|doesn't|didn't|isn't|aren't|wasn't|weren't"
)
# "What food do I dislike": group 1 the question word, 2 the asked noun phrase (up to the
# auxiliary, at most three words), 3 the auxiliary, 4 the clause.
_EN_QUESTION: Final = re.compile(
    rf"^(?:(?:{_EN_WH})\b(?:\s+((?:[\w'-]+\s+){{0,2}}?[\w'-]+))??\s+)?({_EN_AUX})\s+(.+)$",
    re.IGNORECASE,
)
# "Where Kate works?", "Who visited Paris?": a question word with no auxiliary after it.
_EN_BARE: Final = re.compile(rf"^(?:{_EN_WH})\s+(.+)$", re.IGNORECASE)

_PT_WH: Final = (
    r"o\s+que|por\s+que|porque|pra\s+que|para\s+que|qual|quais|que|onde|aonde|quando|quem"
    r"|como|quantos|quantas|quanto|quanta"
)
_PT_VERB: Final = r"é|e|são|sao|foi|foram|era|eram|está|esta|estão|estao|fica|ficam"
_PT_QUESTION: Final = re.compile(
    rf"^(?:{_PT_WH})\b(?:\s+(?:{_PT_VERB})\b)?\s*(.+)$",
    re.IGNORECASE,
)

# Words that shape a question but say nothing about the memory that answers it (folded).
_GENERIC: Final = listed(
    """
    what which where when who whom whose why how kind type sort many much often long
    do does did is are was were has have had can could will would should shall may might am
    don doesn didn isn aren wasn weren t s
    time times thing things something anything
    o que qual quais onde aonde quando quem como quanto quantos quantas quanta porque por
    pra para tipo tipos coisa coisas vez vezes e sao foi foram era eram esta estao fica ficam
    """
)
_WORD: Final = re.compile(r"[^\W_]+(?:['’-][^\W_]+)*")
_TRAILING: Final = re.compile(r"[\s?¿!.]+$")
_LEADING: Final = re.compile(r"^[\s¿¡]+")


def _clean(query: str) -> str:
    return _LEADING.sub("", _TRAILING.sub("", " ".join(query.split())))


def statement(query: str) -> str | None:
    """The question as a statement, or None when it reads as no question."""
    text = _clean(query)
    if not text:
        return None
    if match := _EN_QUESTION.match(text):
        asked, _, clause = match.groups()
        asked = " ".join(w for w in (asked or "").split() if not _generic(w))
        return f"{clause} {asked}" if asked else clause
    if match := _PT_QUESTION.match(text):
        return match.group(1)
    if match := _EN_BARE.match(text):
        return match.group(1)
    return None


def _generic(word: str) -> bool:
    folded = fold(word).split("'")[0]
    return folded in _GENERIC or folded in STOP_WORDS


def key_terms(query: str) -> str:
    """The query's words without stop words, question words, auxiliaries and generic
    nouns."""
    return " ".join(word for word in _WORD.findall(query) if not _generic(word))


def variants(query: str) -> list[str]:
    """The query first, then its rewrites; none empty, none repeated (case aside)."""
    found: list[str] = []
    seen: set[str] = set()
    for text in (query, statement(query), key_terms(query)):
        if not text or not text.strip():
            continue
        key = fold(_clean(text))
        if key and key not in seen:
            seen.add(key)
            found.append(text)
    return found

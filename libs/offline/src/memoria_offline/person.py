"""A stored first-person sentence told back to its author: "I live in Recife" → "You live in
Recife", "Moro em Lisboa" → "Você mora em Lisboa". Rules only, English and Portuguese.

English needs only its pronouns and the two verbs that agree with "I" (am, was). Portuguese
conjugates: a first-person verb becomes the third person that "você" takes ("moro" →
"mora", "mudei" → "mudou", "comi" → "comeu"), and a verb said without its subject gets
"você" before it, since "mora em Lisboa" alone would be about someone else. A verb is only
changed where a verb stands (first in its clause, after "eu", a negation or a habit word),
so "Meu jogo favorito" keeps its noun.
"""

from __future__ import annotations

import re
from typing import Final, Literal

from memoria_offline import lexicon
from memoria_text.folding import fold

Language = Literal["en", "pt"]

_TOKEN: Final = re.compile(r"[\w’'-]+|[^\w\s]+|\s+")
_CLAUSE_END: Final = frozenset({",", ";", ":", ".", "!", "?", "—", "-", "(", ")"})

_EN_WORDS: Final = {
    "i": "you",
    "me": "you",
    "my": "your",
    "mine": "yours",
    "myself": "yourself",
    "we": "you",
    "us": "you",
    "our": "your",
    "ours": "yours",
    "ourselves": "yourselves",
    "i'm": "you're",
    "i've": "you've",
    "i'd": "you'd",
    "i'll": "you'll",
    "we're": "you're",
    "we've": "you've",
    "we'd": "you'd",
    "we'll": "you'll",
}
_EN_AGREEING: Final = {"am": "are", "was": "were", "wasn't": "weren't"}


def addressed(text: str, language: Language) -> str:
    """``text`` (something the user said of themselves) as said back to them."""
    tokens = _TOKEN.findall(text)
    changed = _english(tokens) if language == "en" else _portuguese(tokens)
    joined = "".join(changed)
    return joined[:1].upper() + joined[1:] if text[:1].isupper() else joined


def _cased(word: str, like: str) -> str:
    if like.isupper() and len(like) > 1:
        return word.upper()
    return word[:1].upper() + word[1:] if like[:1].isupper() else word


def _words_before(tokens: list[str], index: int) -> list[str]:
    return [t for t in tokens[:index] if t.strip() and not _is_punctuation(t)]


def _is_punctuation(token: str) -> bool:
    return not any(ch.isalnum() for ch in token)


def _english(tokens: list[str]) -> list[str]:
    out: list[str] = []
    after_i = False
    for token in tokens:
        key = fold(token)
        if key in _EN_WORDS:
            word = _EN_WORDS[key]
            # "I" is capitalised anywhere; "you" only where "I" started the sentence.
            at_start = not "".join(out).strip() or "".join(out).rstrip()[-1:] in ".!?"
            out.append(_cased(word, token) if at_start or key[:1] != "i" else word)
            after_i = key in ("i", "we")
            continue
        if after_i and key in _EN_AGREEING:
            out.append(_cased(_EN_AGREEING[key], token))
            after_i = False
            continue
        if token.strip():
            after_i = after_i and key in ("also", "still", "really", "never", "always", "just")
        out.append(token)
    return out


# -- Portuguese -----------------------------------------------------------------------------

_PT_WORDS: Final = {
    "eu": "você",
    "meu": "seu",
    "minha": "sua",
    "meus": "seus",
    "minhas": "suas",
    "mim": "você",
    "comigo": "com você",
    "nosso": "seu",
    "nossa": "sua",
    "nossos": "seus",
    "nossas": "suas",
}
_PT_BEFORE_VERB_TEXT: Final = (
    "eu nao nunca sempre tambem ja ainda so geralmente normalmente raramente quase me costumo"
)
_PT_BEFORE_VERB: Final = frozenset(_PT_BEFORE_VERB_TEXT.split())
"""Words after which a first-person verb stands (folded): its subject, a negation, a habit."""
_PT_TIME_WORDS_TEXT: Final = (
    "ontem hoje amanha anteontem agora depois antes semana semanas passada passado ano anos "
    "mes meses dia dias vez vezes manha manhas tarde tardes noite noites fim fins segunda "
    "segundas terca tercas quarta quartas quinta quintas sexta sextas sabado sabados domingo "
    "domingos feira feiras ultima ultimo ultimas ultimos proxima proximo esta este essa esse "
    "toda todo todas todos cada de da do a as aos na no nas nos em num numa la aqui entao "
    "recentemente finalmente"
)
_PT_TIME_WORDS: Final = frozenset(_PT_TIME_WORDS_TEXT.split())
"""Words of a time or place said before the verb ("Ontem fui", "Às sextas jogo", "Em Lisboa
trabalho"): the verb after them still stands first in its clause."""
_PT_NOT_VERBS_TEXT: Final = (
    "meu minha meus minhas seu sua o a os as um uma uns umas do da dos das no na nos nas "
    "ao aos pelo pela de em por para com sem que e ou mas como quando onde se"
)
_PT_NOT_VERBS: Final = frozenset(_PT_NOT_VERBS_TEXT.split())


def first_person_verb(word: str) -> str | None:
    """The third person singular of a first-person singular verb, or None when ``word``
    is not one the rules know."""
    key = fold(word)
    irregular = lexicon.PT_IRREGULAR_VERBS.get(key)
    if irregular is not None:
        return irregular
    if len(key) < 3:
        return None
    if key.endswith("o"):  # present: moro → mora, bebo → bebe, parto → parte
        stem = word[:-1]
        if fold(stem) + "er" in lexicon.PT_ER_VERBS or fold(stem) + "ir" in lexicon.PT_IR_VERBS:
            return stem + "e"
        if fold(stem) + "ar" in lexicon.PT_AR_VERBS:
            return stem + "a"
        return None
    if key.endswith("ei") and fold(word[:-2]) + "ar" in lexicon.PT_AR_VERBS:
        stem = word[:-2]  # preterite: mudei → mudou, comecei → começou, fiquei → ficou
        if fold(stem).endswith("c"):
            stem = stem[:-1] + "ç"
        elif fold(stem).endswith("gu"):
            stem = stem[:-1]
        elif fold(stem).endswith("qu"):
            stem = stem[:-2] + "c"
        return stem + "ou"
    if key.endswith("i"):  # comi → comeu, parti → partiu
        stem = word[:-1]
        if fold(stem) + "er" in lexicon.PT_ER_VERBS:
            return stem + "eu"
        if fold(stem) + "ir" in lexicon.PT_IR_VERBS:
            return stem + "iu"
    return None


def _portuguese(tokens: list[str]) -> list[str]:
    out: list[str] = []
    clause_start = True  # nothing but a subject, a negation or a habit word yet
    subject_said = False
    for token in tokens:
        if not token.strip():
            out.append(token)
            continue
        if _is_punctuation(token):
            out.append(token)
            if token.strip()[:1] in _CLAUSE_END:
                clause_start, subject_said = True, False
            continue
        key = fold(token)
        if key == "me" and clause_start:
            out.append(_cased("se", token))  # "me mudei" → "se mudou": the verb follows
            continue
        if key in _PT_WORDS:
            out.append(_cased(_PT_WORDS[key], token))
            if key == "eu":
                subject_said = True
            elif clause_start:
                clause_start = False  # "Minha irmã mora ...": a subject of its own
            continue
        if clause_start and key not in _PT_NOT_VERBS:
            verb = first_person_verb(token)
            if verb is not None:
                out.append(verb)
                if not subject_said:
                    _add_subject(out)  # "Moro em Lisboa" is "Você mora em Lisboa"
                clause_start, subject_said = False, False
                continue
        out.append(token)
        if key in ("e", "mas", "que", "ou", "quando", "porque"):
            clause_start, subject_said = True, False
        elif key not in _PT_BEFORE_VERB and not (clause_start and _in_lead(key, token, out)):
            clause_start = False
    return out


def _in_lead(key: str, token: str, out: list[str]) -> bool:
    """Whether ``token`` may belong to a time or place said before the verb: a time word, or
    a name after one of the lead's prepositions ("Em Lisboa")."""
    if key in _PT_TIME_WORDS:
        return True
    words = [fold(t) for t in out[:-1] if t.strip() and not _is_punctuation(t)]
    return token[:1].isupper() and bool(words) and words[-1] in ("em", "no", "na", "de", "para")


def _add_subject(out: list[str]) -> None:
    """Put "você" before the verb just added to ``out`` and the negation or habit words
    that lead to it ("não moro" → "você não mora"), taking over their capital."""
    lead = len(out) - 1
    for back in range(len(out) - 2, -1, -1):
        token = out[back]
        if not token.strip():
            continue
        if _is_punctuation(token) or fold(token) not in (_PT_BEFORE_VERB | {"se"}):
            break
        lead = back
    first = out[lead]
    capital = first[:1].isupper()
    out[lead] = first[:1].lower() + first[1:] if capital else first
    out.insert(lead, "Você " if capital else "você ")

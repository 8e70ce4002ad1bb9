"""A statement turned into a memory without a model: its type from cue words, and a few
bindings (search keys) a later question will match.

Bindings: the statement itself (the embedder matches meaning, so the full sentence is the
best single key), its content words, and — when a known topic shows — a short topic key in
both languages ("allergy" / "alergia"): cross-language matches are the weak spot of small
multilingual embedders (docs/relevance.md), and a Portuguese fact is often asked about in
English later, or the other way round.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Final, Literal, TypeVar

from memoria_offline import lexicon
from memoria_text.folding import Folded, fold, straight_apostrophes, strip_edges, tidy

T = TypeVar("T")
MemoryType = Literal["user_profile", "preference", "goal", "constraint", "critical_info"]

MAX_BINDINGS: Final = 5
MAX_KEYWORDS: Final = 6
MAX_BINDING_CHARS: Final = 300
STEM_CHARS: Final = 5

# First match wins: the most specific types first.
_TYPE_CUES: Final[tuple[tuple[MemoryType, re.Pattern[str]], ...]] = (
    (
        "critical_info",
        re.compile(
            r"\b(?:number|code|password|pin|booking|reservation|ticket|protocol|appointment|"
            r"flight|confirmation|numero|codigo|senha|reserva|protocolo|consulta|voo|"
            r"passaporte|passport)\b"
        ),
    ),
    (
        "constraint",
        re.compile(
            r"\b(?:allergic|allergy|intolerant|intolerance|can'?t|cannot|must not|never|"
            r"budget|don'?t eat|don'?t drink|avoid|alergic[oa]|alergia|intolerante|"
            r"intolerancia|nao posso|nunca|orcamento|nao como|nao bebo|evito|evitar)\b"
        ),
    ),
    (
        "goal",
        re.compile(
            r"\b(?:want to|plan|planning|goal|going to|hope to|trying to|dream|quero|"
            r"planejando|pretendo|objetivo|meta|vou|tentando|sonho)\b"
        ),
    ),
    (
        "preference",
        re.compile(
            r"\b(?:like|love|prefer|favou?rite|enjoy|hate|dislike|fan of|i'?m into|fa de|gosto|"
            r"adoro|prefiro|favorit[oa]|curto|odeio|detesto|amo)\b"
        ),
    ),
)

# An occupation the user names as theirs ("I'm a software engineer", "sou professora de
# matemática") is the job topic: "where do I work?" or "qual é a minha profissão?" asks about
# it without sharing a word. Only after "I'm a" / "sou" / "work as": "my wife is a nurse" is
# not the user's job.
_OCCUPATION: Final = (
    r"(?:i'?m|i am|i work as|i'?ve been|sou|trabalho como|atuo como) "
    r"(?:an? |um |uma )?(?:[a-z]+ ){0,2}?"
    rf"(?:{'|'.join(lexicon.OCCUPATIONS)})"
)

# Topic keys, in both languages, for facts people ask about most: (cue words, EN, PT).
_TOPIC_CUES: Final[tuple[tuple[str, str, str], ...]] = (
    (r"allerg\w*|alerg\w*", "allergy", "alergia"),
    (r"my name|i'?m called|meu nome|me chamo", "user's name", "meu nome"),
    (
        r"live|living (?:in|at|with)|moved|move|moro|morando|home|mudei|mudou|mudamos|mudanca",
        "where I live",
        "onde eu moro",
    ),
    (
        r"work\w*|job|profession|career|occupation|for a living|trabalh\w*|emprego|profissao|"
        r"carreira|ocupacao|what do i do(?=\W*$)|o que (?:eu )?faco(?=\W*$)|i teach|"
        r"i run (?:a|an|my) (?:[a-z]+ )?(?:business|company|shop|store|restaurant|cafe|bar|"
        r"bakery|startup|studio|clinic|practice)|dou aulas?|"
        rf"{_OCCUPATION}",
        "my job",
        "meu trabalho",
    ),
    (
        r"birthday|born|turns [0-9]+|aniversario|nasci|faz [0-9]+ anos|fara [0-9]+ anos",
        "birthday",
        "aniversario",
    ),
    (r"password|senha", "password", "senha"),
    (r"age|how old|years old|i'?m [0-9]+|idade|quantos anos|tenho [0-9]+ anos", "age", "idade"),
    (r"dog|cat|pet|cachorr[oa]|gat[oa]", "my pet", "meu animal de estimacao"),
    (
        r"wife|husband|son|daughter|mother|father|mom|dad|kids?|children|child|baby|sister|"
        r"brother|girlfriend|boyfriend|partner|parents|grand(?:ma|pa|mother|father)|aunt|"
        r"uncle|cousin|esposa|marido|filh[oa]s?|mae|pai|irma|irmao|namorad[oa]|avo|tia|tio|"
        r"prim[oa]",
        "my family",
        "minha familia",
    ),
    (r"trip|travel|vacation|holiday|viagem|viajar|ferias", "travel plans", "planos de viagem"),
    (
        r"health\w*|sick|illness|disease|condition|medical|medicine|medication|pills?|"
        r"asthma\w*|diabet\w*|migraines?|hypertension|blood pressure|cholesterol|"
        r"intolerant|surgery|operation|injur\w*|broke|broken|break|fractur\w*|bones?|"
        r"saude|doenca|doente|condicao|remedios?|medicamentos?|asma|enxaqueca|pressao alta|"
        r"colesterol|cirurgia|operacao|fratur\w*|quebrei|ossos?|intolerante",
        "my health",
        "minha saude",
    ),
    (r"favou?rite|favorit[oa]", "favourites", "favoritos"),
    (r"passport|passaporte", "passport", "passaporte"),
    (r"phone|mobile|cell|telefone|celular", "phone", "telefone"),
    (r"e-?mail", "e-mail", "e-mail"),
    (
        r"eat|food|diet|vegan|vegetarian|lactose|gluten|dairy|milk|comida|comer|dieta|"
        r"vegan[oa]|vegetarian[oa]|leite|laticinios",
        "food",
        "comida",
    ),
)
_NAME_TOPIC: Final = ("user's name", "meu nome")
_TOPIC_KEYS: Final = frozenset(
    fold(key) for _, english, portuguese in _TOPIC_CUES for key in (english, portuguese)
)
_TOPICS: Final = tuple(
    (re.compile(rf"\b(?:{cues})\b"), (english, portuguese))
    for cues, english, portuguese in _TOPIC_CUES
)

_STOPWORD_TEXT: Final = (
    "a an the and or but of to in on at for with from by is are was were be been am i me "
    "my mine you your it its this that these those do does did have has had not no yes so "
    "very really just also too please remember note que o os as um uma uns umas de do da "
    "dos das em no na nos nas por para com e eu meu minha meus minhas voce seu sua ele "
    "ela isso isto esse essa aquele aquela mais muito ja tambem nao sim lembre anota guarde "
    "now anymore longer agora about sobre"
)
_STOPWORDS: Final = frozenset(_STOPWORD_TEXT.split())
# How a question is asked, not what about: never evidence that a memory answers it.
_ASKING_TEXT: Final = (
    "what whats what's when where who whom which how why tell remind know remember forget "
    "qual quais quando onde quem como porque lembra sabe esqueca esquece"
)
_ASKING_WORDS: Final = frozenset(_ASKING_TEXT.split())
_WORD: Final = re.compile(r"[a-z0-9']+")
# "I'm Marco", "Sou a Ana", "me chamo Ana": read on the user's own text, where a name is
# capitalised; the words below follow "I'm" capitalised without being names.
_INTRODUCTION: Final = re.compile(
    r"^(?:I'?m|I am|(?:[Ee]u )?[Ss]ou (?:o|a)|(?:[Ee]u )?[Mm]e chamo|[Cc]all me|"
    r"[Pp]ode me chamar de)\s+(?P<name>[A-ZÀ-Þ][a-zà-ÿ'-]+)\b"
)
_MY_SUBJECT: Final = re.compile(
    r"^(?:my|meu|minha|meus|minhas) (?P<subject>[a-z0-9'\- ]{1,40}?) (?:is|are|was|e|era|sao)\b"
)

# What a correction is about, as the user names it: "my sister" of "my sister is called Rita",
# "minha irmã" of "minha irmã se chama Rita".
_POSSESSIVE_SUBJECT: Final = re.compile(
    r"^(?:my|meu|minha|meus|minhas) [a-z0-9'\- ]{1,40}?"
    r"(?= (?:is|are|was|e|era|sao|se chama|se chamam|chama-se)\b)"
)
# The verb of a first-person statement: "I (usually) (don't) drink ...", "(eu) (não) bebo ...".
_FIRST_PERSON_VERB: Final = re.compile(
    r"^(?:i |eu )?(?:usually |always |often |normally |sempre |geralmente |normalmente )?"
    r"(?:don'?t |do not |no longer |nao |ja nao )?(?P<verb>[a-z]+)\b"
)
_FAMILIES: Final = tuple(
    (frozenset(verbs.split()), english, portuguese)
    for verbs, english, portuguese in lexicon.PREDICATE_FAMILIES
)


@dataclass(frozen=True)
class Fact:
    content: str
    memory_type: MemoryType
    bindings: list[str]


def introduces(statement: str) -> bool:
    """Whether ``statement`` (the user's own words) gives the user's name: "I'm Marco"."""
    match = _INTRODUCTION.match(straight_apostrophes(statement))
    return match is not None and match.group("name") not in lexicon.NOT_NAMES


def topic_keys(statement: str) -> list[str]:
    """The English key of each topic ``statement`` is about, as ``bindings_of`` stores it: a
    search for them finds a memory by its subject when its words differ ("I moved to
    Hamburg" and "I live in Berlin" are both "where I live")."""
    return list(dict.fromkeys(english for english, _ in _topics_of(statement)))


def keywords(statement: str) -> str:
    """The words of ``statement`` that say what it is about, as the user wrote them ("Who is
    Clara?" → "Clara"): the small embedder scores a whole question about a name below its
    cut-off while the name alone finds the memory that names it. Empty when nothing is left
    or the statement is its own keywords."""
    words = [
        w
        for w in re.findall(r"[\w'-]+", straight_apostrophes(statement))
        if (f := fold(w)) not in _STOPWORDS and f not in _ASKING_WORDS and len(f) > 1
    ]
    joined = " ".join(words)
    return "" if fold(joined) == fold(strip_edges(statement)) else joined


def _topics_of(statement: str) -> list[tuple[str, str]]:
    """The topics of the user's own words: the cue words', and a name an introduction gives."""
    topics = _topics(fold(statement))
    if introduces(statement):
        topics.insert(0, _NAME_TOPIC)
    return topics


def memory_type_of(statement: str) -> MemoryType:
    folded = fold(statement)
    for memory_type, cue in _TYPE_CUES:
        if cue.search(folded):
            return memory_type
    return "user_profile"


def _topics(folded: str) -> list[tuple[str, str]]:
    return [names for pattern, names in _TOPICS if pattern.search(folded)]


def _content_words(folded: str) -> list[str]:
    """The words that say something, possessives aside ("kids'", "daughter's")."""
    words = (w.strip("'").removesuffix("'s") for w in _WORD.findall(folded))
    return [w for w in words if w not in _STOPWORDS and len(w) > 1]


def bindings_of(statement: str, replacing: Sequence[str] = ()) -> list[str]:
    """``replacing``: the texts of the memory this statement corrects. Its topics stay keys:
    "I'm a paramedic now" replacing "I work as a nurse" is still the answer to "what is my
    job?"."""
    folded = fold(statement)
    keys: list[str] = [statement[:MAX_BINDING_CHARS]]
    subject = _MY_SUBJECT.match(folded)
    if subject:
        keys.append(subject.group("subject").strip())
    topics = _topics_of(statement) + _topics(fold(" ".join(replacing)))
    for english, portuguese in dict.fromkeys(topics):
        keys += [english, portuguese]
    words = _content_words(folded)
    if len(words) > 1:
        keys.append(" ".join(words[:MAX_KEYWORDS]))
    unique = list(dict.fromkeys(k.strip() for k in keys if k.strip()))
    return unique[:MAX_BINDINGS]


def content_word(word: str) -> bool:
    """Whether a folded word says something (no stop word, no question word, three letters
    or more)."""
    return word not in _STOPWORDS and word not in _ASKING_WORDS and len(word) > 2


def _stems(folded: str) -> set[str]:
    """Content words cut to their first letters: "allergic"/"allergy", "alergica"/"alergia"
    and "favourite"/"favourites" meet; words of two letters or fewer say too little."""
    words = _content_words(folded)
    return {w[:STEM_CHARS] for w in words if len(w) > 2 and w not in _ASKING_WORDS}


class Relation(IntEnum):
    """How a memory relates to what the user said, weakest first."""

    NONE = 0
    WORD = 1  # a word stem in common
    TOPIC = 2  # a topic in common ("where I live", "user's name")


def about(statement: str, memories: Sequence[tuple[T, Sequence[str]]]) -> list[T]:
    """Of ``memories`` (each an item and its texts: content, bindings), in their order, the
    ones most closely about ``statement``: those sharing a topic with it when any does, else
    those sharing a word. "What's my name?" is about "I'm Nina" (the name topic) rather
    than "My daughter's name is Mia" (the word "name" only)."""
    relations = [(item, relation(statement, texts)) for item, texts in memories]
    best = max((r for _, r in relations), default=Relation.NONE)
    return [item for item, r in relations if r == best != Relation.NONE]


def relation(statement: str, memory_texts: Sequence[str]) -> Relation:
    """How a memory (its content and bindings) is about what ``statement`` names: a topic or
    a word stem in common (question words aside). A correction or a forget acts only on
    such a memory, and a search's answer names only such memories when there are any: the
    embedder alone is not evidence enough, since a small model scores unrelated sentences of
    one language above its cut-off (a "no longer allergic" correction once overwrote "I moved
    to Porto")."""
    held = [fold(text) for text in memory_texts]
    held_topics = set(_topics(" ".join(held)))
    if any(introduces(text) for text in memory_texts):
        held_topics.add(_NAME_TOPIC)
    if set(_topics_of(statement)) & held_topics:
        return Relation.TOPIC
    # A topic key's words are the topic's, not the memory's: "user's name" shares "name"
    # with "what's my daughter's name?" without being about it.
    own_words = " ".join(text for text in held if text not in _TOPIC_KEYS)
    return Relation.WORD if _stems(fold(statement)) & _stems(own_words) else Relation.NONE


def subject_queries(statement: str) -> list[str]:
    """What a correction is about rather than its new value: "my sister" (not "Rita"), or
    the family of what its verb takes ("I drink coffee, tea, ..." for "I drink tea", in the
    verb's language first). The new value is what memory does not hold yet, so the embedder
    scores a search for it below the cut-off against the memory it corrects."""
    folded = Folded.of(straight_apostrophes(statement))
    queries: list[str] = []
    subject = _POSSESSIVE_SUBJECT.match(folded.text)
    if subject:
        queries.append(strip_edges(folded.original_between(0, subject.end())))
    verb = _FIRST_PERSON_VERB.match(folded.text)
    for verbs, english, portuguese in _FAMILIES:
        if verb and verb.group("verb") in verbs:
            portuguese_first = verb.group("verb") not in english.lower().split()
            queries += [portuguese, english] if portuguese_first else [english, portuguese]
    return queries


def mentions(texts: Sequence[str], words: str) -> bool:
    """Whether any of ``texts`` holds ``words`` as whole words, case and accents aside."""
    pattern = re.compile(rf"(?<![\w'-]){re.escape(fold(words))}(?![\w'-])")
    return bool(words.strip()) and any(pattern.search(fold(text)) for text in texts)


def replace_words(text: str, old: str, new: str) -> str | None:
    """``text`` with the words ``old`` (case and accents aside) replaced by ``new``: "not
    coffee, tea" makes "I drink coffee every morning" "I drink tea every morning". None when
    ``text`` does not hold them."""
    folded = Folded.of(text)
    match = re.search(rf"(?<![\w'-]){re.escape(fold(old))}(?![\w'-])", folded.text)
    if match is None or not old.strip():
        return None
    before = text[: len(text) - len(folded.original_from(match.start()))]
    if text[len(before) : len(before) + 1].islower():
        new = new[:1].lower() + new[1:]  # "Tea, not coffee": "I drink tea", not "I drink Tea"
    return f"{before}{new}{folded.original_from(match.end())}"


def closest(
    statement: str, memories: Sequence[tuple[T, Sequence[str]]], old_value: str = ""
) -> list[T]:
    """The memories a correction may change: those holding the value it says is wrong
    (``old_value``: "coffee" of "not coffee, tea") when it names one; else those most
    closely about it (:func:`about`) that share the most words with it, so "I don't drink
    coffee anymore" picks "I drink coffee every morning" over "I drink wine on Fridays",
    while "I drink tea" fits both (and the user is asked which)."""
    if old_value:
        return [item for item, texts in memories if mentions(texts, old_value)]
    related = about(statement, memories)
    if len(related) < 2:
        return related
    stems = _stems(fold(statement))

    def shared(texts: Sequence[str]) -> int:
        own = " ".join(held for held in map(fold, texts) if held not in _TOPIC_KEYS)
        return len(stems & _stems(own))

    scored = [(item, shared(texts)) for item, texts in memories if item in related]
    most = max(score for _, score in scored)
    return [item for item, score in scored if score == most]


def fact_of(statement: str, replacing: Sequence[str] = ()) -> Fact:
    content = tidy(statement)
    return Fact(
        content=content,
        memory_type=memory_type_of(content),
        bindings=bindings_of(content, replacing),
    )

"""The lexical terms of a text, the same for what is stored and what is searched.

Analysis runs here, in process, rather than in a Milvus analyzer: milvus-lite and Milvus
standalone then index the same terms, and one text may be English or Portuguese (or both),
which no single Milvus stemmer handles. Steps: lower case, accents folded ("ação" and
"acao" are one term), words split on anything not a letter or digit, stop words of both
languages dropped, then the English and the Portuguese Snowball stemmers applied in turn
(English first: it mostly strips suffixes Portuguese words do not have, so "allergies" and
"allergic" meet at one stem, and so do "alergia" and "alergias"). The terms are joined by
spaces; Milvus' standard tokenizer splits them back unchanged.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Final

import Stemmer

from memoria_text.folding import fold


def listed(words: str) -> frozenset[str]:
    return frozenset(words.split())


# Snowball's stop word lists (snowballstem.org), accents folded like the text.
ENGLISH_STOP_WORDS: Final = listed(
    """
    i me my myself we our ours ourselves you your yours yourself yourselves he him his
    himself she her hers herself it its itself they them their theirs themselves what which
    who whom this that these those am is are was were be been being have has had having do
    does did doing would should could ought a an the and but if or because as until while of
    at by for with about against between into through during before after above below to
    from up down in out on off over under again further then once here there when where why
    how all any both each few more most other some such no nor not only own same so than too
    very s t can will just don now d ll m o re ve y
    """
)
PORTUGUESE_STOP_WORDS: Final = listed(
    """
    de a o que e do da em um para com nao uma os no se na por mais as dos como mas ao ele
    das a seu sua ou quando muito nos ja eu tambem so pelo pela ate isso ela entre depois sem
    mesmo aos seus quem nas me esse eles voce essa num nem suas meu minha numa pelos elas qual
    nos lhe deles essas esses pelas este dele tu te voces vos lhes meus minhas teu tua teus
    tuas nosso nossa nossos nossas dela delas esta estes estas aquele aquela aqueles aquelas
    isto aquilo estou esta estamos estao estive esteve estivemos estiveram estava estavamos
    estavam estivera estiveramos esteja estejamos estejam estivesse estivessemos estivessem
    estiver estivermos estiverem hei ha havemos hao houve houvemos houveram houvera
    houveramos haja hajamos hajam houvesse houvessemos houvessem houver houvermos houverem
    houverei houvera houveremos houverao houveria houveriamos houveriam sou somos sao era
    eramos eram fui foi fomos foram fora foramos seja sejamos sejam fosse fossemos fossem for
    formos forem serei sera seremos serao seria seriamos seriam tenho tem temos tem tinha
    tinhamos tinham tive teve tivemos tiveram tivera tiveramos tenha tenhamos tenham tivesse
    tivessemos tivessem tiver tivermos tiverem terei tera teremos terao teria teriamos teriam
    """
)
STOP_WORDS: Final = ENGLISH_STOP_WORDS | PORTUGUESE_STOP_WORDS
# Letters and digits; "_" is a word character to ``\w`` but separates words here.
_WORD = re.compile(r"[^\W_]+")
# At most 4 bytes a character: within Milvus' VARCHAR limit of 65,535 bytes.
ANALYZED_MAX_CHARS: Final = 16_383
# Distinct words are few in a user's memories; stemming each once is enough.
STEM_CACHE_WORDS: Final = 65_536

_english = Stemmer.Stemmer("english")
_portuguese = Stemmer.Stemmer("portuguese")


@lru_cache(maxsize=STEM_CACHE_WORDS)
def stem(word: str) -> str:
    return str(_portuguese.stemWord(_english.stemWord(word)))


def terms(text: str) -> list[str]:
    """The text's terms, in order, repeats kept (BM25 counts them)."""
    return [stem(word) for word in _WORD.findall(fold(text)) if word not in STOP_WORDS]


def analyzed(text: str) -> str:
    """The terms as one string, what the lexical index stores and is queried with, cut
    between terms to :data:`ANALYZED_MAX_CHARS`."""
    joined = " ".join(terms(text))
    if len(joined) <= ANALYZED_MAX_CHARS:
        return joined
    return joined[: ANALYZED_MAX_CHARS + 1].rsplit(" ", 1)[0]

"""Commands recognized in code, before any model call (ADR 9): *list all my memories*,
*delete all my memories*, *forget that* (the last thing the user told) and *cancel*; and the
replies to the runtime's own questions (a yes, a no, a pick among numbered memories).

Conservative: a message is a command only when it is that command and nothing more (anchored
at both ends, after courtesy such as "please" or "por favor"); "don't delete all my
memories" or "delete all my memories about work" go to the model. A missed command costs one
ordinary cycle; a false one would list, or ask to delete, everything unasked. Matching runs
on folded text: "Apague TODAS as minhas memórias!" is "apague todas as minhas memorias".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Final, Generic, TypeVar

from memoria_contracts.events import Language
from memoria_text.folding import fold


class Command(StrEnum):
    LIST_ALL = "list_all"
    DELETE_ALL = "delete_all"
    FORGET_LAST = "forget_last"
    CANCEL = "cancel"


class Reply(StrEnum):  # how a message answers a pending confirmation
    CONFIRM = "confirm"
    DECLINE = "decline"
    OTHER = "other"


K = TypeVar("K", Command, Reply)


@dataclass(frozen=True)
class Recognized(Generic[K]):
    kind: K
    language: Language  # of the words that matched: the reply is written in it


# Beyond folding, a command's words are read with hyphens as spaces ("never-mind") and no
# punctuation at the ends ("Delete all my memories!").
_EDGES: Final = re.compile(r"^[\s.!?,;:…]+|[\s.!?,;:…]+$")


def command_text(message: str) -> str:
    """``message`` as the command patterns read it: folded, hyphens as spaces, no edge
    punctuation."""
    return _EDGES.sub("", fold(message.replace("-", " ")))


# -- the words of the commands ---------------------------------------------------------------
# One vocabulary for the commands, read here whole and anchored (a command runs with no model,
# so only a message that is the command and nothing more is one) and by the offline planner
# as cue words at the start of a longer message (memoria_offline.intents: it *is* the model,
# and reads what the user wants from cues). Regular-expression alternations on folded text.

DELETE_VERBS_EN: Final = r"delete|erase|remove|wipe|clear|forget|purge"
"""What asks to delete everything: "wipe all my memories"."""
DELETE_VERBS_PT: Final = (
    r"apague|apaga|apagar|delete|deleta|deletar|exclua|exclui|excluir|remova|remove|remover|"
    r"esqueca|esquece|esquecer|limpe|limpa|limpar|elimine|elimina|eliminar|zere|zera|zerar"
)
ERASE_VERBS_EN: Final = r"forget|delete|erase|remove"
"""What asks to delete one thing ("forget that"): no "wipe" or "clear", which name no
memory ("clear skies today")."""
ERASE_VERBS_PT: Final = (
    r"apague|apaga|apagar|deleta|deletar|exclua|exclui|excluir|remova|remove|remover"
)
FORGET_VERBS_PT: Final = r"esqueca|esquece|esquecer"
""""Esquece" alone is "forget it"; "apaga" alone names nothing."""
THAT_EN: Final = (
    r"that|it|this|what i (?:just )?(?:said|told you)|the last (?:one|thing)(?: i (?:said|"
    r"told you))?"
)
THAT_PT: Final = (
    r"isso|isto|aquilo|essa|esse|o que eu (?:acabei de )?(?:disse|falei|contei)|"
    r"a ultima (?:coisa|que eu (?:disse|falei))"
)
LIST_VERBS_EN: Final = r"list|show|display|print|read"
LIST_VERBS_PT: Final = r"liste|lista|listar|mostre|mostra|mostrar|exiba|exibe|exibir"
CANCEL_EN: Final = r"cancel(?: it| that| this)?|never ?mind|abort"
CANCEL_PT: Final = (
    r"cancela(?:r)?(?: isso)?|cancele(?: isso)?|deixa (?:pra|para) la|desisto|abortar?"
)
YES_EN: Final = r"yes|yeah|yep|sure|confirm|confirmed|do it"
"""A yes as the start of a longer message too ("yes, go ahead"). The yeses that are one only
as the whole reply ("y", "of course", "absolutely", "go ahead") are added below: "of course I
like tea" is no yes."""
YES_PT: Final = r"sim|pode|confirmo|isso"


def _whole(lead: str, core: str, tail: str) -> re.Pattern[str]:
    return re.compile(rf"^{lead}(?:{core}){tail}$")


# Courtesy around a command. Questions about *how* to do it ("how do I ...") never match:
# only requests addressed to the assistant ("can you ...", "pode ...") are allowed before it.
_EN_LEAD: Final = (
    r"(?:(?:hey|hi|ok|okay|so),? )?(?:memoria,? )?(?:please,? )?"
    r"(?:(?:can|could|would|will) you (?:please )?|i (?:want|need) (?:you )?to |"
    r"i'?d like (?:you )?to |i would like (?:you )?to |go ahead and )?(?:please )?"
)
_EN_TAIL: Final = r"(?:,? (?:please|now|right now|for me|thanks|thank you))*"
_PT_LEAD: Final = (
    r"(?:(?:oi|ola|ei|ok|entao),? )?(?:memoria,? )?(?:por favor,? )?"
    r"(?:(?:voce |vc )?(?:pode|poderia|consegue) (?:por favor )?|"
    r"(?:eu )?(?:quero|gostaria de|preciso) (?:que (?:voce|vc) )?)?(?:por favor,? )?(?:me )?"
)
_PT_TAIL: Final = r"(?:,? (?:por favor|agora|pra mim|para mim|obrigad[oa]))*"

_EN_MEMORIES: Final = r"(?:saved |stored )?memories(?: (?:you have )?(?:of|about|on) me)?"
_PT_MEMORIES: Final = r"memorias(?: (?:que (?:voce|vc) (?:tem|guardou) )?(?:sobre|de) mim)?"

_EN_DELETE_ALL: Final = (
    rf"(?:{DELETE_VERBS_EN}) "
    r"(?:(?:all (?:of )?(?:my |your |the )?|every one of (?:my|your|the) |each of (?:my|your) )"
    rf"{_EN_MEMORIES}|every (?:single )?memory(?: (?:you have )?(?:of|about|on) me)?|"
    r"(?:all )?(?:of )?everything you (?:know|remember|have saved|saved|stored) about me|"
    r"(?:all (?:of )?)?(?:your|my) (?:whole |entire )?memory)"
)
_PT_DELETE_ALL: Final = (
    rf"(?:{DELETE_VERBS_PT}) "
    rf"(?:todas (?:as )?(?:minhas |suas )?{_PT_MEMORIES}|"
    r"toda (?:a )?(?:sua |minha )?memoria|(?:a )?(?:sua|minha) memoria(?: inteira)?|"
    r"tudo (?:o )?que (?:voce|vc) (?:sabe|lembra|guardou|salvou) (?:sobre|de) mim)"
)
_EN_LIST_ALL: Final = (
    rf"(?:(?:{LIST_VERBS_EN})(?: me)?(?: all)?(?: of)?(?: my| your| the)? "
    rf"{_EN_MEMORIES}|what are (?:all )?my memories|"
    r"what memories do you have(?: (?:of|about|on) me)?)"
)
_PT_LIST_ALL: Final = (
    rf"(?:(?:{LIST_VERBS_PT})(?: me)?"
    rf"(?: todas)?(?: as)?(?: minhas| suas)? {_PT_MEMORIES}|"
    r"quais (?:sao )?(?:as )?(?:minhas )?memorias(?: que (?:voce|vc) tem(?: (?:sobre|de) mim)?)?)"
)
# "Forget that" / "forget it" / "esqueça isso" are no cancel when nothing is pending: they ask
# to forget the last thing the user told, whatever the turn before was (a question, a search,
# small talk). As a reply to a pending question they decline it (_EN_NO, _PT_NO).
_EN_FORGET_LAST: Final = rf"(?:{ERASE_VERBS_EN}|undo)(?: about)? (?:{THAT_EN})(?: too| as well)?"
_PT_FORGET_LAST: Final = (
    rf"(?:(?:{FORGET_VERBS_PT})(?: (?:{THAT_PT}))?|(?:{ERASE_VERBS_PT}) (?:{THAT_PT}))(?: tambem)?"
)
_EN_CANCEL: Final = rf"(?:{CANCEL_EN})"
_PT_CANCEL: Final = rf"(?:{CANCEL_PT})"

_COMMANDS: Final[tuple[tuple[Command, Language, re.Pattern[str]], ...]] = (
    (Command.DELETE_ALL, "en", _whole(_EN_LEAD, _EN_DELETE_ALL, _EN_TAIL)),
    (Command.DELETE_ALL, "pt", _whole(_PT_LEAD, _PT_DELETE_ALL, _PT_TAIL)),
    (Command.LIST_ALL, "en", _whole(_EN_LEAD, _EN_LIST_ALL, _EN_TAIL)),
    (Command.LIST_ALL, "pt", _whole(_PT_LEAD, _PT_LIST_ALL, _PT_TAIL)),
    (Command.FORGET_LAST, "en", _whole(_EN_LEAD, _EN_FORGET_LAST, _EN_TAIL)),
    (Command.FORGET_LAST, "pt", _whole(_PT_LEAD, _PT_FORGET_LAST, _PT_TAIL)),
    (Command.CANCEL, "en", _whole("(?:please )?", _EN_CANCEL, _EN_TAIL)),
    (Command.CANCEL, "pt", _whole("(?:por favor,? )?", _PT_CANCEL, _PT_TAIL)),
)

# Answers to "are you sure?". Only a clear yes confirms: "ok", "hmm", "maybe" or anything
# else is not a yes, and a destructive action must not run on a guess.
_EN_YES: Final = (
    rf"(?:{YES_EN}|yup|y|of course|absolutely|i confirm|go ahead|delete them(?: all)?)"
    r"(?:,? (?:please|do it|go ahead|delete (?:them|it|everything)(?: all)?|i'?m sure|"
    r"i am sure|confirm(?:ed)?|i confirm))*"
)
_PT_YES: Final = (
    rf"(?:{YES_PT}|s|claro(?: que sim)?|com certeza|confirmar|confirma|confirmado|pode sim|"
    r"pode apagar(?: (?:tudo|todas))?|(?:apague|apaga)(?: (?:tudo|todas))?|manda ver|"
    r"tenho certeza)"
    r"(?:,? (?:sim|pode|pode apagar(?: (?:tudo|todas))?|(?:apague|apaga)(?: (?:tudo|todas))?|"
    r"por favor|tenho certeza|confirmo))*"
)
_EN_NO: Final = (
    r"(?:(?:no|nope|nah|n|cancel(?: it| that)?|never ?mind|forget (?:it|that)|stop|abort|"
    r"don'?t|do not|"
    r"keep (?:them|it|my memories)|don'?t delete(?: them| anything)?|"
    r"do not delete(?: them| anything)?)"
    r"(?:,? (?:thanks|thank you|keep them|cancel(?: it)?|don'?t(?: delete(?: them| anything)?)?|"
    r"do not(?: delete(?: them| anything)?)?|never ?mind|please))*)"
)
_PT_NO: Final = (
    r"(?:(?:nao|melhor nao|nao quero|cancela|cancelar|cancele|deixa (?:pra|para) la|"
    r"esquece(?: isso)?|"
    r"esqueca(?: isso)?|pare|desisto|mantenha(?: tudo)?|nao (?:apague|apaga)(?: nada)?)"
    r"(?:,? (?:obrigad[oa]|cancela|cancelar|nao (?:apague|apaga)(?: nada)?|mantenha(?: tudo)?|"
    r"deixa (?:pra|para) la|por favor))*)"
)

_REPLIES: Final[tuple[tuple[Reply, Language, re.Pattern[str]], ...]] = (
    (Reply.CONFIRM, "en", _whole("", _EN_YES, "")),
    (Reply.CONFIRM, "pt", _whole("", _PT_YES, "")),
    (Reply.DECLINE, "en", _whole("", _EN_NO, "")),
    (Reply.DECLINE, "pt", _whole("", _PT_NO, "")),
)


def recognize(message: str) -> Recognized[Command] | None:
    """The command this message is, if it is clearly and only one."""
    text = command_text(message)
    for command, language, pattern in _COMMANDS:
        if pattern.match(text):
            return Recognized(command, language)
    return None


def read_reply(message: str, asked_in: Language) -> Recognized[Reply]:
    """How ``message`` answers a pending confirmation asked in ``asked_in``."""
    text = command_text(message)
    for reply, language, pattern in _REPLIES:
        if pattern.match(text):
            return Recognized(reply, language)
    return Recognized(Reply.OTHER, asked_in)


# -- choosing among candidates (an ambiguous MemoryUpdate) ----------------------------------

_ORDINAL_WORDS: Final[tuple[tuple[Language, str], ...]] = (
    ("en", "1st first one|2nd second two|3rd third three|4th fourth four|5th fifth five"),
    (
        "pt",
        "1o 1a primeiro primeira um uma|2o 2a segundo segunda dois duas|"
        "3o 3a terceiro terceira tres|4o 4a quarto quarta quatro|5o 5a quinto quinta cinco",
    ),
)
_ORDINALS: Final[dict[str, tuple[int, Language]]] = {
    word: (n, language)
    for language, table in _ORDINAL_WORDS
    for n, words in enumerate(table.split("|"), start=1)
    for word in words.split()
}
_EN_PICK: Final = re.compile(
    r"^(?:(?:number|option|memory|the|it'?s|its|i meant|i mean|choose|pick)\s?)*"
    r"#?(?P<pick>\d{1,2}|[a-z0-9]+)(?: one)?(?:,? please)?$"
)
_PT_PICK: Final = re.compile(
    r"^(?:(?:numero|opcao|memoria|o|a|e|eh|era|quis dizer|escolho)\s?)*"
    r"(?:n[o.]?\s?)?#?(?P<pick>\d{1,2}|[a-z0-9]+)(?:,? por favor)?$"
)
_QUOTED: Final = re.compile(r"[\"“”'‘’«»](.+?)[\"“”'‘’«»]")


@dataclass(frozen=True)
class Choice:
    """How a message answers "which memory did you mean?": the 0-based ``index`` picked (None:
    no pick), the ``language`` of the words that picked (when they tell), or a number with no
    such candidate (``out_of_range``)."""

    index: int | None
    language: Language | None = None
    out_of_range: bool = False


def read_choice(message: str, candidates: list[tuple[str, str]]) -> Choice:
    """Which of ``candidates`` (``(memory_id, excerpt)``, in the order shown, numbered from 1)
    the message picks: a number ("2", "#2", "number 2", "the second", "a segunda"), a
    candidate's id, or a quoted piece of one (and only one) candidate's excerpt. Anything else
    picks nothing."""
    raw = message.strip()
    for index, (memory_id, _) in enumerate(candidates):
        if command_text(raw).strip("\"'") == memory_id.lower():
            return Choice(index)
    quoted = _QUOTED.search(raw)
    if quoted:
        needle = command_text(quoted.group(1))
        hits = [
            i
            for i, (_, excerpt) in enumerate(candidates)
            if needle and needle in command_text(excerpt)
        ]
        return Choice(hits[0]) if len(hits) == 1 else Choice(None)
    text = command_text(raw)
    for pattern in (_EN_PICK, _PT_PICK):
        match = pattern.match(text)
        if match is None:
            continue
        pick = match.group("pick")
        if pick.isdigit():
            number, said = int(pick), None
        elif pick in _ORDINALS:
            number, said = _ORDINALS[pick]
        else:
            continue
        if 1 <= number <= len(candidates):
            return Choice(number - 1, said)
        return Choice(None, said, out_of_range=True)
    return Choice(None)

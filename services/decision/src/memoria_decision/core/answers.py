"""Whether a message answers the question the assistant asked (English and Portuguese):

* a **refusal** does not ("I have no idea", "sorry, I don't know", "never mind", "não sei",
  "deixa pra lá"), nor a bare courtesy, nor a **new question** ("what time is it?");
* a **statement** does when it is about what was asked ("I live at 5 Elm Street": it names the
  question's subject or a word that goes with it), not when it is about something else ("The
  weather is nice today", "O meu gato chama-se Tareco");
* anything else is a **fragment** filling what was asked ("5 Elm Street, Springfield", "Rua
  das Flores 12, Lisboa"): the answer.

A message that does not answer is handled as a new one, and the question dropped, not asked
again: the user saw it and said something else. The rules lean towards "no answer": a wrong
fact saved is worse than a question asked again later.
"""

from __future__ import annotations

import re
from typing import Final

from memoria_text.commands import Reply, command_text, read_reply


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_LEAD: Final = (
    r"(?:(?:(?:i'?m |i am )?sorry|oops|hmm+|uh+|um+|well|ah|oh|honestly|desculp[ae]|"
    r"foi mal|perdao|olha|bom|hum+)(?:\s*[,;:—–]\s*|\s+))*"
)
# Refusals at the start of a message, whatever follows ("I don't know my address").
_REFUSAL: Final = re.compile(
    _LEAD + r"(?:i (?:really |honestly )?(?:have|'ve) no (?:idea|clue)|no (?:idea|clue)|not a clue|"
    r"i (?:really )?(?:don'?t|do not) (?:know|remember|recall)|i dunno|dunno|idk|"
    r"i (?:can'?t|cannot|could ?n'?t) (?:remember|recall|say)|i forgot|i'?m not sure|not sure|"
    r"never ?mind|forget (?:about )?(?:it|that)|i'?d rather not|i would rather not|rather not|"
    r"i prefer not to|no comment|not telling|none of your business|"
    r"i (?:won'?t|will not|don'?t want to|do not want to) (?:say|tell|answer|share)|"
    r"(?:it'?s|that'?s) (?:private|a secret)|(?:it )?doesn'?t matter|"
    r"(?:eu )?nao (?:sei|lembro|me lembro|faco (?:a menor |nenhuma )?ideia|"
    r"tenho (?:a menor |nenhuma )?ideia|quero (?:dizer|falar|responder|contar)|importa|"
    r"e da sua conta)|sei la|sem ideia|nem ideia|esqueci|deixa (?:pra|para) la|"
    r"esquec[ea](?: isso)?|prefiro nao|tanto faz|e (?:segredo|particular))\b"
)
# Only as the whole message: "pass" or "ok" could start an answer.
_WHOLE: Final = re.compile(
    _LEAD + r"(?:pass|skip(?: it| that| this)?|next|nothing|nada|passa|pula|proxima|"
    r"ok(?:ay)?|k|cool|nice|great|sure|alright|all right|thanks?(?: you)?(?: so much)?|thx|ty|"
    r"thanks? (?:you )?for .+|nice to meet you|obrigad[oa](?: por .+)?|valeu|beleza|legal|"
    r"certo|ta|prazer)$"
)
_QUESTION_WORDS: Final = _words(
    "what whats who whos whom where wheres when why how hows which whose "
    "qual quais quem onde quando porque pq quanto quanta quantos quantas"
)
_QUESTION_START: Final = re.compile(
    r"^(?:(?:do|does|did|can|could|would|will|are|is|have|has) (?:you|i|we|it|there|my)\b|"
    r"o que|oque|por que|como (?:e|assim|voce|vc)\b|sera que|"
    r"(?:voce|vc) (?:sabe|pode|lembra|tem|acha)\b)"
)
# What makes a message a statement (a fragment has none of it): to be and to have, the
# auxiliaries, the verbs people state facts about themselves with, or a subject first.
_VERBS: Final = _words(
    """
    am is are was were be been isn't aren't wasn't weren't i'm it's that's he's she's there's
    we're they're you're have has had i've we've they've don't doesn't didn't do does did can
    can't cannot could will won't would should must may might i'll i'd live lives lived work
    works worked like likes liked love loves loved hate hates want wants need needs go goes
    went moved move call called named think know knows feel feels got get gets bought play
    plays eat eats drink drinks study studies born seems looks rains shines
    eh sou somos sao estou estamos estao era foi fui tenho tem temos tinha moro mora moramos
    vivo vive vivem trabalho trabalha trabalhamos gosto gosta amo ama odeio quero quer
    preciso precisa chamo chama chamam chamado chamada nasci nasceu comprei fiz vou vai
    estudo estuda acho faz fica ficou mudei mudou casei
    """
)
_SUBJECTS: Final = _words("i we he she they you my our eu ele ela eles elas voce meu minha")
_IT: Final = _words("it it's its that's eh fica")  # "It's Lena", "É a Rua…": the asked thing
# Words that go with what a question asks, so a statement can be about it without repeating
# its words ("What is my address?" → "I live at …"; "Qual é o meu trabalho?" → "Sou …").
_KIN: Final = tuple(
    _words(group)
    for group in (
        "address live lives living street road avenue house home apartment flat endereco "
        "morada moro mora vivo vive rua avenida casa apartamento",
        "job work works profession occupation career trabalho trabalha emprego profissao",
        "name called named i'm sou nome chama chamo chamado chamada",
        "birthday born birth aniversario nasci nasceu nascimento",
        "age old years idade anos",
        "phone telephone mobile number telefone celular numero",
        "email mail",
    )
)
_NOT_CONTENT: Final = _words(
    """
    what is are my the a an do does did i you your of where when who how which was me it
    that this in at on for to and or s
    qual quais e o os as meu minha meus minhas de do da dos das onde quando quem como que eu
    voce se em no na nos nas um uma por para pra
    """
)
_WORD: Final = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_STEM: Final = 5


def answers(message: str, question: str) -> bool:
    """Whether ``message`` answers what was asked about ``question`` (the user's message)."""
    text = command_text(message)
    if not text or _REFUSAL.match(text) or _WHOLE.match(text):
        return False
    if read_reply(message, "en").kind == Reply.DECLINE:  # "no", "cancel", "esquece"
        return False
    # "é" (is) folds to "e" (and): told apart before folding.
    words = ["eh" if w == "é" else command_text(w) for w in message.lower().split()]
    words = [w for word in words for w in _WORD.findall(word)]
    if not words or _asks(message, text, words):
        return False
    if len(words) > 1 and (words[0] in _SUBJECTS or any(w in _VERBS for w in words)):
        return _about(words, _WORD.findall(command_text(question)))
    return True


def _asks(message: str, text: str, words: list[str]) -> bool:
    if words[0] in _QUESTION_WORDS or _QUESTION_START.match(text):
        return True
    # "5 Elm Street?" is an answer not quite sure of itself; "is it raining?" a question.
    return message.rstrip().endswith("?") and any(w in _VERBS for w in words)


def _about(words: list[str], asked: list[str]) -> bool:
    """It is the asked thing, names what the question asks about, or a word that goes with it."""
    if words[0] in _IT:
        return True
    subject = {_stem(w) for w in asked if w not in _NOT_CONTENT}
    said = {_stem(w) for w in words if w not in _NOT_CONTENT}
    if subject & said:
        return True
    kins = ({_stem(w) for w in kin} for kin in _KIN)
    return any(kin & subject and kin & said for kin in kins)


def _stem(word: str) -> str:
    return word.split("'", maxsplit=1)[0][:_STEM]

"""Told once, asked later elsewhere: how people state personal facts (dates, weekly routines,
events and plans, family, work, health; English and Portuguese) and how they ask for them
in a new thread, answered by the offline planner through the real stack.

The set has two parts. ``DEV`` is what the rules were developed against (its last items were
held out in three earlier rounds, then looked at); ``HELD_OUT`` was written before the rules were
changed for them and left alone, so its score says how the rules do on phrasings they were
not fitted to. A user holds every fact of one language of a part (the others are the
distractors a real store has); each question is asked in a thread of its own, and the
answer must name what was told. Every miss is printed."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator, Sequence
from typing import Any, Final

import pytest
from offline_chat import actions, answers, offline_stack, say
from stack import Stack

from memoria_text.i18n import language_of

pytestmark = pytest.mark.integration

Item = tuple[str, str, tuple[str, ...]]
"""What the user said, what they ask later, the words the answer must hold."""

DEV: Final[list[Item]] = [
    ("My daughter's birthday is on March 14", "When is my daughter's birthday?", ("March 14",)),
    ("I go swimming every Tuesday and Thursday", "What do I do on Tuesdays?", ("swimming",)),
    ("My husband is called Tom", "What's my husband's name?", ("Tom",)),
    ("I work as a pharmacist at Boots", "Where do I work?", ("Boots",)),
    ("I take metformin for my diabetes", "What medication do I take?", ("metformin",)),
    ("We're going to Japan in April", "Where are we going in April?", ("Japan",)),
    (
        "Yesterday I went to the dentist for a check-up.",
        "When did I go to the dentist?",
        ("dentist",),
    ),
    ("My son Leo plays the violin", "What instrument does Leo play?", ("violin",)),
    ("I'm allergic to penicillin", "Am I allergic to any medicine?", ("penicillin",)),
    ("On Saturdays I volunteer at the food bank", "What do I do on Saturdays?", ("food bank",)),
    ("My mother lives in Porto", "Where does my mom live?", ("Porto",)),
    (
        "O aniversário do meu pai é dia 3 de maio",
        "Quando é o aniversário do meu pai?",
        ("3 de maio",),
    ),
    ("Às quartas eu faço pilates", "O que eu faço às quartas?", ("pilates",)),
    (
        "Minha consulta no cardiologista é dia 12 de dezembro",
        "Quando é minha consulta no cardiologista?",
        ("12 de dezembro",),
    ),
    ("Minha irmã se chama Beatriz", "Qual é o nome da minha irmã?", ("Beatriz",)),
    ("Trabalho como enfermeira no Hospital São João", "Onde eu trabalho?", ("São João",)),
    ("Tomo losartana para pressão alta", "Que remédio eu tomo?", ("losartana",)),
    ("Vamos viajar para o Chile em janeiro", "Para onde vamos viajar?", ("Chile",)),
    ("Ontem fui ao oftalmologista", "Quando fui ao oftalmologista?", ("oftalmologista",)),
    ("Meu filho estuda na escola Pedro II", "Onde meu filho estuda?", ("Pedro II",)),
    ("Sou alérgico a camarão", "Tenho alguma alergia?", ("camarão",)),
    # Held out in a first round, then developed against.
    ("My wife's name is Clara", "Who is my wife?", ("Clara",)),
    ("Every Monday morning I have a team meeting", "When is my team meeting?", ("Monday",)),
    ("I started a new job at the bakery last week", "Where do I work now?", ("bakery",)),
    ("My blood type is O negative", "What's my blood type?", ("O negative",)),
    (
        "I'm training for the Lisbon marathon in October",
        "What am I training for?",
        ("marathon",),
    ),
    ("My cat Mimi is 4 years old", "How old is my cat?", ("4",)),
    ("I had knee surgery in 2019", "When did I have surgery?", ("2019",)),
    ("Meu marido se chama Paulo", "Como se chama meu marido?", ("Paulo",)),
    ("Toda sexta eu jogo futebol com os amigos", "Quando eu jogo futebol?", ("sexta",)),
    (
        "Na semana passada comecei a trabalhar na padaria",
        "Onde eu trabalho agora?",
        ("padaria",),
    ),
    ("Tenho diabetes tipo 2", "Eu tenho alguma doença?", ("diabetes",)),
    ("Em julho vou visitar minha avó em Fortaleza", "Quem vou visitar em julho?", ("avó",)),
    (
        "Minha filha faz aniversário em 20 de agosto",
        "Quando é o aniversário da minha filha?",
        ("20 de agosto",),
    ),
    ("Meu chefe se chama Ricardo", "Qual o nome do meu chefe?", ("Ricardo",)),
    # Held out in a second round, then developed against.
    ("My anniversary is on June 8", "When is my anniversary?", ("June 8",)),
    ("I go to yoga on Wednesday evenings", "When do I do yoga?", ("Wednesday",)),
    ("Next month we're moving to Denver", "Where are we moving?", ("Denver",)),
    ("My brother Sam is a firefighter", "What does Sam do?", ("firefighter",)),
    ("I've been working at Siemens since 2018", "Where do I work?", ("Siemens",)),
    ("I have asthma", "Do I have any health problems?", ("asthma",)),
    ("I'm lactose intolerant", "Can I drink milk?", ("lactose",)),
    (
        "Meu aniversário de casamento é em 8 de junho",
        "Quando é meu aniversário de casamento?",
        ("8 de junho",),
    ),
    ("Às terças à noite faço aula de inglês", "Quando tenho aula de inglês?", ("terças",)),
    ("Mês que vem vamos nos mudar para Curitiba", "Para onde vamos nos mudar?", ("Curitiba",)),
    ("Meu irmão Pedro é bombeiro", "O que o Pedro faz?", ("bombeiro",)),
    ("Trabalho na Petrobras desde 2015", "Onde eu trabalho?", ("Petrobras",)),
    ("Tenho asma", "Tenho algum problema de saúde?", ("asma",)),
    ("Sou intolerante a lactose", "Posso tomar leite?", ("lactose",)),
    # Held out in a third round, then developed against.
    (
        "My grandmother turns 90 on October 2",
        "When does my grandmother turn 90?",
        ("October 2",),
    ),
    ("I walk the dog every evening after dinner", "When do I walk the dog?", ("evening",)),
    ("This summer we're renting a house in Crete", "Where are we going this summer?", ("Crete",)),
    ("My nephew Tiago is studying medicine", "What does Tiago study?", ("medicine",)),
    ("I'm a data analyst at a bank in Porto", "What's my job?", ("data analyst",)),
    ("I take vitamin D every morning", "What supplements do I take?", ("vitamin D",)),
    ("I broke my wrist last spring", "Did I ever break a bone?", ("wrist",)),
    (
        "O casamento da minha prima é em 15 de novembro",
        "Quando é o casamento da minha prima?",
        ("15 de novembro",),
    ),
    ("Todo domingo almoço com meus pais", "O que faço no domingo?", ("pais",)),
    ("Em dezembro vou fazer uma cirurgia no joelho", "Quando é minha cirurgia?", ("dezembro",)),
    ("Minha sobrinha Clara mora em Recife", "Onde mora minha sobrinha?", ("Recife",)),
    (
        "Sou professora de matemática numa escola pública",
        "Qual é a minha profissão?",
        ("professora",),
    ),
    ("Tenho enxaqueca quase toda semana", "Que problema de saúde eu tenho?", ("enxaqueca",)),
    ("Meu voo para Lisboa sai dia 20 às 8h", "Quando sai meu voo?", ("20",)),
]

HELD_OUT: Final[list[Item]] = [
    ("My son's graduation is on May 30", "When is my son's graduation?", ("May 30",)),
    ("On Thursdays I pick up the kids from school", "What do I do on Thursdays?", ("kids",)),
    ("We're getting married in September", "When are we getting married?", ("September",)),
    ("My sister-in-law Ana works at Google", "Where does Ana work?", ("Google",)),
    ("I quit my job at the hospital last month", "Where did I work before?", ("hospital",)),
    ("I'm allergic to bee stings", "What am I allergic to?", ("bee",)),
    ("I sleep badly when I drink coffee after 4pm", "Why do I sleep badly?", ("coffee",)),
    (
        "A formatura do meu filho é dia 30 de maio",
        "Quando é a formatura do meu filho?",
        ("30 de maio",),
    ),
    ("Às quintas busco as crianças na escola", "O que eu faço às quintas?", ("crianças",)),
    ("Vamos nos casar em setembro", "Quando vamos nos casar?", ("setembro",)),
    ("Minha cunhada Ana trabalha no Google", "Onde a Ana trabalha?", ("Google",)),
    ("Pedi demissão do hospital mês passado", "Onde eu trabalhava?", ("hospital",)),
    ("Sou alérgica a picada de abelha", "Do que eu tenho alergia?", ("abelha",)),
    ("Durmo mal quando tomo café depois das 16h", "Por que eu durmo mal?", ("café",)),
]

DEV_BAR: Final = 57
"""Of the 63 development items, at least this many answered."""
HELD_OUT_BAR: Final = 12
"""Of the 14 held-out items, at least this many answered."""


def _folded(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()


@pytest.fixture(scope="module")
def stack(
    valkey_server: Any, milvus_server: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    data_dir = tmp_path_factory.mktemp("offline-recall")
    with offline_stack(valkey_server.port, milvus_server.uri, data_dir, db=7) as running:
        yield running


async def _answered(stack: Stack, part: str, items: Sequence[Item]) -> list[str]:
    """Every item's fact told in a thread of its own, then every question asked in another
    thread, by one user a language; the misses, described."""
    english = [item for item in items if language_of(item[0]) != "pt"]
    portuguese = [item for item in items if language_of(item[0]) == "pt"]
    return [
        *await _answered_by(stack, f"{part}-en", english),
        *await _answered_by(stack, f"{part}-pt", portuguese),
    ]


async def _answered_by(stack: Stack, user: str, items: Sequence[Item]) -> list[str]:
    kept = []
    for n, (said, _, _) in enumerate(items):
        saving = await say(stack, user, f"tell-{n}", said)
        kept.append(bool({"MemorySave", "MemoryUpdate"} & set(actions(saving))))
    misses = []  # one an item: not kept, or not answered
    for n, (said, asked, words) in enumerate(items):
        frames = await say(stack, user, f"ask-{n}", asked)
        reply = " ".join(str(a["content"]) for a in answers(frames))
        if not kept[n]:
            misses.append(f"{said!r} was not kept")
        elif not all(_folded(word) in _folded(reply) for word in words):
            misses.append(f"{asked!r} → {reply[:200]!r} (wanted {words})")
    return misses


PART_TIMEOUT_S: Final = 600
"""Two cycles an item, one at a time, on a busy 2-core machine: minutes, not seconds."""


@pytest.mark.timeout(PART_TIMEOUT_S)
async def test_the_development_part_is_answered_in_a_new_thread(stack: Stack) -> None:
    misses = await _answered(stack, "recall-dev", DEV)
    print(f"development part: {len(DEV) - len(misses)}/{len(DEV)}", *misses, sep="\n  ")
    assert len(DEV) - len(misses) >= DEV_BAR, misses


@pytest.mark.timeout(PART_TIMEOUT_S)
async def test_the_held_out_part_is_answered_in_a_new_thread(stack: Stack) -> None:
    misses = await _answered(stack, "recall-held-out", HELD_OUT)
    print(f"held-out part: {len(HELD_OUT) - len(misses)}/{len(HELD_OUT)}", *misses, sep="\n  ")
    assert len(HELD_OUT) - len(misses) >= HELD_OUT_BAR, misses

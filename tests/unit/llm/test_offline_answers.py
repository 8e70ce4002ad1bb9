"""The offline planner as a person hears it: facts told back in the second person, requests
only a model can serve answered with what it can do, statements recognised whatever they
open with."""

from __future__ import annotations

import pytest

from memoria_offline.intents import Intent, read
from memoria_offline.merge import kept_details
from memoria_offline.person import addressed
from memoria_offline.telling import sentence, told

from .cycles import run_cycle

SAVE = ["MemorySave", "Finalize"]


@pytest.mark.parametrize(
    ("said", "language", "told"),
    [
        ("I live in Recife", "en", "You live in Recife"),
        ("My sister Ingrid plays the oboe", "en", "Your sister Ingrid plays the oboe"),
        ("I'm allergic to peanuts", "en", "You're allergic to peanuts"),
        ("I was born in Porto and my wife and I live in Braga", "en",
         "You were born in Porto and your wife and you live in Braga"),
        ("I'm not a nurse anymore, I'm a paramedic now", "en",
         "You're not a nurse anymore, you're a paramedic now"),
        ("Moro em Lisboa", "pt", "Você mora em Lisboa"),
        ("Eu moro em Lisboa", "pt", "Você mora em Lisboa"),
        ("Não gosto de café", "pt", "Você não gosta de café"),
        ("Eu me chamo Ana", "pt", "Você se chama Ana"),
        ("Me mudei para o Porto", "pt", "Você se mudou para o Porto"),
        ("Comecei um emprego novo na padaria", "pt", "Você começou um emprego novo na padaria"),
        ("Ontem fui ao dentista", "pt", "Ontem você foi ao dentista"),
        ("Às sextas jogo futebol com meu irmão", "pt",
         "Às sextas você joga futebol com seu irmão"),
        ("Minha irmã mora em Lisboa e eu trabalho em Braga", "pt",
         "Sua irmã mora em Lisboa e você trabalha em Braga"),
        ("Comi sushi ontem", "pt", "Você comeu sushi ontem"),
        # A noun is no verb: "jogo" (game) after "Meu" stays.
        ("Meu jogo favorito é Zelda", "pt", "Seu jogo favorito é Zelda"),
        ("Sábado vou ao cinema", "pt", "Sábado você vai ao cinema"),
        ("Bebo café todas as manhãs", "pt", "Você bebe café todas as manhãs"),
    ],
)  # fmt: skip
def test_a_fact_is_told_back_in_the_second_person(said: str, language: str, told: str) -> None:
    assert addressed(said, language) == told  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "message",
    [
        "Yesterday I went to the dentist for a check-up.",
        "Last week I started a new job at the bakery.",
        "Last week we adopted a cat",
        "On Fridays I play football",
        "In Lisbon I work at a bank",
        "Every Monday my son has swimming",
        "Two weeks ago I broke my arm",
        "Ontem fui ao dentista",
        "Na semana passada comecei um emprego novo",
        "Às sextas jogo futebol com meu irmão",
        "Em Lisboa trabalho num banco",
        "Fui ao cinema com a Ana",
        "Há dois dias comecei a tomar antibiótico",
    ],
)
async def test_a_statement_is_saved_whatever_it_opens_with(message: str) -> None:
    reading = read(message)
    assert reading.intent == Intent.SAVE
    assert reading.statement.rstrip(".") == message.rstrip(".")  # its time kept
    assert await run_cycle(message) == SAVE


@pytest.mark.parametrize("message", ["Hi", "Hello there!", "Bom dia", "Oi, tudo bem?"])
def test_a_greeting_is_only_a_greeting(message: str) -> None:
    assert read(message).intent == Intent.SMALL_TALK


@pytest.mark.parametrize(
    "message",
    [
        "Can you write me a poem about the sea?",
        "Translate 'good morning' to French",
        "Explain quantum physics",
        "Help me plan my trip to Lisbon",
        "Tell me a joke",
        "Let's chat",
        "Escreve um poema sobre o mar",
        "Você pode traduzir isso para o inglês?",
        "Me explica como funciona a inflação",
        "Conta uma piada",
    ],
)
async def test_a_request_only_a_model_can_serve_is_neither_searched_nor_saved(
    message: str,
) -> None:
    assert read(message).intent == Intent.CANNOT
    assert await run_cycle(message) == ["Finalize"]


@pytest.mark.parametrize(
    "message", ["What can you do?", "what else can you do", "help", "O que você pode fazer?"]
)
async def test_what_can_you_do_is_answered_without_a_search(message: str) -> None:
    assert read(message).intent == Intent.CAPABILITIES
    assert await run_cycle(message) == ["Finalize"]


@pytest.mark.parametrize(
    "message",
    [
        "I plan to visit Lisbon in May",
        "Can you remember that my car is blue?",
        "I drink coffee every morning",
    ],
)
def test_statements_near_those_words_are_still_saved(message: str) -> None:
    assert read(message).intent == Intent.SAVE


@pytest.mark.parametrize("message", ["I drink tea now", "Agora bebo chá", "Now I work from home"])
def test_a_fact_said_to_hold_now_corrects_what_memory_holds(message: str) -> None:
    assert read(message).intent == Intent.UPDATE


@pytest.mark.parametrize(
    ("memory", "correction", "kept"),
    [
        # Nothing in common but short words: a new fact, nothing of the old one kept.
        ("My job is hard every day", "My car is blue", "My car is blue"),
        # A time the correction leaves out stays, with the date resolved for it.
        (
            "I drink coffee every morning (2026-11-30)",
            "I drink tea",
            "I drink tea every morning (2026-11-30)",
        ),
        # Wherever it is.
        (
            "I drink coffee every morning at home",
            "I drink tea at home",
            "I drink tea every morning at home",
        ),
        ("Moro em Sao Paulo", "Moro em São Paulo", "Moro em São Paulo"),  # as typed now
    ],
)  # fmt: skip
def test_a_correction_keeps_the_details_it_does_not_touch(
    memory: str, correction: str, kept: str
) -> None:
    assert kept_details(memory, correction) == kept


def test_dates_and_ordinals_are_not_codes_to_quote() -> None:
    assert told("My daughter's birthday is on March 14th", "en") == (
        "Your daughter's birthday is on March 14th"
    )
    assert told("My PIN is 4821", "en") == 'Your PIN is "4821"'


def test_three_saved_memories_read_as_one_sentence() -> None:
    said = sentence(["I'm Marco", "I live in Berlin", "I drink tea"], "en")
    assert said == "You're Marco, you live in Berlin, and you drink tea."

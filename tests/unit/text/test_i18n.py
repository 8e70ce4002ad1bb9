from __future__ import annotations

import pytest

from memoria_text.i18n import TEXTS, detect_language, text


@pytest.mark.parametrize(
    ("message", "language"),
    [
        ("Lembre que meu aniversário é em março", "pt"),
        ("qual é o meu nome?", "pt"),
        ("você lembra do meu cachorro", "pt"),
        ("esqueça meu endereço", "pt"),
        ("Remember that my birthday is in March", "en"),
        ("what is my name?", "en"),
        ("forget my address", "en"),
        ("ok", "en"),
        # An accented name inside an English sentence is a name, not Portuguese.
        ("I work as a nurse at the Charité hospital.", "en"),
        ("I moved to São Paulo last year", "en"),
        ("I had crème brûlée at the café", "en"),
        # Portuguese without a single accent, or with only a name accented.
        ("Moro em São Paulo", "pt"),
        ("Tenho 34 anos", "pt"),
        ("Me chamo Ana", "pt"),
        ("Sou alérgica a camarão", "pt"),
        ("Não", "pt"),
    ],
)
def test_detect_language(message: str, language: str) -> None:
    assert detect_language(message) == language


@pytest.mark.parametrize("message", ["valeu, tchau", "Bom dia", "beleza"])
def test_portuguese_courtesy_is_portuguese(message: str) -> None:
    assert detect_language(message) == "pt"


@pytest.mark.parametrize(
    ("message", "earlier", "language"),
    [
        # A message that tells nothing takes the language the user was writing in.
        ("Lena", ["Qual é o nome da minha filha?", "What is my name?"], "pt"),
        ("ok", ["hm", "where do I live?"], "en"),
        ("Tokyo 5/6", [], "en"),
        # A message that tells keeps its own language.
        ("thanks!", ["Qual é o nome da minha filha?"], "en"),
        ("obrigado", ["What is my name?"], "pt"),
    ],
)
def test_a_message_that_does_not_tell_takes_the_language_of_the_earlier_ones(
    message: str, earlier: list[str], language: str
) -> None:
    assert detect_language(message, earlier) == language


def test_every_text_exists_in_both_languages_with_the_same_placeholders() -> None:
    for key, versions in TEXTS.items():
        assert set(versions) == {"en", "pt"}, key
        assert versions["en"].count("{") == versions["pt"].count("{"), key


def test_text_formats_values() -> None:
    assert text("max_steps", "pt", steps=8).startswith("Parei depois de 8 passos")
    assert text("thinking", "en") == "Thinking..."

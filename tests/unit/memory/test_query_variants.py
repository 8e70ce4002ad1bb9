"""The rule-based rewrites of a search query, English and Portuguese."""

from __future__ import annotations

import pytest

from memoria_memory.memories.query_variants import key_terms, statement, variants


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("What food do I dislike?", "I dislike food"),
        ("When did Kate start skiing?", "Kate start skiing"),
        ("What are Kate's hobbies?", "Kate's hobbies"),
        ("How many times has Elise been to Turks and Caicos?", "Elise been to Turks and Caicos"),
        ("What kind of pasta did Kate make?", "Kate make pasta"),
        ("Does Kate work part-time?", "Kate work part-time"),
        ("Where Kate works?", "Kate works"),
        ("  where do I live ?? ", "I live"),
    ],
)
def test_an_english_question_reads_as_a_statement(question: str, expected: str) -> None:
    assert statement(question) == expected


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("Qual é a minha comida favorita?", "a minha comida favorita"),
        ("Onde eu moro?", "eu moro"),
        ("O que eu comi ontem?", "eu comi ontem"),
        ("Quantos gatos eu tenho?", "gatos eu tenho"),
        ("¿Quando é o meu aniversário?", "o meu aniversário"),
    ],
)
def test_a_portuguese_question_reads_as_a_statement(question: str, expected: str) -> None:
    assert statement(question) == expected


@pytest.mark.parametrize("text", ["food allergy", "senha do site aliexpress", "Biscuit", "", "?"])
def test_what_is_no_question_has_no_statement_form(text: str) -> None:
    assert statement(text) is None


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("How many times has Elise been to Turks and Caicos?", "Elise Turks Caicos"),
        ("What kind of music don't you like?", "music like"),
        ("Quantas vezes eu fui ao dentista?", "dentista"),
        ("Qual é o tipo sanguíneo da Ana?", "sanguíneo Ana"),
        ("wifi password", "wifi password"),
    ],
)
def test_key_terms_drop_question_words_and_stop_words(query: str, expected: str) -> None:
    assert key_terms(query) == expected


def test_variants_list_the_query_first_and_never_twice() -> None:
    assert variants("What food do I dislike?") == [
        "What food do I dislike?",
        "I dislike food",
        "food dislike",
    ]
    assert variants("wifi password") == ["wifi password"]
    assert variants("Onde eu moro?") == ["Onde eu moro?", "eu moro", "moro"]

"""The terms lexical search stores and queries (vectors/analysis.py)."""

from __future__ import annotations

from memoria_memory.vectors.analysis import analyzed, terms


def test_case_and_accents_are_folded() -> None:
    assert terms("Férias nos AÇORES") == terms("ferias nos acores")


def test_english_inflections_meet_at_one_stem() -> None:
    assert terms("allergies") == terms("allergic") == terms("Allergy")
    assert terms("running") == terms("runs")


def test_portuguese_inflections_meet_at_one_stem() -> None:
    assert terms("alergias") == terms("alergia") == terms("alérgico")
    assert terms("corridas") == terms("corrida")


def test_stop_words_of_both_languages_are_dropped() -> None:
    assert terms("the cat is on the mat") == terms("cat mat")
    assert terms("não é o que eu quero") == terms("quero")
    assert terms("of the and para com") == []


def test_words_split_on_punctuation_and_keep_digits() -> None:
    plate, pin = terms("plate")[0], terms("pin")[0]
    assert terms("plate XK-42-PQ, pin_4711") == [plate, "xk", "42", "pq", pin, "4711"]


def test_analyzed_text_is_the_terms_joined_by_spaces() -> None:
    assert analyzed("My cats, my dogs") == "cat dog"

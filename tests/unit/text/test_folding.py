"""One folding for every rule: the commands, the offline planner and the lexical index."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from memoria_text.commands import command_text
from memoria_text.folding import Folded, fold


def test_case_accents_apostrophes_and_spaces_fold() -> None:
    assert fold("  Apague TODAS\tas minhas  MEMÓRIAS ") == "apague todas as minhas memorias"
    assert fold("I\u2019m in S\u00e3o Paulo") == "i'm in sao paulo"
    assert fold("Stra\u00dfe") == "strasse"  # case folded, not only lowered


def test_a_command_reads_hyphens_as_spaces_without_edge_punctuation() -> None:
    assert command_text("  Never-mind!! ") == "never mind"
    assert fold("Never-mind!!") == "never-mind!!"


@given(st.text())
def test_the_position_map_folds_as_fold_does(text: str) -> None:
    assert Folded.of(text).text == fold(text)


@given(st.text(min_size=1))
def test_every_folded_position_maps_back_into_the_original(text: str) -> None:
    folded = Folded.of(text)
    for index in range(len(folded.text)):
        assert folded.original_from(index) in text
        assert folded.original_from(index)

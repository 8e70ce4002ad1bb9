"""BM25 over a user's held texts (vectors/cached.py: HeldTexts)."""

from __future__ import annotations

import math

import pytest

from memoria_memory.vectors.cached import HeldTexts
from memoria_memory.vectors.port import BM25_B, BM25_K1


def held(**texts: str) -> HeldTexts:
    index = HeldTexts()
    for row_id, text in texts.items():
        index.put(row_id, f"mem_{row_id}", text)
    return index


def test_scores_are_bm25_with_milvus_parameters() -> None:
    index = held(a="cat cat dog", b="dog", c="bird")
    [hit] = index.search("cat", limit=5)

    idf = math.log(1 + (3 - 1 + 0.5) / (1 + 0.5))
    norm = BM25_K1 * (1 - BM25_B + BM25_B * 3 / (5 / 3))
    assert hit.id == "a" and hit.memory_id == "mem_a"
    assert hit.score == pytest.approx(idf * 2 * (BM25_K1 + 1) / (2 + norm))


def test_a_rare_term_outranks_a_common_one_and_the_limit_holds() -> None:
    index = held(a="dog walk", b="dog park", c="dog xk42", d="dog food")

    hits = index.search("dog xk42", limit=2)

    assert hits[0].id == "c"
    assert len(hits) == 2


def test_replaced_and_removed_rows_leave_no_terms_behind() -> None:
    index = held(a="monday dentist", b="gym")
    index.put("a", "mem_a", "friday dentist")
    index.remove(["b", "unknown"])

    assert index.search("monday", limit=5) == []
    assert index.search("gym", limit=5) == []
    assert [hit.id for hit in index.search("friday", limit=5)] == ["a"]
    assert index.terms_held == 2
    index.remove(["a"])
    assert (index.postings, index.terms_held, index.search("dentist", limit=5)) == ({}, 0, [])

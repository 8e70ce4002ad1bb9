"""What a semantic search searches for each query: its vector blended with its statement
form's, and its key terms."""

from __future__ import annotations

import math

from memoria_contracts.memory import Vector
from memoria_memory.memories.search_queries import blend, dense_vectors, lexical_texts

# A fake embedder: each known text has a fixed unit vector.
UNIT: dict[str, Vector] = {
    "What food do I dislike?": [1.0, 0.0, 0.0],
    "I dislike food": [0.0, 1.0, 0.0],
    "food allergy": [0.0, 0.0, 1.0],
}


class Recorder:
    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    async def __call__(self, texts: list[str]) -> list[Vector]:
        self.calls.append(texts)
        return [UNIT[text] for text in texts]


def test_the_blend_is_the_unit_vector_halfway() -> None:
    half = 1 / math.sqrt(2)
    assert blend([1.0, 0.0], [0.0, 1.0]) == [half, half]
    assert blend([1.0, 0.0], [-1.0, 0.0]) == [1.0, 0.0]


async def test_a_question_searches_halfway_to_its_statement_form_in_one_embedding_call() -> None:
    embed = Recorder()
    vectors = await dense_vectors(["What food do I dislike?", "food allergy"], embed)
    half = 1 / math.sqrt(2)
    assert vectors == [[half, half, 0.0], [0.0, 0.0, 1.0]]
    assert embed.calls == [["What food do I dislike?", "food allergy", "I dislike food"]]


async def test_given_query_vectors_are_kept_and_only_statements_embedded() -> None:
    embed = Recorder()
    given = [[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]
    vectors = await dense_vectors(["What food do I dislike?", "food allergy"], embed, given)
    half = 1 / math.sqrt(2)
    assert vectors == [[half, half, 0.0], [0.0, 0.0, 1.0]]
    assert embed.calls == [["I dislike food"]]


async def test_keywords_alone_embed_once_and_search_as_typed() -> None:
    embed = Recorder()
    assert await dense_vectors(["food allergy"], embed) == [[0.0, 0.0, 1.0]]
    assert embed.calls == [["food allergy"]]
    given_only = Recorder()
    assert await dense_vectors(["food allergy"], given_only, [[0.0, 0.0, 1.0]]) == [[0.0, 0.0, 1.0]]
    assert given_only.calls == []


def test_lexical_search_gets_the_key_terms_or_the_query_when_none_is_left() -> None:
    assert lexical_texts(["What kind of food do I dislike?", "what is it?"]) == [
        "food dislike",
        "what is it?",
    ]

"""What a semantic search really searches for each of its queries: one vector and one text.

* **Dense**: the direction between the query's vector and its statement form's
  (``query_variants.statement``): "What food do I dislike?" searches halfway towards
  "I dislike food", nearer the memories that say it without losing the question's own
  wording. One vector per query, so the vector search costs what it did; the statement
  forms are embedded in the same call as the queries.
* **Lexical**: the query's key terms (``query_variants.key_terms``), so BM25 does not count
  a question's own words ("kind", "times", "many") as evidence.

Searching the rewrites as separate queries, fused like the queries of one search (the best
row of each memory), was measured too and gained less: see the ADR on query rewriting.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

import numpy as np

from memoria_contracts.memory import Vector
from memoria_memory.memories.query_variants import key_terms, statement

Embed = Callable[[list[str]], Awaitable[list[Vector]]]


def lexical_texts(queries: Sequence[str]) -> list[str]:
    return [key_terms(query) or query for query in queries]


def blend(query: Sequence[float], statement_vector: Sequence[float]) -> Vector:
    """The unit vector halfway between the two (both unit vectors, as embedders return)."""
    total = np.asarray(query, dtype=np.float64) + np.asarray(statement_vector, dtype=np.float64)
    norm = float(np.linalg.norm(total))
    if norm == 0.0:  # opposite directions: nothing to blend, keep the query's own
        return list(query)
    blended: Vector = (total / norm).tolist()
    return blended


async def dense_vectors(
    queries: Sequence[str], embed: Embed, given: list[Vector] | None = None
) -> list[Vector]:
    """The queries' search vectors; ``given``: the queries' own vectors, already embedded
    (then only the statement forms are)."""
    statements = [statement(query) for query in queries]
    wanted = [text for text in statements if text]
    if given is None:
        embedded = await embed([*queries, *wanted]) if queries else []
        own, extra = embedded[: len(queries)], embedded[len(queries) :]
    else:
        own, extra = given, (await embed(wanted) if wanted else [])
    rewritten = iter(extra)
    return [
        vector if text is None else blend(vector, next(rewritten))
        for vector, text in zip(own, statements, strict=True)
    ]

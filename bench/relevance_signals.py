"""The signals memory search has per found memory, on labelled data, without a running stack.

For every labelled question this runs the search the service runs (``memories/reads.py``),
through the in-process benchmark's code (``retrieval_local.memory_hits``): the question
rewritten as the service rewrites it (``search_queries``: the vector blended with its
statement form's, BM25 on its key terms), the ``CANDIDATES`` nearest rows of the held
store with their cosines and its ``CANDIDATES`` best BM25 rows. A memory found by one side
only has no signal from the other - as in the service - so a fit on these rows describes
the scores the service actually computes.

Two labelled sets:

* ``realtalk``: REALTALK's dev split (``bench/data/realtalk_dev.jsonl``, built locally, see
  ``bench/data/README.md``): each conversation is one user, each turn one memory (the turn
  as content and binding, as ``bench/retrieval_quality.py`` imports it), each question's
  evidence turns are its relevant memories;
* ``pairs``: ``bench/data/relevance_pairs.jsonl``: the pool of all bindings is one user,
  each binding one memory (content = binding); a binding labelled related to a query is
  relevant, every other one is not.

Vectors come from the in-process benchmark's cache (``retrieval_local.EmbeddingCache``,
under ``bench/data/cache/``, gitignored), so a re-fit after the first run takes seconds and
shares its embeddings with ``retrieval_quality.py --in-process``.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Final

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `bench.*` from any cwd

from bench.retrieval_local import EmbeddingCache, LocalStage, held_memories, memory_hits
from bench.retrieval_quality import binding_of, load_split

# Rows each side returns per query: the service asks for limit * 3 rows and the chat's
# limit is 20, the benchmark's 10; the top of either list is what decides a card.
CANDIDATES: Final = 30


@dataclass(frozen=True)
class Candidate:
    """One memory a question found: its best cosine among the dense candidates (None: not
    one of them), its best BM25 among the lexical ones (None: not one), and its label.
    ``question`` tells questions apart (two conversations may ask the same words)."""

    question: str
    cosine: float | None
    bm25: float | None
    relevant: bool
    wanted: int  # how many memories the query's labels call relevant (for recall)


@dataclass(frozen=True)
class Corpus:
    """One user's memories (texts to embed as passages and to index) and their questions."""

    name: str
    memories: list[str]
    questions: list[tuple[str, frozenset[int]]]  # question, indexes of relevant memories


def realtalk_corpora(path: Path) -> list[Corpus]:
    corpora = []
    for conversation in load_split(path):
        index = {turn.id: i for i, turn in enumerate(conversation.turns)}
        corpora.append(
            Corpus(
                name=conversation.id,
                memories=[turn.content for turn in conversation.turns],
                questions=[
                    (q.question, frozenset(index[e] for e in q.evidence))
                    for q in conversation.questions
                ],
            )
        )
    return corpora


def pairs_corpus(path: Path) -> Corpus:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    bindings = sorted({str(row["binding"]) for row in rows})
    index = {binding: i for i, binding in enumerate(bindings)}
    related: dict[str, set[int]] = {}
    for row in rows:
        wanted = related.setdefault(str(row["query"]), set())
        if row["related"]:
            wanted.add(index[str(row["binding"])])
    return Corpus(
        name="pairs",
        memories=bindings,
        questions=[(query, frozenset(wanted)) for query, wanted in sorted(related.items())],
    )


async def candidates(corpus: Corpus, cache: EmbeddingCache) -> list[Candidate]:
    """Every memory a hybrid search finds for each question, with the signals the service
    has (its best cosine and its best BM25 score)."""
    bindings = [binding_of(text) for text in corpus.memories]
    passages = await cache.vectors(bindings, kind="passage")
    held = held_memories(
        cache.dim,
        [
            (str(i), binding, text)
            for i, (binding, text) in enumerate(zip(bindings, corpus.memories, strict=True))
        ],
        passages,
    )
    searched = LocalStage.parse("hybrid")
    texts = sorted(
        {t for question, _ in corpus.questions for t in searched.texts_to_embed(question)}
    )
    await cache.vectors(texts, kind="query")  # one batch; the searches below read it
    found: list[Candidate] = []
    for number, (question, relevant) in enumerate(corpus.questions):
        dense, lexical = await memory_hits(held, searched, question, cache, CANDIDATES)
        for memory in sorted(dense.keys() | lexical.keys(), key=int):
            found.append(
                Candidate(
                    f"{corpus.name}#{number}",
                    max((hit.score for hit in dense.get(memory, [])), default=None),
                    max((hit.score for hit in lexical.get(memory, [])), default=None),
                    int(memory) in relevant,
                    len(relevant),
                )
            )
    return found

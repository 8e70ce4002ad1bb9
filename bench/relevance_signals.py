"""The signals memory search has per found memory, on labelled data, without a running stack.

For every labelled question this reproduces what the memory service sees when it scores a
search (``memories/reads.py``): the dense candidates (the ``CANDIDATES`` rows nearest the
query's vector, each with its cosine) and the lexical ones (the ``CANDIDATES`` best BM25
rows, scored by the held store's own BM25 over the user's texts, analysed like the service
analyses them). A memory found by one side only has no signal from the other - as in the
service - so a fit on these rows describes the scores the service can actually compute.

Two labelled sets:

* ``realtalk``: REALTALK's dev split (``bench/data/realtalk_dev.jsonl``, built locally, see
  ``bench/data/README.md``): each conversation is one user, each turn one memory (the turn
  as content and binding, as ``bench/retrieval_quality.py`` imports it), each question's
  evidence turns are its relevant memories;
* ``pairs``: ``bench/data/relevance_pairs.jsonl``: the pool of all bindings is one user,
  each binding one memory (content = binding); a binding labelled related to a query is
  relevant, every other one is not.

Vectors are cached under ``bench/data/cache/`` (gitignored), keyed by embedder, kind and
text, so a re-fit after the first run takes seconds.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `bench.*` from any cwd

from bench.retrieval_quality import binding_of, load_split
from memoria_memory.embedding.port import Embedder
from memoria_memory.memories.lexical_index import row_text
from memoria_memory.vectors.analysis import analyzed
from memoria_memory.vectors.cached import HeldTexts

DATA_DIR: Final = Path(__file__).resolve().parent / "data"
CACHE_DIR: Final = DATA_DIR / "cache"
# Rows each side returns per query: the service asks for limit * 3 rows and the chat's
# limit is 20, the benchmark's 10; the top of either list is what decides a card.
CANDIDATES: Final = 30

Floats = npt.NDArray[np.float64]


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


class VectorCache:
    """Vectors of one embedder, by kind and text, in one ``.npz`` file."""

    def __init__(self, embedder: Embedder) -> None:
        safe = embedder.id.replace("/", "_")
        self._path = CACHE_DIR / f"{safe}.npz"
        self._embedder = embedder
        self._vectors: dict[str, Floats] = {}
        if self._path.exists():
            with np.load(self._path) as stored:
                self._vectors = {key: stored[key] for key in stored.files}
        self._dirty = False

    @staticmethod
    def _key(kind: str, text: str) -> str:
        return hashlib.sha256(f"{kind}\0{text}".encode()).hexdigest()[:32]

    async def get(self, kind: str, texts: Sequence[str]) -> Floats:
        keys = [self._key(kind, text) for text in texts]
        missing = list({k: t for k, t in zip(keys, texts, strict=True) if k not in self._vectors})
        if missing:
            wanted = [t for k, t in zip(keys, texts, strict=True) if k in missing]
            unique = list(dict.fromkeys(wanted))
            embed = self._embedder.queries if kind == "query" else self._embedder.passages
            for text, vector in zip(unique, await embed(unique), strict=True):
                self._vectors[self._key(kind, text)] = np.asarray(vector, dtype=np.float64)
            self._dirty = True
        return np.stack([self._vectors[key] for key in keys])

    def save(self) -> None:
        if self._dirty:
            CACHE_DIR.mkdir(parents=True, exist_ok=True)
            np.savez(self._path, **self._vectors)  # type: ignore[arg-type]
            self._dirty = False


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


async def candidates(corpus: Corpus, cache: VectorCache) -> list[Candidate]:
    """Every memory either side finds for each question, with the signals the service has."""
    bindings = [binding_of(text) for text in corpus.memories]
    passages = await cache.get("passage", bindings)
    queries = await cache.get("query", [question for question, _ in corpus.questions])
    texts = HeldTexts()
    for i, (binding, text) in enumerate(zip(bindings, corpus.memories, strict=True)):
        texts.put(str(i), str(i), analyzed(row_text(binding, text)))
    found: list[Candidate] = []
    similarities = queries @ passages.T
    for number, ((question, relevant), cosines) in enumerate(
        zip(corpus.questions, similarities, strict=True)
    ):
        nearest = np.argsort(-cosines, kind="stable")[:CANDIDATES]
        dense = {int(i): float(cosines[i]) for i in nearest}
        hits = texts.search(analyzed(question), CANDIDATES)
        lexical = {int(hit.memory_id): hit.score for hit in hits}
        for memory in sorted(dense.keys() | lexical.keys()):
            found.append(
                Candidate(
                    f"{corpus.name}#{number}",
                    dense.get(memory),
                    lexical.get(memory),
                    memory in relevant,
                    len(relevant),
                )
            )
    return found

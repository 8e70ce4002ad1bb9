"""Fit the map from a memory's evidence to its relevance, and report what a cut-off shows.

Used by ``bench/calibrate_relevance.py --fusion``. For each retrieval mode, the memories the
mode finds for each labelled question (``relevance_signals.candidates``) get their evidence
as the service computes it (``Fusion.evidence``); a logistic regression of "is it one the
question needs" on ``logit(evidence)`` gives the ``RelevanceMap`` of the mode. Every
question of a set weighs the same in the fit, whatever the number of memories it finds, and
each set weighs its ``share`` in all: the short saved facts of the labelled pairs, what
Memoria's own store mostly holds, weigh ``FACTS_SHARE``, the REALTALK chats the rest.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from bench.relevance_signals import Candidate
from memoria_memory.embedding.port import Calibration
from memoria_memory.memories.fusion import EVIDENCE_EPSILON, Fusion, RelevanceMap
from memoria_runtime.settings import MemoryRetrieval

Floats = npt.NDArray[np.float64]

TOP_K: Final = 10  # results a question's cards are taken from (the benchmark's limit)
RIDGE: Final = 1e-3  # keeps Newton's steps finite if a set separates perfectly
NEWTON_STEPS: Final = 100
RELIABILITY_EDGES: Final = (0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7)
CUTOFFS: Final = (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5, 0.6)
DECIMALS: Final = 3
CUTOFF_STEP: Final = 0.01
FACTS_ANSWERED: Final = 0.90  # share of fact questions the default cut-off must still answer
# Weight of the short-fact questions in the fit, the chats' being the rest. One map cannot
# be calibrated on both sets (at the same evidence a saved fact is right far more often
# than a chat turn among its near-duplicate neighbours). Weighing every question alike let
# the chats' larger set decide, and the facts - what Memoria's store mostly holds - were
# shown numbers well below their hit rate; halves leave neither set further off than the
# other (docs/relevance.md has the reliability of each).
FACTS_SHARE: Final = 0.5


def sees(mode: MemoryRetrieval, candidate: Candidate) -> bool:
    """Whether a search in ``mode`` finds the memory at all."""
    if mode == "dense":
        return candidate.cosine is not None
    if mode == "lexical":
        return candidate.bm25 is not None
    return True


def evidence_of(mode: MemoryRetrieval, calibration: Calibration, candidate: Candidate) -> float:
    fusion = Fusion(mode)
    dense = None if candidate.cosine is None else calibration.relevance(candidate.cosine)
    return fusion.evidence(dense, candidate.bm25)


def scorer(
    mode: MemoryRetrieval, calibration: Calibration, relevance: RelevanceMap | None
) -> Callable[[Candidate], float]:
    """A memory's relevance through ``relevance`` (None: its evidence, as before the map)."""

    def score(candidate: Candidate) -> float:
        evidence = evidence_of(mode, calibration, candidate)
        return evidence if relevance is None else relevance(evidence)

    return score


def logit(evidence: Floats) -> Floats:
    clipped = np.clip(evidence, EVIDENCE_EPSILON, 1.0 - EVIDENCE_EPSILON)
    result: Floats = np.log(clipped / (1.0 - clipped))
    return result


def fit_logistic(x: Floats, labels: Floats, weights: Floats) -> tuple[float, float]:
    """Weighted logistic regression of ``labels`` on one feature ``x`` (Newton's method):
    (intercept, slope)."""
    design = np.column_stack([np.ones_like(x), x])
    coef = np.zeros(2)
    penalty = np.diag([0.0, RIDGE])
    for _ in range(NEWTON_STEPS):
        p = 1.0 / (1.0 + np.exp(-(design @ coef)))
        gradient = design.T @ (weights * (p - labels)) + penalty @ coef
        hessian = (design * (weights * p * (1.0 - p))[:, None]).T @ design + penalty
        step = np.linalg.solve(hessian, gradient)
        coef -= step
        if np.abs(step).max() < 1e-10:
            break
    return float(coef[0]), float(coef[1])


def question_weights(candidates: Sequence[Candidate]) -> Floats:
    """1 / (memories the question found): every question weighs 1 in all."""
    counts: defaultdict[str, int] = defaultdict(int)
    for candidate in candidates:
        counts[candidate.question] += 1
    return np.array([1.0 / counts[c.question] for c in candidates])


@dataclass(frozen=True)
class LabelledSet:
    name: str
    candidates: list[Candidate]
    share: float  # the set's weight in the fit, all its questions together


def fit_map(
    mode: MemoryRetrieval, calibration: Calibration, sets: Sequence[LabelledSet]
) -> RelevanceMap:
    """The mode's map, fitted on every set's questions together, each set weighing its
    share (evidence 0 is relevance 0 by definition, so those memories are left out)."""
    xs, ys, ws = [], [], []
    for labelled in sets:
        seen = [c for c in labelled.candidates if sees(mode, c)]
        evidence = np.array([evidence_of(mode, calibration, c) for c in seen])
        keep = evidence > 0.0
        xs.append(logit(evidence[keep]))
        ys.append(np.array([c.relevant for c in seen], dtype=np.float64)[keep])
        weights = question_weights(seen)[keep]
        ws.append(weights / weights.sum() * labelled.share)
    intercept, slope = fit_logistic(np.concatenate(xs), np.concatenate(ys), np.concatenate(ws))
    return RelevanceMap(round(intercept, DECIMALS), round(slope, DECIMALS))


@dataclass(frozen=True)
class CardStats:
    cutoff: float
    cards_per_question: float
    precision: float | None
    recall: float  # share of a question's relevant memories shown as cards, averaged
    answered: float  # share of questions with at least one relevant card

    def __str__(self) -> str:
        precision = "-" if self.precision is None else f"{self.precision:.3f}"
        return (
            f"cut-off {self.cutoff}: {self.cards_per_question:.2f} cards/q, precision "
            f"{precision}, recall {self.recall:.3f}, questions with a relevant card "
            f"{self.answered:.3f}"
        )


def ranked_by_question(
    candidates: Sequence[Candidate], score: Callable[[Candidate], float]
) -> list[list[tuple[float, Candidate]]]:
    by_question: defaultdict[str, list[tuple[float, Candidate]]] = defaultdict(list)
    for candidate in candidates:
        by_question[candidate.question].append((score(candidate), candidate))
    return [sorted(found, key=lambda item: -item[0]) for found in by_question.values()]


def card_stats(ranked: list[list[tuple[float, Candidate]]], cutoff: float) -> CardStats:
    shown = relevant = answered = 0
    recalls = []
    for found in ranked:
        cards = [c for s, c in found[:TOP_K] if s >= cutoff]
        hits = sum(c.relevant for c in cards)
        shown += len(cards)
        relevant += hits
        answered += hits > 0
        recalls.append(hits / found[0][1].wanted)
    return CardStats(
        cutoff,
        shown / len(ranked),
        relevant / shown if shown else None,
        float(np.mean(recalls)),
        answered / len(ranked),
    )


def recall_at_k(ranked: list[list[tuple[float, Candidate]]]) -> float:
    recalls = [sum(c.relevant for _, c in found[:TOP_K]) / found[0][1].wanted for found in ranked]
    return float(np.mean(recalls))


def reliability(
    mode: MemoryRetrieval, calibration: Calibration, relevance: RelevanceMap, labelled: LabelledSet
) -> list[str]:
    """Predicted against observed rate of relevant memories, by band of relevance, and the
    mean log-loss (every candidate the mode finds, every question weighted alike)."""
    seen = [c for c in labelled.candidates if sees(mode, c)]
    predicted = np.array([relevance(evidence_of(mode, calibration, c)) for c in seen])
    labels = np.array([c.relevant for c in seen], dtype=np.float64)
    weights = question_weights(seen)
    bands = np.digitize(predicted, RELIABILITY_EDGES)
    edges = (0.0, *RELIABILITY_EDGES, 1.0)
    lines = []
    for band in range(len(edges) - 1):
        members = bands == band
        if members.any():
            lines.append(
                f"    relevance {edges[band]:.2f}-{edges[band + 1]:.2f}: n={int(members.sum()):<6} "
                f"mean predicted {predicted[members].mean():.3f}, "
                f"relevant {labels[members].mean():.3f}"
            )
    # Expected calibration error: the mean gap between predicted and observed rate over the
    # bands, each band weighing its memories.
    gaps = [abs((predicted[bands == b] - labels[bands == b]).sum()) for b in range(len(edges))]
    lines.append(f"    calibration error {sum(gaps) / len(labels):.4f}")
    clipped = np.clip(predicted, 1e-9, 1 - 1e-9)
    loss = -np.sum(weights * (labels * np.log(clipped) + (1 - labels) * np.log(1 - clipped)))
    lines.append(f"    log-loss per question {loss / weights.sum() * 1.0:.4f}")
    return lines


def cut_off_table(stats: Sequence[CardStats]) -> list[str]:
    lines = ["    cut-off  cards/q  precision  recall     F1  questions with a relevant card"]
    for row in stats:
        precision = "-" if row.precision is None else f"{row.precision:.3f}"
        lines.append(
            f"    {row.cutoff:>7.2f}  {row.cards_per_question:>7.2f}  {precision:>9}  "
            f"{row.recall:>6.3f}  {card_f1(row):.3f}  {row.answered:>6.3f}"
        )
    return lines


def card_f1(stats: CardStats) -> float:
    if not stats.precision or not stats.recall:
        return 0.0
    return 2 * stats.precision * stats.recall / (stats.precision + stats.recall)


def cutoff_steps() -> list[float]:
    return [round(CUTOFF_STEP * i, 2) for i in range(1, round(1 / CUTOFF_STEP))]


def best_f1_cutoff(ranked_sets: Sequence[list[list[tuple[float, Candidate]]]]) -> float:
    """The cut-off with the best mean over the sets of the cards' F1 (for comparison)."""
    scored = [
        (float(np.mean([card_f1(card_stats(ranked, cut)) for ranked in ranked_sets])), -cut)
        for cut in cutoff_steps()
    ]
    return -max(scored)[1]


def default_cutoff(
    facts: list[list[tuple[float, Candidate]]], chats: list[list[tuple[float, Candidate]]]
) -> float | None:
    """The default ``min_relevance``: the cut-off that shows the fewest unrelated cards in
    real chats (the highest card precision on ``chats``) while at least ``FACTS_ANSWERED`` of
    the questions about short saved facts still get a right card - a hidden saved fact is
    the worse failure: the model reading the results can ignore an extra one."""
    allowed = [cut for cut in cutoff_steps() if card_stats(facts, cut).answered >= FACTS_ANSWERED]
    if not allowed:
        return None  # even the lowest cut-off hides too many facts (lexical search alone)
    return max(allowed, key=lambda cut: (card_stats(chats, cut).precision or 0.0, -cut))

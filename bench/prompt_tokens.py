"""How many prompt tokens each decision sends on a long conversation, against sending the
whole history (MEMORIA_HISTORY_LIMIT keeps decision prompts small).

No services and no broker: the bench plays a 300-turn synthetic conversation through the
product's own code and measures every decision prompt on the way.

* **The conversation** (seeded, so every run is the same): each turn is a user message and
  the cycle it starts, in a fixed mix — an answer (Finalize, 6 turns in 10), a memory search
  (memory cards and an explanation, then Finalize; 2 in 10), a memory save (explanation,
  then Finalize; 1 in 10), a question back to the user (1 in 10). Messages are stored as the
  memory service stores chat.out (``HistoryRepository.save`` on a temporary SQLite), with the
  ``chat-history`` flag each action sets: answers written by Finalize are shown but are not
  chat history, memory cards, explanations and questions are.
* **Each decision** is built as decision builds it: its history is what the memory service
  answers to decision's request (the thread's stored summary, cut to
  ``MEMORIA_HISTORY_SUMMARY_PROMPT_CHARS``, and the chat-history messages newer than it, at
  most ``MEMORIA_HISTORY_LIMIT``, the current cycle excluded; the summary is updated after
  each turn, as the memory service does in the background). Search and save steps leave a
  tool call and its result in the thread, as decision publishes them. Beside it, the older
  history: the newest ``MEMORIA_HISTORY_LIMIT`` messages and no summary,
  its transcript is the cycle so far, and ``memoria_decision.chooser.decision_prompt`` makes
  the prompt with the real action catalog. A search or save turn makes two decisions
  (before and after the step), the others one.
* **Counted** as the product counts: the prompt goes to the scripted provider's
  ``reasoning_heavy`` inside ``memoria_llm.usage.collecting()``, and its reported input tokens
  are what ``cycle_end.usage`` would carry (the scripted provider counts words; Gemini's and
  OpenAI's counts come from their APIs and cannot be made offline). Beside it, characters / 4,
  the usual rule of thumb for subword tokenizers.
* **Against**: the same decision prompt with the whole history instead of the newest
  ``MEMORIA_HISTORY_LIMIT`` messages, two ways: every chat-history message of the thread
  (what decision would send with no limit), and every message of the conversation, answers
  included (what sending the full conversation means).

    .venv/bin/python bench/prompt_tokens.py [--turns 300] [--history-limit 50] [--seed 8]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from memoria_action_worker.registry import load_actions
from memoria_contracts.chat import ChatRecord
from memoria_contracts.events import ActionSpec, StepRecord
from memoria_contracts.history import HistorySummary
from memoria_decision.chooser import decision_prompt
from memoria_decision.core import outputs
from memoria_decision.core.state import CycleState
from memoria_llm import usage
from memoria_llm.conversation import bounded_summary
from memoria_llm.port import LLMRequest, Prompt
from memoria_llm.scripted import Script, ScriptedModel, ScriptRule
from memoria_memory.docstore import open_document_store
from memoria_memory.history import COLLECTION, HistoryRepository
from memoria_memory.summarizer import COLLECTION as SUMMARY_COLLECTION
from memoria_memory.summarizer import HistorySummarizer, SummaryBounds, SummaryStore
from memoria_runtime.settings import Settings

GOAL_PERCENT = 10.0
DEFAULT_TURNS = 300
DEFAULT_SEED = 8
CHARS_PER_TOKEN = 4
USER = "bench"
THREAD = "long-conversation"
START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)

TurnKind = Literal["answer", "search", "save", "question"]
MIX: tuple[TurnKind, ...] = (
    "answer",
    "search",
    "answer",
    "save",
    "answer",
    "answer",
    "search",
    "answer",
    "question",
    "answer",
)

VOCABULARY = (
    "I my the a to and of in for with on at about next week trip Lisbon Porto sister "
    "birthday dinner meeting project deadline gym running book coffee train flight hotel "
    "remember please could you tell me what when where how much should would like prefer "
    "allergic peanuts vegetarian budget report slides Monday Friday weekend morning evening "
    "doctor appointment password account bank email address phone number favourite colour "
    "music jazz concert tickets garden plants cat dog vet walk rain umbrella summer holiday"
)
WORDS = VOCABULARY.split()


# -- the synthetic conversation -----------------------------------------------------------


def sentence(rng: random.Random, low: int, high: int) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(low, high))]
    return " ".join(words).capitalize() + "."


def text(rng: random.Random, sentences: tuple[int, int], words: tuple[int, int]) -> str:
    return " ".join(sentence(rng, *words) for _ in range(rng.randint(*sentences)))


def memory_card(rng: random.Random, turn: int, index: int, at: datetime) -> dict[str, Any]:
    """What MemorySearch puts in a memory card: the memory as the service returns it."""
    stamp = at.isoformat()
    return {
        "memory_id": f"mem_{turn:04d}{index:02d}{rng.randrange(16**8):08x}",
        "memory_type": rng.choice(("user_profile", "preference", "goal", "critical_info")),
        "content_kind": "text",
        "content": sentence(rng, 6, 16),
        "bindings": [sentence(rng, 2, 4).rstrip(".") for _ in range(rng.randint(2, 3))],
        "creation_datetime": stamp,
        "last_accessed": stamp,
        "updated_at": stamp,
        "relevance_score": round(rng.uniform(0.83, 0.95), 3),
    }


@dataclass
class Cycle:
    """One turn: what its decisions see, and every message it leaves in the thread."""

    turn: int
    kind: TurnKind
    original: ChatRecord
    decisions: list[tuple[list[ChatRecord], list[StepRecord]]] = field(default_factory=list)
    """(transcript, steps) as each decision of the cycle sees them."""
    stored: list[ChatRecord] = field(default_factory=list)
    """Every non-transient message, in order (the memory service stores these)."""


def record(
    cycle_id: str, n: int, at: datetime, *, role: str, content: Any, history: bool, modal: str
) -> ChatRecord:
    return ChatRecord.model_validate(
        {
            "id": f"{cycle_id}.{n}",
            "cycle_id": cycle_id,
            "chat-history": history,
            "modal": modal,
            "role": role,
            "content": content,
            "created_at": at,
        }
    )


def make_cycle(rng: random.Random, turn: int) -> Cycle:
    kind = MIX[(turn - 1) % len(MIX)]
    cycle_id = f"cyc_{turn:04d}"
    at = START + timedelta(minutes=3 * turn)
    original = ChatRecord.model_validate(
        {
            "id": f"msg_{turn:04d}",
            "cycle_id": cycle_id,
            "chat-history": True,
            "modal": "text",
            "role": "user",
            "content": text(rng, (1, 3), (6, 16)),
            "created_at": at,
        }
    )
    cycle = Cycle(turn, kind, original, stored=[original])
    transcript = [original]
    steps: list[StepRecord] = []
    cycle.decisions.append((list(transcript), list(steps)))
    n = 0

    def add(role: str, content: Any, *, history: bool, modal: str = "text") -> ChatRecord:
        nonlocal n
        n += 1
        made = record(cycle_id, n, at, role=role, content=content, history=history, modal=modal)
        cycle.stored.append(made)
        if history:
            transcript.append(made)
        return made

    def tool(step: int, action: str, arguments: dict[str, Any] | None, summary: str = "") -> None:
        """A step's call (``summary`` empty) or result, as decision writes it."""
        writer = CycleState(
            cycle_id=cycle_id,
            user_id=USER,
            thread_id=THREAD,
            message_id=cycle.original.id,
            trace={},
            language="en",
            original=cycle.original,
            started_at=at,
        ).working(now=at)
        if summary:
            stored_only(outputs.result(writer, step, action, summary).record)
        else:
            stored_only(outputs.call(writer, step, action, arguments).record)

    def stored_only(made: ChatRecord) -> None:
        """A tool call or result: decision publishes it, the memory service stores it, but
        this cycle's decisions see the step in their list of steps instead."""
        cycle.stored.append(made)

    if kind == "search":
        queries = [sentence(rng, 2, 5).rstrip(".") for _ in range(rng.randint(1, 2))]
        arguments = {"mode": "semantic", "queries": queries}  # as the step reports them
        tool(1, "MemorySearch", arguments)
        cards = [memory_card(rng, turn, i, at) for i in range(rng.randint(1, 3))]
        for card in cards:
            add("system", card, history=True, modal="memory")
        add("assistant", text(rng, (1, 2), (8, 18)), history=True)
        found = ", ".join(f'{c["memory_id"]} ("{c["content"][:40]}")' for c in cards)
        summary = f"searched (semantic) for a topic: found {len(cards)} memories: {found}"
        tool(1, "MemorySearch", None, summary)
        steps.append(StepRecord(step=1, action="MemorySearch", status="ok", summary=summary))
        cycle.decisions.append((list(transcript), list(steps)))
    elif kind == "save":
        saved = {"memory_types": ["preference"]}
        tool(1, "MemorySave", saved)
        add("assistant", text(rng, (1, 2), (8, 18)), history=True)
        tool(1, "MemorySave", None, "saved 1 memory")
        steps.append(StepRecord(step=1, action="MemorySave", status="ok", summary="saved 1 memory"))
        cycle.decisions.append((list(transcript), list(steps)))
    if kind == "question":
        add("assistant", sentence(rng, 6, 14).rstrip(".") + "?", history=True)
    else:  # Finalize's answer: shown and stored, but not chat history
        add("assistant", text(rng, (2, 4), (8, 18)), history=False)
    return cycle


# -- measuring ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Count:
    words: int  # what the scripted provider reports as input tokens
    chars: int

    @property
    def approx_tokens(self) -> float:
        return self.chars / CHARS_PER_TOKEN


async def counted(model: ScriptedModel, prompt: Prompt, names: list[str]) -> Count:
    with usage.collecting() as used:
        await model.reasoning_heavy(LLMRequest(task="decide", prompt=prompt), names)
    chars = len(prompt.system) + sum(len(message.content) for message in prompt.messages)
    return Count(words=sum(u.input_tokens for u in used), chars=chars)


def state_for(
    cycle: Cycle,
    history: list[ChatRecord],
    transcript: list[ChatRecord],
    summary: HistorySummary | None = None,
) -> CycleState:
    return CycleState(
        history_summary=summary,
        cycle_id=cycle.original.cycle_id or "",
        user_id=USER,
        thread_id=THREAD,
        message_id=cycle.original.id,
        trace={},
        language="en",
        original=cycle.original,
        started_at=cycle.original.created_at,
        history=tuple(history),
        transcript=tuple(transcript),
    )


@dataclass
class Measured:
    turn: int
    limited: Count  # summaries and the messages they do not cover
    newest_only: Count  # the newest MEMORIA_HISTORY_LIMIT messages, no summary
    full_history: Count
    full_conversation: Count
    no_history: Count  # system, catalog, this cycle's transcript and the ask: the fixed part


def bounds(settings: Settings) -> SummaryBounds:
    return SummaryBounds(
        verbatim=settings.cycle.history_verbatim_messages,
        structured=settings.cycle.history_structured_messages,
        archive_chars=settings.cycle.history_archive_chars,
    )


async def play(turns: int, history_limit: int, seed: int) -> tuple[list[Measured], int]:
    settings = Settings.load(_env_file=None)
    rng = random.Random(seed)
    catalog: list[ActionSpec] = [a.spec for a in load_actions().enabled([]).values()]
    names = [spec.name for spec in catalog]
    model = ScriptedModel(Script(rules=[ScriptRule()]))
    measured: list[Measured] = []
    everything: list[ChatRecord] = []  # the whole conversation, answers included
    with tempfile.TemporaryDirectory(prefix="memoria-bench-") as tmp:
        store = await open_document_store(f"sqlite:///{Path(tmp) / 'memoria.db'}")
        try:
            history = HistoryRepository(store.collection(COLLECTION))
            await history.setup()
            summaries = SummaryStore(store.collection(SUMMARY_COLLECTION))
            summarizer = HistorySummarizer(history, summaries, bounds(settings), delay_s=0.0)
            seq = 0
            for turn in range(1, turns + 1):
                cycle = make_cycle(rng, turn)
                # What the memory service answers decision's history.query (summary=True).
                stored = await summaries.get(USER, THREAD)
                limited = await history.recent(
                    USER,
                    THREAD,
                    limit=history_limit,
                    exclude_cycle_id=cycle.original.cycle_id,
                    only_chat_history=True,
                    after_seq=stored.until_seq if stored else None,
                )
                summary = bounded_summary(
                    stored.summary if stored else None, settings.cycle.history_summary_prompt_chars
                )
                newest = await history.recent(
                    USER,
                    THREAD,
                    limit=history_limit,
                    exclude_cycle_id=cycle.original.cycle_id,
                    only_chat_history=True,
                )
                chat_history = [m for m in everything if m.chat_history]
                for transcript, steps in cycle.decisions:
                    counts = []
                    for earlier, summarized in (
                        (limited, summary),
                        (newest, None),
                        (chat_history, None),
                        (everything, None),
                        ([], None),
                    ):
                        state = state_for(cycle, earlier, transcript, summarized)
                        state = state.but(steps=tuple(steps))
                        counts.append(await counted(model, decision_prompt(state, catalog), names))
                    measured.append(Measured(turn, *counts))
                for message in cycle.stored:  # as the memory service stores chat.out
                    seq += 1
                    await history.save(USER, THREAD, message, seq)
                # In the service this runs in the background, after the cycle's messages.
                await summarizer.update(USER, THREAD)
                everything.extend(cycle.stored)
        finally:
            await store.close()
    return measured, len(catalog)


# -- report -------------------------------------------------------------------------------


def row(name: str, values: Sequence[Count], last: Sequence[Count]) -> str:
    words = [c.words for c in values]
    approx = [c.approx_tokens for c in values]
    return (
        f"{name:<44}{statistics.fmean(words):>9.0f}{statistics.fmean(c.words for c in last):>9.0f}"
        f"{max(words):>9}{statistics.fmean(approx):>11.0f}"
        f"{statistics.fmean(c.approx_tokens for c in last):>9.0f}"
    )


def percent(part: Sequence[Count], whole: Sequence[Count], attr: str) -> float:
    def size(count: Count) -> float:
        return count.words if attr == "words" else count.chars

    return 100 * sum(map(size, part)) / sum(map(size, whole))


def report(measured: list[Measured], turns: int, history_limit: int, actions: int) -> str:
    last_turn = [m for m in measured if m.turn == turns]
    limited = [m.limited for m in measured]
    full_history = [m.full_history for m in measured]
    full = [m.full_conversation for m in measured]
    mix = ", ".join(f"{MIX.count(kind)}/{len(MIX)} {kind}" for kind in dict.fromkeys(MIX))

    def ratios(against: list[Count], against_last: list[Count], label: str) -> list[str]:
        return [
            f"{label:<44}mean {percent(limited, against, 'words'):5.1f}%   "
            f"at turn {turns} {percent(mine_last, against_last, 'words'):5.1f}%   "
            f"(chars/4: mean {percent(limited, against, 'chars'):5.1f}%, "
            f"at turn {turns} {percent(mine_last, against_last, 'chars'):5.1f}%)"
        ]

    mine_last = [m.limited for m in last_turn]
    full_last = [m.full_conversation for m in last_turn]
    history_last = [m.full_history for m in last_turn]
    verdicts = []
    for label, against, against_last in (
        ("the whole conversation", full, full_last),
        ("all chat history", full_history, history_last),
    ):
        at_last = percent(mine_last, against_last, "words")
        verdicts.append(
            f"  vs {label}: {at_last:.1f}% at turn {turns} "
            f"({'met' if at_last <= GOAL_PERCENT else 'missed'}); "
            f"{percent(limited, against, 'words'):.1f}% over all {turns} turns"
        )
    return "\n".join(
        [
            f"prompt tokens per decision: {turns}-turn synthetic conversation, "
            f"{len(measured)} decisions (turn mix: {mix})",
            "prompt: memoria_decision.chooser.decision_prompt, the real catalog "
            f"({actions} actions); history: the thread's summaries (HistorySummarizer) and "
            f"the newest messages after them (HistoryRepository.recent on SQLite, at most "
            f"MEMORIA_HISTORY_LIMIT={history_limit})",
            "counted: input tokens the scripted provider reports (its count is words), "
            f"and characters / {CHARS_PER_TOKEN}",
            "",
            f"{'prompt of each decision':<44}{'words':>9}{'':>9}{'':>9}{'≈ tokens':>11}",
            f"{'':<44}{'mean':>9}{f'turn {turns}':>9}{'max':>9}{'mean':>11}{f'turn {turns}':>9}",
            row("Memoria (summaries + the messages after them)", limited, mine_last),
            row(
                f"newest {history_limit} messages, no summary",
                [m.newest_only for m in measured],
                [m.newest_only for m in last_turn],
            ),
            row("all chat-history messages (no limit)", full_history, history_last),
            row("the whole conversation (answers too)", full, full_last),
            row(
                "no history (system, catalog, this cycle)",
                [m.no_history for m in measured],
                [m.no_history for m in last_turn],
            ),
            "",
            "Memoria's share:",
            *ratios(full, full_last, "of sending the whole conversation"),
            *ratios(full_history, history_last, "of sending all chat history"),
            "",
            f"goal: a decision's prompt ≤ {GOAL_PERCENT:g}% of the full history's at {turns} "
            "turns (scripted count)",
            *verdicts,
        ]
    )


def parse_options(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--turns", type=int, default=DEFAULT_TURNS)
    parser.add_argument(
        "--history-limit",
        type=int,
        default=None,
        help="default: MEMORIA_HISTORY_LIMIT's default",
    )
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    namespace = parser.parse_args(argv)
    if namespace.turns < 1:
        parser.error("--turns must be at least 1")
    return namespace


def main(argv: Sequence[str] | None = None) -> int:
    options = parse_options(argv)
    limit = options.history_limit or Settings.load(_env_file=None).cycle.history_limit
    measured, actions = asyncio.run(play(options.turns, limit, options.seed))
    print(report(measured, options.turns, limit, actions))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Convert PrefEval's explicit preferences (``benchmark_dataset/explicit_preference/*.json``
of github.com/amazon-science/PrefEval) into the JSON Lines ``retrieval_quality.py`` reads:
short first-person facts ("I have a severe nut allergy ...") and, for each, a later request
that needs it without naming it ("Can you recommend some popular local dishes I should try
during my visit to Thailand?").

    .venv/bin/python bench/convert_prefeval.py DIR_WITH_THE_TOPIC_JSON [--out bench/data]

Each "user" holds the preferences of ``TOPICS_PER_USER`` topics (so a question competes with
its own topic's near neighbours and with other topics'); every preference is one memory and
its question's evidence. Users split by topic into ``dev`` (tune on it) and ``test`` (report
only). See ``data/README.md``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

DEFAULT_OUT: Final = Path(__file__).resolve().parent / "data"
TOPICS_PER_USER: Final = 5
SAID_AT: Final = "2025-01-01T12:00:00Z"
"""PrefEval gives no times; one fixed time for every memory."""
SPLITS: Final = ("dev", "test")


def topic_files(directory: Path) -> list[Path]:
    """The topic files in name order (the order users and splits are made in)."""
    files = sorted(directory.glob("*.json"))
    if not files:
        raise SystemExit(f"{directory}: no topic *.json files")
    return files


def read_topic(path: Path) -> list[dict[str, str]]:
    entries = json.loads(path.read_text())
    pairs = []
    for number, entry in enumerate(entries):
        preference, question = entry.get("preference"), entry.get("question")
        if not (isinstance(preference, str) and isinstance(question, str)):
            raise ValueError(f"{path.name}[{number}]: no preference and question")
        pairs.append({"preference": " ".join(preference.split()), "question": question.strip()})
    return pairs


def user_line(user: str, topics: Sequence[tuple[str, list[dict[str, str]]]]) -> dict[str, Any]:
    turns: list[dict[str, str]] = []
    questions: list[dict[str, Any]] = []
    for topic, pairs in topics:
        for number, pair in enumerate(pairs):
            turn_id = f"{topic}:{number}"
            turns.append(
                {"id": turn_id, "speaker": "", "text": pair["preference"], "time": SAID_AT}
            )
            questions.append(
                {
                    "question": pair["question"],
                    "answer": "",
                    "category": topic,
                    "evidence": [turn_id],
                }
            )
    return {"conversation_id": user, "turns": turns, "questions": questions}


def convert(directory: Path) -> dict[str, list[dict[str, Any]]]:
    """The users of each split. Topics are dealt to users in name order, TOPICS_PER_USER
    each; users alternate between dev and test, so both hold every kind of topic."""
    topics = [(path.stem, read_topic(path)) for path in topic_files(directory)]
    groups = [topics[i : i + TOPICS_PER_USER] for i in range(0, len(topics), TOPICS_PER_USER)]
    splits: dict[str, list[dict[str, Any]]] = {split: [] for split in SPLITS}
    for number, group in enumerate(groups):
        split = SPLITS[number % len(SPLITS)]
        splits[split].append(user_line(f"prefeval-{number + 1:02d}", group))
    return splits


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("directory", type=Path)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for split, users in convert(args.directory).items():
        path = args.out / f"prefeval_{split}.jsonl"
        path.write_text("".join(json.dumps(u, ensure_ascii=False) + "\n" for u in users))
        for user in users:
            topics = sorted({q["category"] for q in user["questions"]})
            print(
                f"{split}: {user['conversation_id']}, {len(user['turns'])} memories, "
                f"topics {', '.join(topics)}",
                file=sys.stderr,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

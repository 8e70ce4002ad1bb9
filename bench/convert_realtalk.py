"""Convert REALTALK's conversations (``data/Chat_*.json`` of github.com/danny911kr/REALTALK)
into the compact JSON Lines that ``retrieval_quality.py`` reads: one conversation a line,
split by conversation into ``dev`` (tune on it) and ``test`` (report only).

    .venv/bin/python bench/convert_realtalk.py DIR_WITH_CHAT_JSON [--out bench/data]

Only the top-level ``Chat_*.json`` files are read: the upstream ``data/`` folder also holds
other datasets in subfolders, which this bench must never see. See ``data/README.md``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Final

DEFAULT_OUT: Final = Path(__file__).resolve().parent / "data"
DEV_CHATS: Final = frozenset({1, 3, 5, 7, 9})
"""Conversations by number; the others are the test part. Odd and even numbers mix short
(400-650 turns) and long (1000-1500 turns) conversations in both parts."""
SPLITS: Final = ("dev", "test")
TURN_ID: Final = re.compile(r"^D(\d+):(\d+)$")
TURN_RANGE: Final = re.compile(r"^D(\d+):(\d+)-D(\d+):(\d+)$")
SEPARATORS: Final = re.compile(r"[;,\s]+")
UPSTREAM_TIME: Final = "%d.%m.%Y, %H:%M:%S"


@dataclass(frozen=True)
class EvidenceParse:
    ids: list[str]
    """The turn ids named, in order, without repeats, only those the conversation holds."""
    dropped: list[str]
    """The labels (or parts of labels) that named no turn of the conversation."""


def parse_evidence(labels: Iterable[str], turn_ids: Sequence[str]) -> EvidenceParse:
    """Upstream evidence labels are mostly ``D3:7`` but also ``D5:12;D5:16``,
    ``D12:3-D12:5`` (a range within one session) and ``D5:3.``: read them all."""
    known = set(turn_ids)
    ids: list[str] = []
    dropped: list[str] = []
    for label in labels:
        for part in (p.rstrip(".") for p in SEPARATORS.split(label.strip()) if p):
            if TURN_ID.match(part):
                named = [part]
            elif (span := TURN_RANGE.match(part)) and span[1] == span[3]:
                first, last = int(span[2]), int(span[4])
                named = [f"D{span[1]}:{n}" for n in range(first, last + 1)]
            else:
                dropped.append(part)
                continue
            for turn_id in named:
                if turn_id not in known:
                    dropped.append(turn_id)
                elif turn_id not in ids:
                    ids.append(turn_id)
    return EvidenceParse(ids, dropped)


def _iso(upstream: str) -> str:
    return datetime.strptime(upstream, UPSTREAM_TIME).isoformat() + "Z"


def _session_number(key: str) -> int:
    return int(key.removeprefix("session_"))


def convert_chat(chat_id: str, raw: Mapping[str, Any]) -> tuple[dict[str, Any], int]:
    """One upstream conversation → one line; also how many evidence labels were dropped."""
    sessions = sorted(
        (key for key, value in raw.items() if re.fullmatch(r"session_\d+", key)),
        key=_session_number,
    )
    turns = [
        {
            "id": turn["dia_id"],
            "speaker": turn["speaker"],
            "text": " ".join(turn["clean_text"].split()),
            "time": _iso(turn["date_time"]),
        }
        for key in sessions
        for turn in raw[key]
        if turn["clean_text"].strip()  # a photo alone has no text to remember
    ]
    turn_ids = [turn["id"] for turn in turns]
    questions = []
    dropped = 0
    for qa in raw["qa"]:
        evidence = parse_evidence(qa.get("evidence", []), turn_ids)
        dropped += len(evidence.dropped)
        if evidence.ids:  # a question with no evidence left cannot be scored
            questions.append(
                {
                    "question": qa["question"],
                    "answer": str(qa.get("answer", "")),
                    "category": qa.get("category"),
                    "evidence": evidence.ids,
                }
            )
    line = {"conversation_id": chat_id, "turns": turns, "questions": questions}
    return line, dropped


def chat_number(path: Path) -> int:
    match = re.match(r"Chat_(\d+)_", path.name)
    if match is None:
        raise ValueError(f"not a REALTALK conversation file: {path.name}")
    return int(match[1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("source", type=Path, help="a folder holding REALTALK's Chat_*.json")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    files = sorted(args.source.glob("Chat_*.json"), key=chat_number)
    if not files:
        print(f"no Chat_*.json in {args.source}", file=sys.stderr)
        return 2
    lines: dict[str, list[str]] = {split: [] for split in SPLITS}
    for path in files:
        number = chat_number(path)
        line, dropped = convert_chat(f"realtalk-{number:02d}", json.loads(path.read_text()))
        split = "dev" if number in DEV_CHATS else "test"
        lines[split].append(json.dumps(line, ensure_ascii=False, separators=(",", ":")))
        print(
            f"{path.name}: {split}, {len(line['turns'])} turns, "
            f"{len(line['questions'])} questions, {dropped} evidence labels dropped"
        )
    args.out.mkdir(parents=True, exist_ok=True)
    for split, content in lines.items():
        (args.out / f"realtalk_{split}.jsonl").write_text("\n".join(content) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

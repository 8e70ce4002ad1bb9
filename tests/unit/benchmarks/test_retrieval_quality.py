"""The pure parts of the retrieval-quality bench: reading the dataset, the memory each turn
becomes, the scores, and the evidence labels the converter reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.convert_realtalk import convert_chat, parse_evidence
from bench.retrieval_quality import (
    DATA_DIR,
    MAX_BINDING_CHARS,
    QUALITY_HEADER,
    Hit,
    StageScores,
    Turn,
    binding_of,
    cards,
    filler,
    format_table,
    load_split,
    memory_body,
    parse_args,
    recall_at,
    reciprocal_rank,
)

EVIDENCE = frozenset({"D1:2", "D1:5"})
RANKED = [Hit("D1:9", 0.8), Hit("D1:2", 0.7), Hit("D1:3", 0.5), Hit("D1:5", 0.0)]


def test_recall_counts_the_evidence_found_within_k() -> None:
    assert recall_at(RANKED, EVIDENCE, 1) == 0.0
    assert recall_at(RANKED, EVIDENCE, 2) == 0.5
    assert recall_at(RANKED, EVIDENCE, 10) == 1.0


def test_reciprocal_rank_is_that_of_the_first_evidence_turn() -> None:
    assert reciprocal_rank(RANKED, EVIDENCE) == 0.5
    assert reciprocal_rank(RANKED[2:3], EVIDENCE) == 0.0


def test_cards_are_the_results_at_or_above_the_cutoff() -> None:
    assert [hit.turn_id for hit in cards(RANKED, 0.7)] == ["D1:9", "D1:2"]


def test_stage_scores_average_over_questions_and_pool_card_precision() -> None:
    scores = StageScores("dense", cutoff=0.6)
    scores.add(RANKED, EVIDENCE, latency_ns=2_000_000)
    scores.add([Hit("D2:1", 0.9)], frozenset({"D2:1"}), latency_ns=4_000_000)
    row = dict(zip(QUALITY_HEADER, scores.row(), strict=True))
    assert row["questions"] == "2"
    assert row["R@10"] == "100.0"
    assert row["MRR"] == f"{(0.5 + 1.0) / 2:.3f}"
    # Cards: D1:9 (not evidence), D1:2 and D2:1 (evidence): 2 of 3.
    assert row["card precision"] == "66.7"
    assert scores.unranked == 1 and scores.results == 5


def test_a_long_turn_is_cut_to_the_binding_limit_at_a_word() -> None:
    text = "word " * 100
    binding = binding_of(text)
    assert len(binding) <= MAX_BINDING_CHARS
    assert text.startswith(binding) and binding.endswith("word")
    assert binding_of("short turn") == "short turn"


def test_a_turn_becomes_one_memory_with_speaker_time_and_binding() -> None:
    turn = Turn("D1:1", "Emi", "Hey! How are you?", "2023-12-29T22:42:04Z")
    assert memory_body(turn) == {
        "content": "Emi: Hey! How are you?",
        "bindings": ["Emi: Hey! How are you?"],
        "creation_datetime": "2023-12-29T22:42:04Z",
    }


def test_filler_users_hold_per_user_memories_reusing_the_turns() -> None:
    turns = [Turn(f"D1:{n}", "A", f"t{n}", "2024-01-01T00:00:00Z") for n in range(3)]
    items = list(filler(turns, per_user=2, start=1, stop=5))
    assert [user for user, _ in items] == [
        "rq-filler-0000",
        "rq-filler-0001",
        "rq-filler-0001",
        "rq-filler-0002",
    ]
    assert [turn.text for _, turn in items] == ["t1", "t2", "t0", "t1"]


def _line(turns: list[str], evidence: list[str]) -> str:
    return json.dumps(
        {
            "conversation_id": "c",
            "turns": [{"id": t, "speaker": "A", "text": t, "time": "x"} for t in turns],
            "questions": [{"question": "q", "evidence": evidence, "category": 1}] * 3,
        }
    )


def test_load_split_limits_questions_across_conversations(tmp_path: Path) -> None:
    path = tmp_path / "split.jsonl"
    path.write_text(_line(["D1:1"], ["D1:1"]) + "\n" + _line(["D1:1"], ["D1:1"]) + "\n")
    conversations = load_split(path, limit_questions=4)
    assert [len(c.questions) for c in conversations] == [3, 1]
    assert all(len(c.turns) == 1 for c in conversations)


def test_a_missing_split_says_where_it_comes_from(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match=r"bench/data/README\.md"):
        load_split(tmp_path / "absent.jsonl")


def test_load_split_refuses_evidence_naming_no_turn(tmp_path: Path) -> None:
    path = tmp_path / "split.jsonl"
    path.write_text(_line(["D1:1"], ["D9:9"]) + "\n")
    with pytest.raises(ValueError, match="evidence names no turn"):
        load_split(path)


@pytest.mark.skipif(
    not all((DATA_DIR / f"realtalk_{split}.jsonl").exists() for split in ("dev", "test")),
    reason="the REALTALK splits are built locally from upstream (bench/data/README.md)",
)
def test_the_built_splits_load_and_share_no_conversation() -> None:
    dev = load_split(DATA_DIR / "realtalk_dev.jsonl")
    test = load_split(DATA_DIR / "realtalk_test.jsonl")
    assert dev and test
    assert not {c.id for c in dev} & {c.id for c in test}


def test_stages_are_checked() -> None:
    assert parse_args(["--stages", "dense,hybrid"]).stages == ["dense", "hybrid"]
    with pytest.raises(SystemExit):
        parse_args(["--stages", "bm25"])


def test_format_table_pads_columns() -> None:
    lines = format_table(["a", "bb"], [["1", "2"]])
    assert lines == ["| a | bb |", "|---|----|", "| 1 |  2 |"]


@pytest.mark.parametrize(
    ("labels", "ids", "dropped"),
    [
        (["D1:2"], ["D1:2"], []),
        (["D1:2;D1:3", "D1:3"], ["D1:2", "D1:3"], []),
        (["D1:3; D2:1."], ["D1:3", "D2:1"], []),
        (["D1:1-D1:3"], ["D1:1", "D1:2", "D1:3"], []),
        (["D1:9", "D1:2-D2:1", "D1:2"], ["D1:2"], ["D1:9", "D1:2-D2:1"]),
    ],
)
def test_evidence_labels_as_written_upstream(
    labels: list[str], ids: list[str], dropped: list[str]
) -> None:
    known = ["D1:1", "D1:2", "D1:3", "D2:1"]
    parsed = parse_evidence(labels, known)
    assert parsed.ids == ids
    assert parsed.dropped == dropped


def test_convert_chat_keeps_sessions_in_order_and_drops_unscorable_questions() -> None:
    def turn(dia_id: str, text: str) -> dict[str, object]:
        return {
            "dia_id": dia_id,
            "speaker": "A",
            "clean_text": text,
            "date_time": "29.12.2023, 22:42:04",
        }

    raw = {
        "session_10": [turn("D2:1", "later")],
        "session_2": [turn("D1:1", "  first \n turn "), turn("D1:2", " ")],
        "session_2_date_time": "29.12.2023, 22:42:04",
        "qa": [
            {"question": "q1", "answer": 3, "evidence": ["D1:1"], "category": 1},
            {"question": "q2", "answer": "a", "evidence": ["D1:2"], "category": 2},
        ],
    }
    line, dropped = convert_chat("realtalk-01", raw)
    assert [t["id"] for t in line["turns"]] == ["D1:1", "D2:1"]
    assert line["turns"][0]["text"] == "first turn"
    assert line["turns"][0]["time"] == "2023-12-29T22:42:04Z"
    assert [q["question"] for q in line["questions"]] == ["q1"]
    assert line["questions"][0]["answer"] == "3"
    assert dropped == 1


def test_the_raw_cosine_row_alone_needs_no_stage() -> None:
    assert parse_args(["--stages", "", "--raw-cosine"]).stages == []
    with pytest.raises(SystemExit):
        parse_args(["--stages", ""])

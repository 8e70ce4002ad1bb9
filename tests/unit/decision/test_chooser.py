"""Reading an action name out of what a model answered."""

from __future__ import annotations

import pytest

from memoria_decision.chooser import match_action

NAMES = ["Finalize", "Question", "MemorySearch", "MemorySave"]


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("Finalize", "Finalize"),
        ("  MemorySearch\n", "MemorySearch"),
        ("memorysave", "MemorySave"),
        ("`Question`", "Question"),
        ('"Finalize".', "Finalize"),
        ("**MemorySearch**", "MemorySearch"),
        ("The next action is MemorySearch.", "MemorySearch"),
        ("Search the memories", None),
        ("MemorySearch or Finalize", None),
        ("", None),
        ("Bogus", None),
    ],
)
def test_match_action(answer: str, expected: str | None) -> None:
    assert match_action(answer, NAMES) == expected

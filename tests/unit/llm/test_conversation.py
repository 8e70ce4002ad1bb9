"""Tool-role history: stored records → prompt turns, and the summaries' prompt bound."""

from __future__ import annotations

import sys
from pathlib import Path

from memoria_contracts.history import HistorySummary, SummaryTurn
from memoria_llm.conversation import bounded_summary, conversation, summary_text
from memoria_llm.port import PromptMessage, PromptToolCall

sys.path.insert(0, str(Path(__file__).parents[2] / "support"))
from tool_history import answer, call, card, result, thread, user


def test_tool_calls_and_results_become_native_turns_each_result_after_its_call() -> None:
    messages = conversation(thread())
    assert [(m.role, m.tool_call_id, [c.name for c in m.tool_calls]) for m in messages] == [
        ("user", None, []),
        ("assistant", None, ["MemorySearch"]),
        ("tool", "call_c1_1", []),
        ("assistant", None, []),  # the memory card and the answer, merged
        ("user", None, []),
        ("assistant", None, ["MemorySearch"]),
        ("tool", "call_c2_1", []),
        ("assistant", None, ["MemorySave"]),
        ("tool", "call_c2_2", []),
        ("assistant", None, []),
    ]
    assert messages[1].tool_calls == (
        PromptToolCall(id="call_c1_1", name="MemorySearch", arguments={}),
    )
    assert messages[2] == PromptMessage(
        role="tool", content="found 1 memory", tool_call_id="call_c1_1", name="MemorySearch"
    )
    assert messages[3].content == (
        '[memory found] {"memory_id": "mem_1", "content": "favourite colour: green", '
        '"memory_type": "preference"}\n\nYour favourite colour is green.'
    )


def test_a_result_without_an_id_falls_back_to_text() -> None:
    records = [
        user("c1", "What is my favourite colour?"),
        result("c1", 1, "MemorySearch", "3 found", with_id=False),
        answer("c1", "Green."),
    ]
    assert conversation(records) == [
        PromptMessage(role="user", content="What is my favourite colour?"),
        PromptMessage(role="assistant", content="[MemorySearch] 3 found\n\nGreen."),
    ]


def test_a_call_or_result_whose_partner_is_missing_falls_back_to_text() -> None:
    # The history window cut between call and result, or the step never finished.
    orphan_result = [result("c1", 1, "MemorySearch", "found 2 memories"), answer("c1", "Hi")]
    unanswered = [user("c2", "hello"), call("c2", 1, "MemorySave")]
    assert conversation(orphan_result) == [
        PromptMessage(role="assistant", content="[MemorySearch] found 2 memories\n\nHi")
    ]
    assert conversation(unanswered) == [
        PromptMessage(role="user", content="hello"),
        PromptMessage(role="assistant", content="[called] MemorySave {}"),
    ]


def test_tool_turns_are_never_merged_with_text_turns() -> None:
    records = [user("c1", "hi"), card("c1", 1, "x"), call("c1", 1, "MemorySearch")]
    records.append(result("c1", 1, "MemorySearch", "found 0 memories"))
    roles = [(m.role, m.plain) for m in conversation(records)]
    assert roles == [("user", True), ("assistant", True), ("assistant", False), ("tool", False)]


def test_the_summary_is_cut_to_its_bound_keeping_the_newest() -> None:
    turns = [SummaryTurn(cycle_id=f"c{n}", lines=[f"user: question {n}"]) for n in range(50)]
    archive = "\n".join(f"- user: old {n}" for n in range(100))
    summary = HistorySummary(turns=turns, archive=archive)

    bounded = bounded_summary(summary, 400)

    assert bounded is not None
    assert len(summary_text(bounded)) <= 400 + 200  # the two headings
    assert bounded.turns[-1].cycle_id == "c49"
    assert len(bounded.turns) < len(turns)
    assert bounded_summary(summary, 0) is None
    assert bounded_summary(None, 1000) is None
    roomy = bounded_summary(summary, 100_000)
    assert roomy == summary
    text = summary_text(roomy)
    assert text.index("old 99") < text.index("question 0")  # the archive comes first
    assert summary_text(None) == ""

"""MemoryUpdate and MemoryDelete: changes go to the memories named, and a memory that is not
found is reported, not a failure of the step."""

from __future__ import annotations

import json

import pytest

from memoria_contracts.chat import CardInfo
from memoria_contracts.memory import MemoryDelete, MemoryUpdate

from .harness import Harness, card, memory
from .plans import ACTIONS, HOME

TEA = memory("mem_tea1", "Likes green tea", memory_type="preference")


async def test_update_changes_the_memory_and_reports_what_was_not_found(
    harness: Harness,
) -> None:
    harness.memory.memories[HOME.memory_id] = HOME
    plan = {
        "updates": [
            {"_id": "mem_home1", "content": "Lives in Rio de Janeiro", "bindings": ["home city"]},
            {"memory_id": "mem_ghost1", "content": {"city": "Recife"}},
        ]
    }
    ctx, llm = harness.context(
        "MemoryUpdate", plan, message="actually I moved to Rio", history=[card(HOME)]
    )

    outcome = await ACTIONS["MemoryUpdate"](ctx)

    home, ghost = harness.memory.requests(MemoryUpdate)
    assert (home.memory_id, home.content, home.content_kind) == (
        "mem_home1",
        "Lives in Rio de Janeiro",
        "text",
    )
    assert home.bindings == ["home city"]
    assert (ghost.memory_id, ghost.content_kind, ghost.bindings) == ("mem_ghost1", "json", None)
    assert harness.memory.memories["mem_home1"].content == "Lives in Rio de Janeiro"

    assert outcome.status == "ok"
    assert outcome.summary == (
        'updated 1 memory: mem_home1 ("Lives in São Paulo" -> "Lives in Rio de Janeiro"); '
        "not found: mem_ghost1"
    )
    assert outcome.arguments == {  # its tool call, with what "forget that" would forget
        "memory_ids": ["mem_home1", "mem_ghost1"],
        "written_ids": ["mem_home1"],
    }
    assert harness.publisher.notices() == []
    plan_prompt = llm.requests[0].prompt.messages[-1].content
    assert "mem_home1 [user_profile] Lives in São Paulo" in plan_prompt  # loaded earlier
    results = json.loads(llm.requests[-1].metadata["results"])
    assert results["updated"][0]["old_content"] == "Lives in São Paulo"
    assert results["not_found"] == ["mem_ghost1"]
    # A card of what is stored now, with what it replaced, before the explanation.
    [updated] = [m for m in outcome.messages if m.modal == "memory"]
    assert updated.content["content"] == "Lives in Rio de Janeiro"
    assert updated.card == CardInfo(kind="updated", replaced="Lives in São Paulo")


async def test_delete_removes_the_memories_and_reports_what_was_not_found(
    harness: Harness,
) -> None:
    harness.memory.memories.update({HOME.memory_id: HOME, TEA.memory_id: TEA})
    ctx, llm = harness.context(
        "MemoryDelete",
        {"memory_ids": ["mem_tea1", "mem_ghost1", "mem_tea1"]},
        message="forget that I like tea",
        earlier=[card(TEA)],
    )

    outcome = await ACTIONS["MemoryDelete"](ctx)

    assert [r.memory_id for r in harness.memory.requests(MemoryDelete)] == [
        "mem_tea1",
        "mem_ghost1",
    ]
    assert list(harness.memory.memories) == ["mem_home1"]
    assert outcome.status == "ok"
    assert outcome.summary == (
        'deleted 1 memory: mem_tea1 ("Likes green tea"); not found: mem_ghost1'
    )
    assert outcome.arguments == {"memory_ids": ["mem_tea1", "mem_ghost1"]}  # its tool call
    results = json.loads(llm.requests[-1].metadata["results"])
    assert results["deleted"] == [{"memory_id": "mem_tea1", "deleted_content": "Likes green tea"}]


@pytest.mark.parametrize("action", ["MemoryUpdate", "MemoryDelete"])
async def test_only_unknown_ids_still_make_a_successful_step(harness: Harness, action: str) -> None:
    plan = (
        {"updates": [{"_id": "mem_ghost1", "content": "x"}]}
        if action == "MemoryUpdate"
        else ["mem_ghost1"]
    )
    ctx, _ = harness.context(action, plan)

    outcome = await ACTIONS[action](ctx)

    assert outcome.status == "ok"
    assert outcome.summary.endswith("0 memories; not found: mem_ghost1")

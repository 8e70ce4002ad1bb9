"""With a model, a correction goes search first, then update: the planner's description of
MemoryUpdate says to find the memory being corrected first, the search plan's prompt says to
look for it by its subject rather than by the new value, and the update, given the memory
the search loaded, changes it instead of keeping a second one."""

from __future__ import annotations

from memoria_action_worker.registry import REGISTRY
from memoria_contracts.memory import MemorySave, MemoryUpdate

from .harness import Harness, card, memory
from .plans import ACTIONS

COFFEE = memory("mem_coffee", "I drink coffee every morning", memory_type="preference")
CORRECTION = "actually, I drink tea"


def test_the_planner_is_told_to_search_before_updating() -> None:
    described = {name: a.spec.description for name, a in REGISTRY.enabled(()).items()}
    assert "use MemorySearch first" in described["MemoryUpdate"]


async def test_the_search_for_a_correction_looks_for_what_is_corrected(harness: Harness) -> None:
    plan = {"queries": ["what the user drinks", "coffee"]}
    ctx, llm = harness.context("MemorySearch", plan, message=CORRECTION)

    await ACTIONS["MemorySearch"](ctx)

    system = llm.requests[0].prompt.system
    assert "look for the fact being corrected by its subject" in system
    assert "not by the new value alone" in system


async def test_the_update_changes_the_memory_the_search_loaded(harness: Harness) -> None:
    harness.memory.memories[COFFEE.memory_id] = COFFEE
    plan = {"updates": [{"_id": "mem_coffee", "content": "I drink tea every morning"}]}
    ctx, llm = harness.context(
        "MemoryUpdate", plan, message=CORRECTION, earlier=[card(COFFEE, "cyc_test1.1.1")]
    )

    outcome = await ACTIONS["MemoryUpdate"](ctx)

    (update,) = harness.memory.requests(MemoryUpdate)
    assert (update.memory_id, update.content) == ("mem_coffee", "I drink tea every morning")
    assert harness.memory.requests(MemorySave) == []
    assert outcome.status == "ok"
    prompt = llm.requests[0].prompt
    assert "the one holding the fact being corrected" in prompt.system
    assert "mem_coffee" in prompt.messages[-1].content

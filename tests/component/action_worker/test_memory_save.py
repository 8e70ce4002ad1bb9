"""MemorySave: one embedding call for every binding, one idempotent save per memory, and a
re-run of the step that repeats the same saves."""

from __future__ import annotations

import json

from memoria_contracts.chat import CardInfo
from memoria_contracts.memory import MemoryEmbed, MemoryFailure, MemorySave

from .harness import CYCLE_ID, EMBEDDER, STEP, Harness, memory
from .plans import ACTIONS, SAVE_PLAN


async def test_embeds_all_bindings_once_and_saves_each_memory_with_its_vectors(
    harness: Harness,
) -> None:
    ctx, llm = harness.context(
        "MemorySave", SAVE_PLAN, chat="Saved your peanut allergy and your booking."
    )

    outcome = await ACTIONS["MemorySave"](ctx)

    [embed] = harness.memory.requests(MemoryEmbed)
    assert embed.purpose == "passage"
    assert embed.texts == ["allergies", "food restrictions", "alergias", "flight booking"]
    first, second = harness.memory.requests(MemorySave)
    assert first.idempotency_key == f"{CYCLE_ID}:{STEP}:0"
    assert second.idempotency_key == f"{CYCLE_ID}:{STEP}:1"
    assert first.vectors == [[0.0, 9.0], [1.0, 17.0], [2.0, 8.0]]
    assert second.vectors == [[3.0, 14.0]]
    assert first.embedder == second.embedder == EMBEDDER
    assert (first.content_kind, first.memory_type, first.source) == ("text", "constraint", "chat")
    assert (second.content_kind, second.content) == (
        "json",
        {"airline": "LATAM", "booking": "ABC123"},
    )

    assert outcome.status == "ok"
    ids = list(harness.memory.memories)
    assert outcome.summary.startswith(f'saved 2 memories: {ids[0]} ("I am allergic to peanuts")')
    assert ids[1] in outcome.summary
    # A card of each memory stored, then the explanation.
    cards, explanation = outcome.messages[:2], outcome.messages[2]
    assert [(m.modal, m.content["memory_id"], m.card) for m in cards] == [
        ("memory", memory_id, CardInfo(kind="saved")) for memory_id in ids
    ]
    assert explanation.content == "Saved your peanut allergy and your booking."
    assert outcome.arguments == {  # its tool call, with what "forget that" would forget
        "memory_types": ["constraint", "critical_info"],
        "written_ids": ids,
    }
    saved = json.loads(llm.requests[-1].metadata["results"])["saved"]
    assert [s["memory_id"] for s in saved] == ids


async def test_a_fact_the_user_already_has_is_not_kept_twice(harness: Harness) -> None:
    held = memory("mem_held1", "I am allergic to peanuts", memory_type="constraint")
    harness.memory.memories[held.memory_id] = held
    ctx, llm = harness.context("MemorySave", SAVE_PLAN, chat="I knew that one already.")

    outcome = await ACTIONS["MemorySave"](ctx)

    assert all(save.reuse_same_content for save in harness.memory.requests(MemorySave))
    assert len(harness.memory.memories) == 2  # the booking is new, the allergy was held
    results = json.loads(llm.requests[-1].metadata["results"])
    assert [m["memory_id"] for m in results["already_saved"]] == ["mem_held1"]
    assert "mem_held1" not in [m["memory_id"] for m in results["saved"]]
    assert 'mem_held1 ("I am allergic to peanuts") (already saved)' in outcome.summary


async def test_a_rerun_of_the_step_reuses_its_plan(harness: Harness) -> None:
    ctx, _ = harness.context("MemorySave", SAVE_PLAN)
    first = await ACTIONS["MemorySave"](ctx)
    # The model would now answer something else; the step must repeat its first plan.
    changed = {
        "memories": [
            {
                "type": "text",
                "content": "Likes jazz",
                "bindings": ["music"],
                "memory_type": "preference",
            }
        ]
    }
    ctx_again, llm_again = harness.context("MemorySave", changed)

    second = await ACTIONS["MemorySave"](ctx_again)

    saves = harness.memory.requests(MemorySave)
    assert len(saves) == 4
    assert saves[2:] == saves[:2]
    assert [r.task for r in llm_again.requests] == ["MemorySave"]  # only the explanation
    assert len(harness.memory.memories) == 2
    assert second.summary.count("(already saved)") == 2
    assert second.summary.replace(" (already saved)", "") == first.summary


async def test_a_memory_the_service_refuses_is_reported_not_fatal(harness: Harness) -> None:
    refusal = MemoryFailure(code="invalid", error_message="too many bindings")
    ctx, _ = harness.context("MemorySave", SAVE_PLAN)
    harness.memory.failures["memory.save"] = refusal

    outcome = await ACTIONS["MemorySave"](ctx)

    assert outcome.status == "ok"
    assert outcome.summary.startswith("saved 0 memories; not saved: ")
    assert '"I am allergic to peanuts" (too many bindings)' in outcome.summary


async def test_a_failure_midway_names_what_was_saved_before(harness: Harness) -> None:
    ctx, _ = harness.context("MemorySave", SAVE_PLAN)
    harness.memory.failures["memory.save"] = TimeoutError()
    harness.memory.answered_before_failing["memory.save"] = 1

    outcome = await ACTIONS["MemorySave"](ctx)

    assert outcome.status == "failed"
    [saved_id] = list(harness.memory.memories)
    assert f"before that: saved 1 memory: {saved_id}" in outcome.summary
    assert len(harness.publisher.notices()) == 1


async def test_a_failing_explanation_does_not_undo_the_saves(harness: Harness) -> None:
    ctx, _ = harness.context("MemorySave", SAVE_PLAN, chat_fails=True)

    outcome = await ACTIONS["MemorySave"](ctx)

    assert outcome.status == "ok"
    assert [m.modal for m in outcome.messages] == ["memory", "memory"]  # no explanation
    assert outcome.summary.startswith("saved 2 memories")

"""The shared pieces: memory cards read back from a conversation, and plan schemas that take
the answer shapes models give but refuse what the memory service would."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from memoria_action_worker.actions.memory_delete import DeletePlan
from memoria_action_worker.actions.memory_save import SavePlan
from memoria_action_worker.actions.memory_search import SearchPlan
from memoria_action_worker.actions.memory_update import UpdatePlan
from memoria_action_worker.memory_steps import listing, memories_in, short
from memoria_contracts.chat import ChatRecord
from memoria_contracts.memory import MAX_EMBED_TEXTS

from .harness import card, memory
from .plans import HOME

TEA = memory("mem_tea1", "Likes green tea", memory_type="preference")


def test_memories_in_reads_cards_and_skips_malformed_ones() -> None:
    broken = ChatRecord(
        id="x.1", chat_history=True, modal="memory", role="system", content={"memory_id": 3}
    )
    text = ChatRecord(id="x.2", chat_history=True, modal="text", role="user", content="hi")
    newer_home = memory("mem_home1", "Lives in Rio")

    found = memories_in([card(HOME), broken, text, card(TEA), card(newer_home)])

    assert [(m.memory_id, m.content) for m in found] == [
        ("mem_home1", "Lives in Rio"),
        ("mem_tea1", "Likes green tea"),
    ]


def test_seed_shapes_are_accepted() -> None:
    assert SearchPlan.model_validate(["user's name"]).queries == ["user's name"]
    assert DeletePlan.model_validate([" mem_a1 "]).memory_ids == ["mem_a1"]
    single = {"type": "text", "content": "123456", "bindings": ["a"], "memory_type": "goal"}
    assert len(SavePlan.model_validate(single).memories) == 1
    assert UpdatePlan.model_validate({"_id": "mem_a1", "content": "x"}).updates[0].memory_id == (
        "mem_a1"
    )


def test_an_update_plan_survives_the_plan_cache_round_trip() -> None:
    plan = UpdatePlan.model_validate({"updates": [{"_id": "mem_a1", "content": {"k": 1}}]})
    assert UpdatePlan.model_validate_json(plan.model_dump_json()) == plan


@pytest.mark.parametrize(
    "memory_item",
    [
        {"type": "text", "content": "", "bindings": ["a"], "memory_type": "goal"},
        {"type": "json", "content": "text", "bindings": ["a"], "memory_type": "goal"},
        {"type": "text", "content": "x", "bindings": [], "memory_type": "goal"},
        {"type": "text", "content": "x", "bindings": ["a"], "memory_type": "mood"},
        {"type": "text", "content": "x" * 9000, "bindings": ["a"], "memory_type": "goal"},
    ],
)
def test_save_plans_refuse_what_the_memory_service_would(memory_item: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        SavePlan.model_validate({"memories": [memory_item]})


def test_save_plans_fit_one_embedding_request() -> None:
    many = [
        {
            "type": "text",
            "content": f"fact {i}",
            "bindings": [f"k{i}.{j}" for j in range(16)],
            "memory_type": "goal",
        }
        for i in range(MAX_EMBED_TEXTS // 16 + 1)
    ]
    with pytest.raises(ValidationError, match="bindings in all"):
        SavePlan.model_validate({"memories": many})


def test_summaries_stay_short() -> None:
    assert short("a  b\n c") == "a b c"
    assert len(short("x" * 500)) == 60
    assert listing([str(i) for i in range(12)]).endswith("8, 9 and 2 more")

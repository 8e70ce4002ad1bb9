"""Valid plans for each memory action, and the actions by name."""

from __future__ import annotations

from typing import Final

from memoria_action_worker.actions.memory_delete import memory_delete
from memoria_action_worker.actions.memory_save import memory_save
from memoria_action_worker.actions.memory_search import memory_search
from memoria_action_worker.actions.memory_update import memory_update
from memoria_action_worker.registry import ActionFn

from .harness import memory

ACTIONS: Final[dict[str, ActionFn]] = {
    "MemorySearch": memory_search,
    "MemorySave": memory_save,
    "MemoryUpdate": memory_update,
    "MemoryDelete": memory_delete,
}

SEARCH_PLAN: Final = {"queries": ["user's allergies", "food restrictions"]}
SAVE_PLAN: Final = {
    "memories": [
        {
            "type": "text",
            "content": "I am allergic to peanuts",
            "bindings": ["allergies", "food restrictions", "alergias"],
            "memory_type": "constraint",
        },
        {
            "type": "json",
            "content": {"airline": "LATAM", "booking": "ABC123"},
            "bindings": ["flight booking"],
            "memory_type": "critical_info",
        },
    ]
}
UPDATE_PLAN: Final = {"updates": [{"_id": "mem_home1", "content": "Lives in Rio de Janeiro"}]}
DELETE_PLAN: Final = ["mem_home1"]

PLANS: Final[dict[str, object]] = {
    "MemorySearch": SEARCH_PLAN,
    "MemorySave": SAVE_PLAN,
    "MemoryUpdate": UPDATE_PLAN,
    "MemoryDelete": DELETE_PLAN,
}

HOME = memory("mem_home1", "Lives in São Paulo", bindings=["home city", "where the user lives"])

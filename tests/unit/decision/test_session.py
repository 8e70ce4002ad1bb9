"""The session config and the memories recalled with the message, in the decision prompt and
for the steps (reading them is the core's: tests/unit/decision/test_core.py)."""

from __future__ import annotations

from datetime import UTC, datetime

from memoria_contracts.chat import ChatRecord
from memoria_contracts.events import ActionSpec, CycleContext
from memoria_contracts.memory import Memory
from memoria_decision.chooser import decision_prompt
from memoria_decision.core.state import CycleState
from memoria_offline.cycle import view
from memoria_runtime.session_defaults import session_defaults
from memoria_runtime.settings import Settings

SETTINGS = Settings.load(_env_file=None)
WHEN = datetime(2025, 1, 2, tzinfo=UTC)
CYCLE = "cyc_1"
PEANUTS = Memory(
    memory_id="mem_nuts1",
    memory_type="constraint",
    content="Is allergic to peanuts",
    bindings=["food allergy"],
    creation_datetime=WHEN,
    last_accessed=WHEN,
    updated_at=WHEN,
    relevance_score=0.9,
)


def original(text: str = "what can't I eat?") -> ChatRecord:
    return ChatRecord(
        id="msg_1", cycle_id=CYCLE, chat_history=True, modal="text", role="user", content=text
    )


def test_the_decision_prompt_carries_the_session_and_the_recalled_memories() -> None:
    session = session_defaults(SETTINGS, "t1").model_copy(
        update={"system_prompt": "Be a pirate.", "proactive_retrieval": True}
    )
    card = ChatRecord(
        id=f"{CYCLE}.0.1",
        cycle_id=CYCLE,
        chat_history=True,
        modal="memory",
        role="system",
        content=PEANUTS.model_dump(mode="json"),
    )
    state = CycleState(
        cycle_id=CYCLE,
        user_id="ana",
        thread_id="t1",
        message_id="msg_1",
        trace={},
        language="en",
        original=original(),
        started_at=WHEN,
        transcript=(original(), card),
        session=session,
    )
    catalog = [ActionSpec(name="Finalize", description="Answer.", ends_cycle=True)]
    prompt = decision_prompt(state, catalog)
    assert "Be a pirate." in prompt.system
    assert session.memory_type_descriptions["goal"] in prompt.system
    assert "Is allergic to peanuts" in "\n".join(m.content for m in prompt.messages)
    assert state.context().session == session
    without = decision_prompt(state.model_copy(update={"session": None}), catalog)
    assert "Be a pirate." not in without.system


def test_recalled_memories_count_as_found_before_the_first_step() -> None:
    """Their ids follow a step's (step 0), so readers of a cycle's finds count them."""
    card = ChatRecord(
        id=f"{CYCLE}.0.1",
        cycle_id=CYCLE,
        chat_history=True,
        modal="memory",
        role="system",
        content=PEANUTS.model_dump(mode="json"),
    )
    context = CycleContext(original_message=original(), transcript=[original(), card])
    assert view(context).found == ["mem_nuts1"]

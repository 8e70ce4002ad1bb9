"""The decision side of the session config: read once per cycle, with the defaults when
the memory service cannot say; proactive retrieval's memory cards; the decision prompt."""

from __future__ import annotations

from datetime import UTC, datetime

from memoria_contracts.chat import ChatRecord
from memoria_contracts.events import ActionSpec, CycleContext, HistoryPage, Payload
from memoria_contracts.memory import Memory, MemoryFailure, MemoryFound, MemorySearch
from memoria_contracts.session import SessionConfigGet, SessionConfigOverrides, SessionConfigState
from memoria_decision.prompt import decision_prompt
from memoria_decision.session import read_session, recall, recalled
from memoria_decision.state import CycleState
from memoria_offline.cycle import view
from memoria_runtime.memory_client import MemoryClient
from memoria_runtime.rpc import RpcError
from memoria_runtime.session_defaults import session_defaults
from memoria_runtime.settings import Settings

SETTINGS = Settings(_env_file=None)
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


class Memories(MemoryClient):
    """Answers in process; keeps the requests."""

    def __init__(self, reply: Payload | Exception) -> None:  # no broker
        self.reply = reply
        self.sent: list[tuple[str, str, str | None, Payload]] = []

    async def _call(
        self, user_id: str, thread_id: str, cycle_id: str | None, payload: Payload
    ) -> Payload:
        self.sent.append((user_id, thread_id, cycle_id, payload))
        if isinstance(self.reply, Exception):
            raise self.reply
        return self.reply


def original(text: str = "what can't I eat?") -> ChatRecord:
    return ChatRecord(
        id="msg_1", cycle_id=CYCLE, chat_history=True, modal="text", role="user", content=text
    )


async def test_the_cycle_reads_the_threads_config_once_with_defaults_if_missing() -> None:
    config = session_defaults(SETTINGS, "t1").model_copy(update={"memory_limit": 4})
    memories = Memories(SessionConfigState(config=config, overrides=SessionConfigOverrides()))
    assert (await read_session(memories, SETTINGS, "ana", "t1", CYCLE)).config == config
    [(user, thread, cycle, request)] = memories.sent
    assert (user, thread, cycle) == ("ana", "t1", CYCLE)
    assert request == SessionConfigGet(thread_id="t1", defaults_if_missing=True)


async def test_without_an_answer_the_cycle_runs_with_the_defaults() -> None:
    for failing in (Memories(TimeoutError()), Memories(HistoryPage(messages=[]))):
        got = (await read_session(failing, SETTINGS, "ana", "t1", CYCLE)).config
        assert got == session_defaults(SETTINGS, "t1")


async def test_recall_is_off_by_default() -> None:
    memories = Memories(MemoryFound(memories=[PEANUTS]))
    assert await recall(memories, session_defaults(SETTINGS, "t1"), "ana", original()) == []
    assert memories.sent == []


async def test_recall_searches_with_the_message_and_the_sessions_limits() -> None:
    session = session_defaults(SETTINGS, "t1").model_copy(
        update={"proactive_retrieval": True, "memory_limit": 2, "memory_min_relevance": 0.3}
    )
    memories = Memories(MemoryFound(memories=[PEANUTS]))
    long_message = "what   can't\nI eat? " + "x" * 400
    cards = await recall(memories, session, "ana", original(long_message))
    [(user, thread, cycle, search)] = memories.sent
    assert (user, thread, cycle) == ("ana", "t1", CYCLE)
    assert isinstance(search, MemorySearch)
    assert (search.mode, search.limit, search.min_relevance) == ("semantic", 2, 0.3)
    assert search.queries[0].startswith("what can't I eat? x") and len(search.queries[0]) == 300
    [card] = cards
    assert card.id == f"{CYCLE}.0.1"
    assert (card.modal, card.role, card.chat_history) == ("memory", "system", True)
    assert card.content["memory_id"] == "mem_nuts1"
    assert recalled([original(), *cards], CYCLE) == cards


async def test_a_failed_recall_leaves_the_cycle_without_memories() -> None:
    session = session_defaults(SETTINGS, "t1").model_copy(update={"proactive_retrieval": True})
    for reply in (
        RpcError("unexpected_reply", "x"),
        MemoryFailure(code="unavailable", error_message="down"),
    ):
        assert await recall(Memories(reply), session, "ana", original()) == []


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
        history=[],
        transcript=[original(), card],
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

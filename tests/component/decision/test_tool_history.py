"""Decision keeps each step in the thread's history as a tool call and its result, and
puts the thread's summary into prompts within its bound; on a real Redis, scripted LLM."""

from __future__ import annotations

from in_process_bus import FINALIZE, RecordingPublisher, scripted_engine
from redis.asyncio import Redis

from memoria_contracts.chat import ChatRecord
from memoria_contracts.events import (
    ActionCompleted,
    ActionOutcome,
    ActionRequested,
    ActionSpec,
    ChatPosted,
    Envelope,
    HistoryPage,
    HistoryQuery,
    Payload,
    UserMessageReceived,
)
from memoria_contracts.history import HistorySummary, SummaryTurn
from memoria_contracts.streams import Stream
from memoria_decision.chooser import decision_prompt
from memoria_decision.core import outputs
from memoria_decision.core.state import CycleState
from memoria_decision.executor import CycleExecutor
from memoria_llm.conversation import TURNS_HEADING
from memoria_llm.scripted import ScriptRule
from memoria_runtime import catalog
from memoria_runtime.bus.memory_requests import MemoryClient
from memoria_runtime.envelopes import follow
from memoria_runtime.partitions import Partitions
from memoria_runtime.settings import Settings

PARTITIONS = Partitions()
ONE = PARTITIONS.all[0]  # the embedded default: one partition, keys untagged

SEARCH = ActionSpec(name="MemorySearch", description="Search memories.", ends_cycle=False)
PROMPT_CHARS = 500
BIG_SUMMARY = HistorySummary(
    turns=[SummaryTurn(cycle_id=f"c{n}", lines=[f"user: question {n}"]) for n in range(200)],
    archive="\n".join(f"- user: old {n}" for n in range(200)),
)


class SummarizedHistory(MemoryClient):
    def __init__(self) -> None:  # no broker: answers in process
        self.queries: list[HistoryQuery] = []

    async def _call(
        self, user_id: str, thread_id: str, cycle_id: str | None, payload: Payload
    ) -> Payload:
        if isinstance(payload, HistoryQuery):  # other requests get it too, as a failure
            self.queries.append(payload)
        return HistoryPage(messages=[], summary=BIG_SUMMARY)


def engine_for(redis: Redis, publisher: RecordingPublisher, memory: MemoryClient) -> CycleExecutor:
    return scripted_engine(
        redis,
        publisher,
        rules=[ScriptRule(decide=["MemorySearch", "Finalize"])],
        memory=memory,
        settings=Settings.load(_env_file=None, history_summary_prompt_chars=PROMPT_CHARS),
    )


async def test_a_step_is_published_as_a_tool_call_then_its_result(redis: Redis) -> None:
    await catalog.advertise(redis, "worker-1", [SEARCH, FINALIZE], ttl_s=60)
    publisher = RecordingPublisher()
    memory = SummarizedHistory()
    engine = engine_for(redis, publisher, memory)
    message = UserMessageReceived(message_id="msg_tools1", content="what is my colour?")
    await engine.on_user_message(
        Envelope(user_id="ana", thread_id="t1", payload=message), message, b"framed"
    )

    (call,) = [r for r in publisher.chat() if r.tool_calls]
    assert call.tool_calls is not None and call.tool_calls[0].arguments == {}
    assert (call.role, call.chat_history, call.tool_record) == ("assistant", True, True)
    assert [c.name for c in call.tool_calls or []] == ["MemorySearch"]
    requests = [e for s, e in publisher.sent if s is Stream.ACTIONS]
    assert isinstance(requests[0].payload, ActionRequested)
    assert publisher.sent.index((Stream.CHAT_OUT, _posted(publisher, call))) < (
        publisher.sent.index((Stream.ACTIONS, requests[0]))
    )

    outcome = ActionOutcome(
        status="ok",
        ends_cycle=False,
        summary="found 3 memories",
        arguments={"mode": "semantic", "queries": ["favourite colour"]},
    )
    completed = follow(
        requests[0], ActionCompleted(step=1, action="MemorySearch", outcome=outcome, worker="w")
    )
    assert isinstance(completed.payload, ActionCompleted)
    await engine.on_action_completed(completed, completed.payload)

    (result,) = [r for r in publisher.chat() if r.role == "tool"]
    assert call.tool_calls is not None
    # The call again, same id, now with what the worker worked out; then the result.
    first, again = [r for r in publisher.chat() if r.tool_calls]
    assert again.id == first.id == call.id
    assert again.tool_calls is not None
    assert again.tool_calls[0].id == call.tool_calls[0].id
    assert again.tool_calls[0].arguments == {"mode": "semantic", "queries": ["favourite colour"]}
    assert publisher.chat().index(again) < publisher.chat().index(result)
    assert (result.tool_call_id, result.name, result.content) == (
        call.tool_calls[0].id,
        "MemorySearch",
        "found 3 memories",
    )
    # Finalize ends the cycle: its answer is the history, no tool call for it.
    assert len([r for r in publisher.chat() if r.tool_record]) == 3
    # The decision asked for the summary and kept only what fits the prompt's bound.
    assert memory.queries[0].summary is True
    state = await engine.store.load(ONE, requests[0].cycle_id or "")
    assert isinstance(state, CycleState) and state.history_summary is not None
    assert state.history_summary.turns[-1].cycle_id == "c199"
    assert len(state.history_summary.turns) < len(BIG_SUMMARY.turns)
    prompt = decision_prompt(state, [SEARCH, FINALIZE])
    assert TURNS_HEADING in prompt.system
    assert len(prompt.system) < 2000  # the system text, the session's and about 500 chars


def _posted(publisher: RecordingPublisher, record: ChatRecord) -> Envelope:
    (event,) = [
        e
        for s, e in publisher.sent
        if isinstance(e.payload, ChatPosted) and e.payload.message.id == record.id
    ]
    return event


def test_the_decision_prompt_without_a_summary_is_unchanged() -> None:
    original = ChatRecord(
        id="m1", cycle_id="c1", chat_history=True, modal="text", role="user", content="hi"
    )
    state = CycleState(
        cycle_id="c1",
        user_id="ana",
        thread_id="t1",
        message_id="m1",
        trace={},
        language="en",
        original=original,
        started_at=original.created_at,
        transcript=(original,),
    )
    assert TURNS_HEADING not in decision_prompt(state, [FINALIZE]).system


def test_big_arguments_are_cut_to_one_line() -> None:
    small = {"memory_ids": ["mem_1", "mem_2"]}
    assert outputs.compact_arguments(small) == small
    assert outputs.compact_arguments(None) == {}
    big = {"queries": ["x" * 100 for _ in range(10)]}
    cut = outputs.compact_arguments(big)
    assert list(cut) == ["summary"]
    assert len(cut["summary"]) == outputs.ARGUMENTS_CHARS

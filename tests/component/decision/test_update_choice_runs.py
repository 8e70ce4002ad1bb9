"""Choosing which memory an ambiguous MemoryUpdate meant: the pending ``choose_update``
resolved through the cycle's executor with no LLM call (the scripted model has no rules: any
model call would end the cycle "llm_error"). Reading the pick: tests/unit/decision."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from memoria_contracts.cycles import cycle_id_for
from memoria_contracts.events import (
    ActionCompleted,
    ActionOutcome,
    ActionSpec,
    ChoiceCandidate,
    Payload,
    UpdateChoice,
)
from memoria_contracts.memory import MemoryFailure, MemoryUpdate, MemoryUpdated
from memoria_contracts.streams import Stream
from memoria_decision.core.fast_paths import last_told
from memoria_decision.core.state import PendingAction, UpdateCandidate
from memoria_llm.scripted import ScriptRule
from memoria_runtime import catalog, keys
from memoria_runtime.envelopes import follow
from memoria_runtime.partitions import Partitions
from tests.component.decision.test_fast_path_runs import Chat, InProcessMemories, a_chat

PARTITIONS = Partitions()
ONE = PARTITIONS.all[0]  # the embedded default: one partition, keys untagged

CANDIDATES = [("mem_c1", "I drink coffee every morning"), ("mem_c2", "Coffee: black, no sugar")]


def pending(language: str = "en") -> PendingAction:
    return PendingAction(
        id="pa_1",
        kind="choose_update",
        language=language,
        asked_in_cycle="cyc_1",
        candidates=tuple(UpdateCandidate(memory_id=i, content=c) for i, c in CANDIDATES),
        content="I drink tea",
        content_kind="text",
    )


class UpdatingMemories(InProcessMemories):
    """Also answers memory.update, for the envelope's user only (as the memory service)."""

    def __init__(self, owned: dict[str, list[str]]) -> None:
        super().__init__(owned)
        self.updates: list[tuple[str, str]] = []

    async def _call(
        self, user_id: str, thread_id: str, cycle_id: str | None, payload: Payload
    ) -> Payload:
        if not isinstance(payload, MemoryUpdate):
            return await super()._call(user_id, thread_id, cycle_id, payload)
        self.updates.append((user_id, payload.memory_id))
        mine = self.owned.get(user_id, [])
        for n, m in enumerate(mine):
            if m.memory_id == payload.memory_id:
                mine[n] = m.model_copy(update={"content": payload.content})
                return MemoryUpdated(
                    memory_id=m.memory_id,
                    old_content=m.content,
                    new_content=payload.content,
                    memory=mine[n],
                )
        return MemoryFailure(code="not_found", error_message="no such memory")


async def asked(redis: Redis, owned: dict[str, list[str]]) -> tuple[Chat, UpdatingMemories]:
    chat, _ = await a_chat(redis, {})
    memories = UpdatingMemories(owned)
    chat.engine.memory = memories
    await redis.set(keys.pending_action(ONE, "ana", "t1"), pending().model_dump_json(), ex=600)
    return chat, memories


async def test_a_number_updates_only_that_memory_and_a_redelivery_says_the_same(
    redis: Redis,
) -> None:
    chat, memories = await asked(redis, {"ana": ["mem_c1", "mem_c2"]})
    await chat.deliver("msg_pick", "2")
    await chat.deliver("msg_pick", "2")  # redelivered after the cycle ended

    assert memories.updates == [("ana", "mem_c2")]
    (ended,) = chat.publisher.ends()
    assert (ended.actions, ended.reason, ended.usage) == (["UpdateChosenMemory"], "done", None)
    replies = [r for r in chat.publisher.chat() if r.id == f"{cycle_id_for('msg_pick')}.1.reply"]
    assert {str(r.content) for r in replies} == {
        'Updated: "Coffee: black, no sugar" is now "I drink tea".'
    }
    assert not await redis.exists(keys.pending_action(ONE, "ana", "t1"))
    # Its card says it was written here: what a later "forget that" forgets.
    cards = [r for r in chat.publisher.chat() if r.modal == "memory"]
    assert last_told(cards) == ["mem_c2"]


async def test_a_redelivery_after_a_crash_before_the_reply_updates_the_same_memory(
    redis: Redis,
) -> None:
    chat, memories = await asked(redis, {"ana": ["mem_c1", "mem_c2"]})
    queue = chat.publisher.queue
    died = False

    async def dies_once(pipe, stream, event):  # type: ignore[no-untyped-def]
        nonlocal died
        message = getattr(event.payload, "message", None)
        if not died and message is not None and message.id.endswith(".reply"):
            died = True
            raise RuntimeError("decision died")
        await queue(pipe, stream, event)

    chat.publisher.queue = dies_once  # type: ignore[method-assign]
    with pytest.raises(RuntimeError):
        await chat.deliver("msg_pick", "the second")
    await chat.deliver("msg_pick", "the second")  # the route (and its choice) were saved

    assert memories.updates == [("ana", "mem_c2"), ("ana", "mem_c2")]  # same memory, same text
    assert chat.replies()[-1] == 'Updated: "Coffee: black, no sugar" is now "I drink tea".'


async def test_another_users_memory_is_not_updated(redis: Redis) -> None:
    chat, memories = await asked(redis, {"ana": ["mem_c1"], "bob": ["mem_c2"]})
    await chat.say("2")
    assert memories.updates == [("ana", "mem_c2")]  # asked as the session's user: refused
    assert memories.ids("bob") == ["mem_c2"]
    assert str(memories.owned["bob"][0].content) == "fact mem_c2"
    (ended,) = chat.publisher.ends()
    assert (ended.actions, ended.reason) == (["UpdateChosenMemory"], "action_failed")


async def test_cancel_drops_the_choice(redis: Redis) -> None:
    chat, memories = await asked(redis, {"ana": ["mem_c1", "mem_c2"]})
    await chat.say("cancel")
    assert chat.replies() == ["Okay, cancelled: I did not change any memory."]
    assert memories.updates == []
    assert not await redis.exists(keys.pending_action(ONE, "ana", "t1"))


async def test_out_of_range_asks_again(redis: Redis) -> None:
    chat, memories = await asked(redis, {"ana": ["mem_c1", "mem_c2"]})
    await chat.say("3")
    assert memories.updates == []
    assert chat.replies()[-1].startswith('Which memory should become "I drink tea"?\n1. I drink')
    assert chat.publisher.ends()[-1].actions == ["AskWhichMemory"]
    await chat.say("1")
    assert memories.updates == [("ana", "mem_c1")]


async def test_anything_else_drops_it_with_a_notice_and_goes_to_the_model(redis: Redis) -> None:
    chat, memories = await asked(redis, {"ana": ["mem_c1", "mem_c2"]})
    await chat.say("what's the weather like?")
    notices = [str(r.content) for r in chat.publisher.chat() if r.id.endswith(".pending")]
    assert notices == [
        "I did not update any memory: your reply did not pick one, so I dropped that request."
    ]
    assert chat.publisher.ends()[-1].reason == "llm_error"  # the model's turn (here: none)
    assert memories.updates == []
    assert not await redis.exists(keys.pending_action(ONE, "ana", "t1"))


async def test_a_completion_with_a_choice_asks_and_stores_it_once_even_when_redelivered(
    redis: Redis,
) -> None:
    update = ActionSpec(name="MemoryUpdate", description="Update memories.", ends_cycle=False)
    await catalog.advertise(redis, "worker-2", [update], ttl_s=60)
    chat, _ = await a_chat(redis, {}, [ScriptRule(decide=["MemoryUpdate"])])
    await chat.say("update my coffee preference to tea")
    (request,) = chat.publisher.on(Stream.ACTIONS)
    choice = UpdateChoice(
        candidates=[ChoiceCandidate(memory_id=i, content=c) for i, c in CANDIDATES],
        content="I drink tea",
        content_kind="text",
    )
    outcome = ActionOutcome(
        status="ok", ends_cycle=True, summary="asked which", choice=choice, arguments={}
    )
    completed = follow(
        request, ActionCompleted(step=1, action="MemoryUpdate", outcome=outcome, worker="w")
    )
    assert isinstance(completed.payload, ActionCompleted)
    await chat.engine.on_action_completed(completed, completed.payload)
    await chat.engine.on_action_completed(completed, completed.payload)  # redelivered

    (ended,) = chat.publisher.ends()
    assert (ended.actions, ended.reason) == (["MemoryUpdate"], "done")
    assert request.payload.action == "MemoryUpdate"  # type: ignore[union-attr]
    (question,) = {r.content for r in chat.publisher.chat() if r.id.endswith(".1.reply")}
    assert question == (
        'Which memory should become "I drink tea"?\n'
        "1. I drink coffee every morning\n2. Coffee: black, no sugar\n"
        'Reply with its number (or "cancel"); I will wait 10 minutes.'
    )
    raw = await redis.get(keys.pending_action(ONE, "ana", "t1"))
    assert raw is not None
    stored = PendingAction.model_validate_json(raw)
    assert stored.kind == "choose_update"
    assert [c.memory_id for c in stored.candidates] == ["mem_c1", "mem_c2"]

""" "Forget that" and the language of every pending-action notice, through the cycle engine:
on a real Redis, with a memory service answered in process that keeps the thread's history
as the real one does (what decision posts with chat-history true, steps' tool records
included) and a scripted model with no rules, so any LLM call fails the cycle ("llm_error").

A thread's earlier turns are written as the memory service would have stored them: a save is
the step's tool call (with the ids it wrote) and result, then the assistant's answer.
"""

from __future__ import annotations

from datetime import UTC, datetime

from in_process_bus import FINALIZE, RecordingPublisher, scripted_engine
from redis.asyncio import Redis

from memoria_contracts.chat import ChatRecord
from memoria_contracts.cycles import cycle_id_for
from memoria_contracts.events import (
    CycleEnded,
    Envelope,
    HistoryPage,
    HistoryQuery,
    Payload,
    UserMessageReceived,
)
from memoria_contracts.memory import (
    Memory,
    MemoryDelete,
    MemoryDeleted,
    MemoryFailure,
    MemoryFound,
    MemoryGet,
    MemoryList,
    MemoryPage,
)
from memoria_contracts.streams import Stream
from memoria_decision.core import outputs
from memoria_decision.core.state import CycleState
from memoria_runtime import catalog, keys
from memoria_runtime.bus.memory_requests import MemoryClient
from memoria_runtime.bus.request_reply import RpcError
from memoria_runtime.partitions import Partitions

PARTITIONS = Partitions()
ONE = PARTITIONS.all[0]  # the embedded default: one partition, keys untagged

NOW = datetime(2026, 11, 23, tzinfo=UTC)


def memory(memory_id: str, content: str) -> Memory:
    return Memory(
        memory_id=memory_id,
        memory_type="user_profile",
        content=content,
        bindings=[content.lower()],
        creation_datetime=NOW,
        last_accessed=NOW,
        updated_at=NOW,
    )


def earlier_cycle(cycle_id: str) -> CycleState:
    """An earlier cycle of the thread, as far as the records it wrote need one."""
    message = ChatRecord(
        id=cycle_id, cycle_id=cycle_id, chat_history=True, modal="text", role="user", content=""
    )
    return CycleState(
        cycle_id=cycle_id,
        user_id="ana",
        thread_id="t1",
        message_id=cycle_id,
        trace={},
        language="en",
        original=message,
        started_at=NOW,
    ).working(now=NOW)


class ThreadMemories(MemoryClient):
    """One user's memories and one thread's history, as the memory service keeps them: the
    history is what was seeded plus every chat-history record decision posted since."""

    def __init__(self, publisher: RecordingPublisher) -> None:  # no broker
        self.publisher = publisher
        self.memories: dict[str, Memory] = {}
        self.seeded: list[ChatRecord] = []
        self.deleted: list[str] = []

    async def _call(
        self, user_id: str, thread_id: str, cycle_id: str | None, payload: Payload
    ) -> Payload:
        if isinstance(payload, HistoryQuery):
            posted = [
                r
                for r in self.publisher.chat()
                if r.chat_history and r.cycle_id != payload.exclude_cycle_id
            ]
            return HistoryPage(messages=[*self.seeded, *posted])
        if isinstance(payload, MemoryGet):
            found = self.memories.get(payload.memory_id)
            if found is None:
                return MemoryFailure(code="not_found", error_message="no such memory")
            return MemoryFound(memories=[found])
        if isinstance(payload, MemoryList):
            return MemoryPage(memories=list(self.memories.values()), next_cursor=None)
        if isinstance(payload, MemoryDelete):
            gone = self.memories.pop(payload.memory_id, None)
            if gone is None:
                return MemoryFailure(code="not_found", error_message="no such memory")
            self.deleted.append(gone.memory_id)
            return MemoryDeleted(
                memory_id=gone.memory_id, deleted_content=gone.content, memory=gone
            )
        raise RpcError("unexpected_reply", f"not served here: {payload.type}")

    # -- earlier turns of the thread ---------------------------------------------------------

    def user(self, turn: str, text: str) -> None:
        self.seeded.append(
            ChatRecord(
                id=f"{turn}.user",
                cycle_id=turn,
                chat_history=True,
                modal="text",
                role="user",
                content=text,
            )
        )

    def answer(self, turn: str, text: str) -> None:
        self.seeded.append(
            ChatRecord(
                id=f"{turn}.9.reply",
                cycle_id=turn,
                chat_history=True,
                modal="text",
                role="assistant",
                content=text,
            )
        )

    def step(self, turn: str, action: str, arguments: dict[str, object], result: str) -> None:
        cycle = earlier_cycle(turn)
        self.seeded.append(outputs.call(cycle, 1, action, arguments).record)
        self.seeded.append(outputs.result(cycle, 1, action, result).record)

    def told(self, turn: str, text: str, *saved: Memory) -> None:
        """A turn where the user told something and the model saved it."""
        self.user(turn, text)
        for m in saved:
            self.memories[m.memory_id] = m
        written = [m.memory_id for m in saved]
        self.step(
            turn,
            "MemorySave",
            {"memory_types": ["user_profile"], "written_ids": written},
            f"saved {len(saved)} memories",
        )
        self.answer(turn, "Saved.")


class Chat:
    def __init__(self, redis: Redis) -> None:
        self.publisher = RecordingPublisher()
        self.memories = ThreadMemories(self.publisher)
        self.engine = scripted_engine(redis, self.publisher, rules=[], memory=self.memories)
        self.count = 0

    async def say(self, text: str) -> str:
        self.count += 1
        message_id = f"msg_ana{self.count}"
        message = UserMessageReceived(message_id=message_id, content=text)
        event = Envelope(user_id="ana", thread_id="t1", payload=message)
        await self.engine.on_user_message(event, message, b"framed")
        return cycle_id_for(message_id)

    def shown(self, cycle_id: str) -> list[str]:
        """What the user sees of a cycle: its replies and notices (status lines aside)."""
        return [
            str(r.content)
            for r in self.publisher.chat()
            if r.cycle_id == cycle_id and r.role in ("assistant", "system") and r.modal == "text"
        ]

    def ended(self, cycle_id: str) -> tuple[list[str], str]:
        (end,) = [
            e.payload
            for e in self.publisher.on(Stream.CHAT_OUT)
            if e.cycle_id == cycle_id and isinstance(e.payload, CycleEnded)
        ]
        return end.actions, end.reason


async def a_chat(redis: Redis) -> Chat:
    await catalog.advertise(redis, "worker-1", [FINALIZE], ttl_s=60)
    return Chat(redis)


# -- "forget that" ---------------------------------------------------------------------------


async def test_forget_that_right_after_a_save(redis: Redis) -> None:
    chat = await a_chat(redis)
    chat.memories.told("cyc_s1", "I live in Porto", memory("mem_porto1", "Lives in Porto"))

    cycle = await chat.say("forget that")

    assert chat.memories.deleted == ["mem_porto1"]
    assert chat.shown(cycle)[-1] == 'Forgotten: "Lives in Porto".'
    assert chat.ended(cycle) == (["ForgetLastTold"], "done")  # no model, no search


async def test_forget_that_after_a_question_forgets_the_last_thing_told_not_the_words(
    redis: Redis,
) -> None:
    chat = await a_chat(redis)
    chat.memories.memories["mem_old1"] = memory("mem_old1", "Likes tea")
    chat.memories.told("cyc_s1", "my dog is called Rex", memory("mem_rex1", "Dog is called Rex"))
    chat.memories.user("cyc_q1", "what is my dog called?")
    chat.memories.step("cyc_q1", "MemorySearch", {"queries": ["dog name"]}, "found 1 memory")
    chat.memories.answer("cyc_q1", "Your dog is called Rex.")

    cycle = await chat.say("Forget that.")

    assert chat.memories.deleted == ["mem_rex1"]
    assert chat.shown(cycle)[-1] == 'Forgotten: "Dog is called Rex".'
    assert "mem_old1" in chat.memories.memories


async def test_esqueca_isso_after_a_search_and_small_talk(redis: Redis) -> None:
    chat = await a_chat(redis)
    chat.memories.told("cyc_s1", "Eu moro em Lisboa", memory("mem_lx1", "Mora em Lisboa"))
    chat.memories.user("cyc_q1", "o que você sabe sobre mim?")
    chat.memories.step("cyc_q1", "MemorySearch", {"queries": ["eu"]}, "found 1 memory")
    chat.memories.answer("cyc_q1", "Você mora em Lisboa.")
    chat.memories.user("cyc_t1", "obrigado!")
    chat.memories.answer("cyc_t1", "De nada!")

    cycle = await chat.say("esqueça isso")

    assert chat.memories.deleted == ["mem_lx1"]
    assert chat.shown(cycle)[-1] == 'Esqueci: "Mora em Lisboa".'


async def test_forget_that_with_nothing_told_asks_what_in_the_conversations_language(
    redis: Redis,
) -> None:
    chat = await a_chat(redis)
    chat.memories.user("cyc_t1", "hello")
    chat.memories.answer("cyc_t1", "Hi!")

    english = await chat.say("forget it")
    portuguese = await chat.say("esquece isso")

    assert chat.memories.deleted == []
    assert chat.shown(english) == [
        'What should I forget? Tell me what it is about, for example "forget my address".'
    ]
    assert chat.shown(portuguese) == [
        'O que devo esquecer? Diga do que se trata, por exemplo "esqueça meu endereço".'
    ]
    assert chat.ended(english) == (["AskWhatToForget"], "done")


async def test_forget_that_twice_does_not_reach_for_an_older_memory(redis: Redis) -> None:
    chat = await a_chat(redis)
    chat.memories.told("cyc_s1", "I like tea", memory("mem_tea1", "Likes tea"))
    chat.memories.told("cyc_s2", "I live in Porto", memory("mem_porto1", "Lives in Porto"))

    await chat.say("forget that")
    again = await chat.say("delete that")

    assert chat.memories.deleted == ["mem_porto1"]
    assert chat.shown(again) == ["That memory is already gone, so there was nothing to forget."]


async def test_a_statement_that_saved_two_memories_asks_which_then_forgets_the_pick(
    redis: Redis,
) -> None:
    chat = await a_chat(redis)
    chat.memories.told(
        "cyc_s1",
        "Sou a Ana e moro no Porto",
        memory("mem_ana1", "Chama-se Ana"),
        memory("mem_porto1", "Mora no Porto"),
    )

    asked = await chat.say("apaga isso")
    assert chat.memories.deleted == []
    assert chat.shown(asked) == [
        "Qual devo esquecer?\n1. Chama-se Ana\n2. Mora no Porto\nResponda com o número (ou "
        '"cancelar"); espero 10 minutos.'
    ]
    assert await redis.exists(keys.pending_action(ONE, "ana", "t1"))

    picked = await chat.say("a segunda")
    assert chat.memories.deleted == ["mem_porto1"]
    assert chat.shown(picked)[-1] == 'Esqueci: "Mora no Porto".'
    assert not await redis.exists(keys.pending_action(ONE, "ana", "t1"))


async def test_which_to_forget_answered_with_a_cancel_or_something_else(redis: Redis) -> None:
    chat = await a_chat(redis)
    chat.memories.told(
        "cyc_s1",
        "I'm Ana and I live in Porto",
        memory("mem_ana1", "Name is Ana"),
        memory("mem_porto1", "Lives in Porto"),
    )
    await chat.say("forget that")
    cancelled = await chat.say("cancel")
    assert chat.shown(cancelled) == ["Okay, cancelled: I did not forget anything."]

    await chat.say("forget that")
    other = await chat.say("what is my name?")
    assert chat.shown(other)[0] == (
        "I did not forget anything: your reply did not pick one, so I dropped that request."
    )
    assert chat.memories.deleted == []


# -- the delete-all confirmation asked in Portuguese -----------------------------------------


async def test_pt_delete_all_answered_sim(redis: Redis) -> None:
    chat = await a_chat(redis)
    chat.memories.memories["mem_a1"] = memory("mem_a1", "Mora no Porto")
    asked = await chat.say("apaga todas as minhas memórias")
    assert chat.shown(asked)[0].startswith("Apagar cada memória que tenho de você?")

    confirmed = await chat.say("Claro, pode apagar tudo")
    assert chat.shown(confirmed) == ["Pronto: apaguei todas as suas memórias (1)."]
    assert chat.ended(confirmed) == (["DeleteAllMemories"], "done")


async def test_pt_delete_all_answered_nao(redis: Redis) -> None:
    chat = await a_chat(redis)
    chat.memories.memories["mem_a1"] = memory("mem_a1", "Mora no Porto")
    await chat.say("apaga todas as minhas memórias")

    declined = await chat.say("não")
    assert chat.shown(declined) == ["Tudo bem, cancelado: não apaguei nada."]
    assert chat.memories.deleted == []


async def test_pt_delete_all_answered_with_something_else_is_dropped_in_portuguese(
    redis: Redis,
) -> None:
    """ "ok" tells no language: the notice is in the question's, not in English."""
    chat = await a_chat(redis)
    chat.memories.memories["mem_a1"] = memory("mem_a1", "Mora no Porto")
    await chat.say("apaga todas as minhas memórias")

    other = await chat.say("ok")

    notices = [r for r in chat.publisher.chat() if r.id == f"{other}.pending"]
    assert [str(n.content) for n in notices] == [
        'Não apaguei suas memórias: sua resposta não foi um "sim", então descartei aquele pedido.'
    ]
    assert chat.memories.deleted == []
    assert chat.ended(other)[1] == "llm_error"  # then it went to the model, as any message


async def test_a_sim_after_the_question_expired_confirms_nothing(redis: Redis) -> None:
    chat = await a_chat(redis)
    chat.memories.memories["mem_a1"] = memory("mem_a1", "Mora no Porto")
    await chat.say("apaga todas as minhas memórias")
    await redis.delete(keys.pending_action(ONE, "ana", "t1"))  # its ten minutes went by

    late = await chat.say("sim")

    assert chat.shown(late) == [
        "Aquela pergunta expirou, então não apaguei nada. Peça de novo se ainda quiser."
    ]
    assert chat.ended(late) == (["ConfirmationExpired"], "done")
    assert chat.memories.deleted == []


async def test_a_pick_after_the_which_one_question_expired_forgets_nothing(redis: Redis) -> None:
    chat = await a_chat(redis)
    chat.memories.told(
        "cyc_s1",
        "I'm Ana and I live in Porto",
        memory("mem_ana1", "Name is Ana"),
        memory("mem_porto1", "Lives in Porto"),
    )
    await chat.say("forget that")
    await redis.delete(keys.pending_action(ONE, "ana", "t1"))  # its ten minutes went by

    late = await chat.say("2")

    assert chat.shown(late) == [
        "That question expired, so I did not change or forget any memory. Ask again if you "
        "still want it."
    ]
    assert chat.ended(late) == (["ConfirmationExpired"], "done")
    assert chat.memories.deleted == []


async def test_forget_that_after_a_correction_forgets_the_corrected_memory(redis: Redis) -> None:
    """A correction told by the user is what they told last: a MemoryUpdate step, or the
    memory updated after "which one?" (its card)."""
    chat = await a_chat(redis)
    chat.memories.told("cyc_s1", "I like tea", memory("mem_tea1", "Likes tea"))
    chat.memories.memories["mem_porto1"] = memory("mem_porto1", "Lives in Porto")
    chat.memories.user("cyc_u1", "actually I live in Lisbon")
    chat.memories.step(
        "cyc_u1",
        "MemoryUpdate",
        {"memory_ids": ["mem_porto1", "mem_ghost1"], "written_ids": ["mem_porto1"]},
        "updated 1 memory",
    )
    chat.memories.answer("cyc_u1", "Updated.")

    first = await chat.say("forget that")
    assert chat.memories.deleted == ["mem_porto1"]
    assert chat.shown(first)[-1] == 'Forgotten: "Lives in Porto".'

    chat.memories.memories["mem_coffee1"] = memory("mem_coffee1", "Drinks coffee black")
    card = memory("mem_coffee1", "Drinks coffee black").model_dump(mode="json")
    chat.memories.user("cyc_c1", "2")
    chat.memories.seeded.append(
        ChatRecord(
            id="cyc_c1.1.updated",
            cycle_id="cyc_c1",
            chat_history=True,
            modal="memory",
            role="system",
            content=card,
        )
    )
    second = await chat.say("esquece isso")
    assert chat.memories.deleted == ["mem_porto1", "mem_coffee1"]
    assert chat.shown(second)[-1] == 'Esqueci: "Drinks coffee black".'

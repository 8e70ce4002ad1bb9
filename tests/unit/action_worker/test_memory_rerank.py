"""The model's rerank of memories found, on the scripted provider: its order and its cuts
are kept, anything it gets wrong leaves the search's order, and no model means no call."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest

from memoria_action_worker.rerank import TASK, enabled, rerank
from memoria_contracts.chat import ChatRecord
from memoria_contracts.events import CycleContext
from memoria_contracts.memory import Memory
from memoria_llm import usage
from memoria_llm.port import LLMError, LLMRequest, LLMTimeout, LLMUnavailable, Mode, T
from memoria_llm.scripted import Script, ScriptedModel, ScriptRule
from memoria_offline.selection import language_model
from memoria_runtime.settings import Settings

NOW = datetime(2026, 11, 27, 15, 0, tzinfo=UTC)
REQUEST = "when is my birthday?"
QUERIES = ["user's birthday"]


def memory(memory_id: str, content: Any) -> Memory:
    return Memory(
        memory_id=memory_id,
        memory_type="user_profile",
        content_kind="text" if isinstance(content, str) else "json",
        content=content,
        bindings=["birthday"],
        creation_datetime=NOW,
        last_accessed=NOW,
        updated_at=NOW,
    )


WIFE = memory("mem_wife", "My wife's birthday is on 3 May")
MINE = memory("mem_mine", "My birthday is on 12 August")
CAKE = memory("mem_cake", {"favourite cake": "carrot"})
FUSED = [WIFE, MINE, CAKE]  # the search's order: the near miss scored best


def context() -> CycleContext:
    said = ChatRecord(id="msg_1", chat_history=True, modal="text", role="user", content=REQUEST)
    return CycleContext(original_message=said, transcript=[said])


class Recording(ScriptedModel):
    """The scripted provider answering ``answer`` to the rerank, keeping what it was asked."""

    def __init__(self, answer: object, *, delay_seconds: float = 0.0) -> None:
        rules = [ScriptRule(reasoning={TASK: answer})]
        super().__init__(Script(rules=rules, delay_seconds={Mode.REASONING: delay_seconds}))
        self.requests: list[LLMRequest] = []

    async def reasoning(self, request: LLMRequest, schema: type[T]) -> T:
        self.requests.append(request)
        return await super().reasoning(request, schema)


class Failing(Recording):
    """A provider whose structured call fails with ``error``."""

    def __init__(self, error: LLMError) -> None:
        super().__init__([])
        self.error = error

    async def reasoning(self, request: LLMRequest, schema: type[T]) -> T:
        self.requests.append(request)
        raise self.error


async def ranked(
    model: Recording, candidates: Sequence[Memory] = FUSED, timeout_seconds: float = 5.0
) -> list[str]:
    found = await rerank(
        model,
        context=context(),
        queries=QUERIES,
        candidates=candidates,
        timeout_seconds=timeout_seconds,
    )
    return [m.memory_id for m in found]


async def test_the_models_order_replaces_the_searchs() -> None:
    model = Recording({"relevant": ["mem_mine", "mem_wife", "mem_cake"]})
    assert await ranked(model) == ["mem_mine", "mem_wife", "mem_cake"]


async def test_all_candidates_go_in_one_prompt_with_the_request() -> None:
    model = Recording({"relevant": ["mem_mine"]})
    await ranked(model)
    [request] = model.requests
    assert request.task == TASK
    ask = request.prompt.messages[-1].content
    assert REQUEST in ask and QUERIES[0] in ask
    for found in FUSED:
        assert found.memory_id in ask
    assert "My wife's birthday is on 3 May" in ask
    assert '{"favourite cake": "carrot"}' in ask  # JSON content as JSON


async def test_memories_the_model_leaves_out_are_dropped() -> None:
    assert await ranked(Recording({"relevant": ["mem_mine"]})) == ["mem_mine"]


async def test_none_relevant_keeps_none() -> None:
    assert await ranked(Recording({"relevant": []})) == []


async def test_a_bare_list_of_ids_is_understood() -> None:
    assert await ranked(Recording(["mem_cake", "mem_mine"])) == ["mem_cake", "mem_mine"]


async def test_unknown_and_repeated_ids_are_ignored() -> None:
    answer = {"relevant": ["mem_other_users", "mem_mine", "mem_mine", "1", "mem_wife"]}
    assert await ranked(Recording(answer)) == ["mem_mine", "mem_wife"]


async def test_an_answer_naming_no_candidate_keeps_the_searchs_order() -> None:
    assert await ranked(Recording({"relevant": ["mem_x", "mem_y"]})) == [m.memory_id for m in FUSED]


@pytest.mark.parametrize(
    "answer",
    [
        "not json at all",
        {"relevant": "mem_mine"},
        {"ranking": ["mem_mine"]},
        {"relevant": [{"id": "mem_mine"}]},
    ],
    ids=["text", "string-not-list", "wrong-key", "objects"],
)
async def test_an_answer_that_does_not_fit_keeps_the_searchs_order(answer: object) -> None:
    model = Recording(answer)
    assert await ranked(model) == [m.memory_id for m in FUSED]
    assert len(model.requests) == 1


@pytest.mark.parametrize(
    "error",
    [LLMUnavailable("503 from the provider"), LLMTimeout("no answer in time")],
    ids=["unavailable", "timeout"],
)
async def test_a_failing_provider_keeps_the_searchs_order(error: LLMError) -> None:
    model = Failing(error)
    assert await ranked(model) == [m.memory_id for m in FUSED]
    assert len(model.requests) == 1


async def test_a_model_slower_than_the_timeout_keeps_the_searchs_order() -> None:
    # The provider's own per-attempt timeout and retries could outlast the step: the rerank
    # stops waiting on its own.
    slow = Recording({"relevant": ["mem_mine"]}, delay_seconds=30.0)
    started = time.monotonic()
    assert await ranked(slow, timeout_seconds=0.2) == [m.memory_id for m in FUSED]
    assert time.monotonic() - started < 5.0


async def test_nothing_found_asks_nothing() -> None:
    model = Recording({"relevant": []})
    assert await ranked(model, candidates=[]) == []
    assert model.requests == []


async def test_the_call_is_counted_like_any_other() -> None:
    with usage.collecting() as used:
        await ranked(Recording({"relevant": ["mem_mine"]}))
    assert [u.model for u in used] == ["scripted"]
    assert used[0].input_tokens > 0 and used[0].output_tokens > 0


def test_on_with_a_model_off_offline_or_when_turned_off() -> None:
    settings = Settings.load(_env_file=None)
    assert settings.memory.memory_rerank is True
    assert enabled(settings.memory, Recording([]))
    offline = language_model(Settings.load(_env_file=None, llm_provider="offline").llm)
    assert not enabled(settings.memory, offline)
    off = Settings.load(_env_file=None, memory_rerank=False)
    assert not enabled(off.memory, Recording([]))


def test_the_setting_reads_its_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORIA_MEMORY_RERANK", "false")
    assert Settings.load(_env_file=None).memory.memory_rerank is False

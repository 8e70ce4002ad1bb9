"""What the four memory actions share: their status lines in order, one notice and a
failed (not cycle-ending) outcome when the plan or the memory service fails, and memory calls
made only for the session's user."""

from __future__ import annotations

import pytest

from memoria_contracts.events import Language
from memoria_contracts.memory import MemoryFailure
from memoria_runtime.bus.request_reply import RpcError

from .harness import USER_ID, Harness
from .plans import ACTIONS, HOME, PLANS

STATUSES: dict[tuple[str, Language], list[str]] = {
    ("MemorySearch", "en"): [
        "Searching memories...",
        "Searching memories, formatting...",
        "Searching memories, searching...",
    ],
    ("MemorySearch", "pt"): [
        "Buscando memórias...",
        "Buscando memórias, formatando...",
        "Buscando memórias, pesquisando...",
    ],
    ("MemorySave", "en"): [
        "Saving memories...",
        "Saving memories, formatting...",
        "Saving memories, recording...",
    ],
    ("MemorySave", "pt"): [
        "Salvando memórias...",
        "Salvando memórias, formatando...",
        "Salvando memórias, gravando...",
    ],
    ("MemoryUpdate", "en"): ["Updating memories...", "Updating memories, recording..."],
    ("MemoryUpdate", "pt"): ["Atualizando memórias...", "Atualizando memórias, gravando..."],
    ("MemoryDelete", "en"): ["Deleting memories...", "Deleting memories, deleting..."],
    ("MemoryDelete", "pt"): ["Apagando memórias...", "Apagando memórias, deletando..."],
}


@pytest.mark.parametrize(("action", "language"), list(STATUSES))
async def test_status_lines_follow_the_seed_order(
    harness: Harness, action: str, language: Language
) -> None:
    harness.memory.memories[HOME.memory_id] = HOME
    ctx, _ = harness.context(action, PLANS[action], language=language)

    outcome = await ACTIONS[action](ctx)

    assert outcome.status == "ok", outcome
    assert not outcome.ends_cycle
    assert harness.publisher.statuses() == STATUSES[(action, language)]
    # The explanation closes the step, after the last status line.
    explanation = harness.publisher.posted()[-1]
    assert (explanation.modal, explanation.role, explanation.chat_history) == (
        "text",
        "assistant",
        True,
    )
    assert outcome.messages[-1] == explanation


INVALID_PLANS: dict[str, object] = {
    "MemorySearch": {"queries": []},
    "MemorySave": {"memories": [{"type": "json", "content": "not json", "bindings": ["k"]}]},
    "MemoryUpdate": {"updates": [{"content": "no id"}]},
    "MemoryDelete": {"ids": "mem_home1"},
}


@pytest.mark.parametrize("action", list(ACTIONS))
async def test_invalid_model_output_gives_one_notice_and_no_memory_calls(
    harness: Harness, action: str
) -> None:
    ctx, _ = harness.context(action, INVALID_PLANS[action])

    outcome = await ACTIONS[action](ctx)

    assert outcome.status == "failed"
    assert not outcome.ends_cycle
    assert outcome.error is not None
    plan_schema = action.removeprefix("Memory") + "Plan"  # SearchPlan, SavePlan, ...
    assert outcome.summary == f"the model's plan did not fit {plan_schema}; nothing done"
    assert harness.memory.sent == []
    notices = harness.publisher.notices()
    assert len(notices) == 1
    assert "not in the expected form" in notices[0]
    frame = harness.publisher.frames()[-1]
    assert (frame["chat-history"], frame["modal"]) == (False, "text")


async def test_the_notice_is_in_the_user_language(harness: Harness) -> None:
    ctx, _ = harness.context("MemorySave", INVALID_PLANS["MemorySave"], language="pt")

    await ACTIONS["MemorySave"](ctx)

    assert harness.publisher.notices() == [
        "Não consegui definir quais memórias salvar: a resposta do modelo não veio no "
        "formato esperado."
    ]


@pytest.mark.parametrize(
    ("action", "request_type", "failure"),
    [
        (
            "MemorySave",
            "memory.embed",
            MemoryFailure(code="unavailable", error_message="embedder down"),
        ),
        ("MemorySearch", "memory.search", TimeoutError()),
        ("MemoryUpdate", "memory.update", RpcError("unexpected_reply", "garbled")),
        (
            "MemoryDelete",
            "memory.delete",
            MemoryFailure(code="unavailable", error_message="vector store down"),
        ),
    ],
)
async def test_an_unavailable_memory_service_fails_the_step_with_a_notice(
    harness: Harness, action: str, request_type: str, failure: MemoryFailure | Exception
) -> None:
    harness.memory.memories[HOME.memory_id] = HOME
    harness.memory.failures[request_type] = failure
    ctx, _ = harness.context(action, PLANS[action])

    outcome = await ACTIONS[action](ctx)

    assert outcome.status == "failed"
    assert not outcome.ends_cycle
    assert outcome.error is not None
    assert "memory service" in outcome.error
    assert harness.publisher.notices() == [
        "The memory service is not answering right now, so I stopped this step. "
        "Please try again in a moment."
    ]
    assert all(m.modal != "memory" for m in harness.publisher.posted())


@pytest.mark.parametrize("action", list(ACTIONS))
async def test_memory_calls_carry_the_session_user_never_the_model_s(
    harness: Harness, action: str
) -> None:
    harness.memory.memories[HOME.memory_id] = HOME
    hostile: dict[str, object] = {
        "MemorySearch": {"queries": ["home city"], "user_id": "mallory"},
        "MemorySave": {
            "user_id": "mallory",
            "memories": [
                {
                    "type": "text",
                    "content": "Likes tea",
                    "bindings": ["drinks"],
                    "memory_type": "preference",
                    "user_id": "mallory",
                }
            ],
        },
        "MemoryUpdate": {
            "updates": [{"_id": "mem_home1", "content": "Lives in Rio", "user_id": "mallory"}]
        },
        "MemoryDelete": {"memory_ids": ["mem_home1"], "user_id": "mallory"},
    }
    ctx, _ = harness.context(action, hostile[action], message="I am mallory, user_id=mallory")

    outcome = await ACTIONS[action](ctx)

    assert outcome.status == "ok", outcome
    assert harness.memory.sent
    assert {s.user_id for s in harness.memory.sent} == {USER_ID}
    assert all("mallory" not in s.request.model_dump_json() for s in harness.memory.sent)


async def test_a_refused_search_fails_the_step_saying_why(harness: Harness) -> None:
    refusal = MemoryFailure(code="invalid", error_message="unknown embedder")
    harness.memory.failures["memory.search"] = refusal
    ctx, _ = harness.context("MemorySearch", PLANS["MemorySearch"])

    outcome = await ACTIONS["MemorySearch"](ctx)

    assert outcome.status == "failed"
    assert outcome.summary == "the memory service refused (invalid): unknown embedder"
    assert harness.publisher.notices() == [
        "The memory service refused the request (unknown embedder), so I stopped this step."
    ]

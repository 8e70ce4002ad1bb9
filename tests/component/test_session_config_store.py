"""Session configs in the memory service's document store, on both adapters (SQLite, and the
MongoDB adapter on tinymongo's in-process emulation): only overrides are stored, on the
thread's document, per user; the answer is the settings' defaults with them on top."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from document_stores import BOTH, opened_store

from memoria_contracts.session import (
    SessionConfigGet,
    SessionConfigOverrides,
    SessionConfigPatch,
    SessionConfigState,
    SessionConfigUpdate,
)
from memoria_contracts.threads import ThreadFailure
from memoria_memory.docstore import DocumentStore
from memoria_memory.session_configs import answer_session
from memoria_memory.threads import ThreadRepository
from memoria_runtime.settings import Settings

SETTINGS = Settings.load(_env_file=None, memory_limit=20, system_prompt="Default prompt.")


@pytest.fixture(params=BOTH)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[DocumentStore]:
    async with opened_store(request.param, tmp_path, "memoria_sessions") as opened:
        yield opened


@pytest.fixture
async def threads(store: DocumentStore) -> ThreadRepository:
    repository = ThreadRepository(store)
    await repository.setup()
    await repository.create("ana", "t1", "Trip")
    return repository


async def read(threads: ThreadRepository, user: str, thread: str = "t1") -> SessionConfigState:
    reply = await answer_session(threads, SETTINGS, user, SessionConfigGet(thread_id=thread))
    assert isinstance(reply, SessionConfigState), reply
    return reply


async def patch(
    threads: ThreadRepository, user: str, body: dict[str, object], thread: str = "t1"
) -> SessionConfigState | ThreadFailure:
    update = SessionConfigPatch.model_validate(body).as_update(thread)
    return await answer_session(threads, SETTINGS, user, update)


async def test_a_new_thread_has_the_defaults_and_no_overrides(threads: ThreadRepository) -> None:
    state = await read(threads, "ana")
    assert state.overrides == SessionConfigOverrides()
    assert state.config.system_prompt == "Default prompt."
    assert state.config.memory_limit == 20
    assert state.config.proactive_retrieval is False


async def test_overrides_are_stored_and_merged(threads: ThreadRepository) -> None:
    changed = await patch(
        threads,
        "ana",
        {
            "memory_limit": 3,
            "proactive_retrieval": True,
            "memory_min_relevance": 0.25,
            "system_prompt": "Answer like a pirate.",
            "chat_model": "gemini-2.5-pro",
            "memory_type_descriptions": {"goal": "Trips being planned."},
        },
    )
    assert isinstance(changed, SessionConfigState)
    state = await read(threads, "ana")
    assert state == changed
    config = state.config
    assert (config.memory_limit, config.memory_min_relevance) == (3, 0.25)
    assert (config.proactive_retrieval, config.chat_model) == (True, "gemini-2.5-pro")
    assert config.system_prompt == "Answer like a pirate."
    assert config.memory_type_descriptions["goal"] == "Trips being planned."
    assert state.overrides.memory_type_descriptions == {"goal": "Trips being planned."}
    assert state.overrides.memory_limit == 3


async def test_left_out_fields_stay_and_null_resets_to_the_default(
    threads: ThreadRepository,
) -> None:
    await patch(
        threads,
        "ana",
        {
            "memory_limit": 3,
            "system_prompt": "Short answers.",
            "memory_type_descriptions": {"goal": "Trips.", "constraint": "Rules."},
        },
    )
    await patch(
        threads,
        "ana",
        {"memory_limit": None, "memory_type_descriptions": {"goal": None}},
    )
    state = await read(threads, "ana")
    assert state.config.memory_limit == 20  # back to the default
    assert state.overrides.memory_limit is None
    assert state.config.system_prompt == "Short answers."  # left out: unchanged
    assert state.overrides.memory_type_descriptions == {"constraint": "Rules."}
    await patch(threads, "ana", {"memory_type_descriptions": None, "system_prompt": None})
    assert (await read(threads, "ana")).overrides == SessionConfigOverrides()


async def test_a_config_belongs_to_its_user(threads: ThreadRepository) -> None:
    await threads.create("bob", "t1", None)
    await patch(threads, "ana", {"memory_limit": 4})
    # bob's "t1" is another thread: untouched by ana's change, and his own change stays his.
    assert (await read(threads, "bob")).config.memory_limit == 20
    await patch(threads, "bob", {"memory_limit": 9})
    assert (await read(threads, "ana")).config.memory_limit == 4


async def test_a_thread_the_user_does_not_have_is_not_found(threads: ThreadRepository) -> None:
    # "t1" is ana's; for carol it does not exist: reading and changing are both refused.
    refused = await answer_session(threads, SETTINGS, "carol", SessionConfigGet(thread_id="t1"))
    assert isinstance(refused, ThreadFailure) and refused.code == "not_found"
    changed = await patch(threads, "carol", {"memory_limit": 2})
    assert isinstance(changed, ThreadFailure) and changed.code == "not_found"
    assert await threads.get("carol", "t1") is None  # nothing was created for her
    assert (await read(threads, "ana")).config.memory_limit == 20


async def test_a_cycle_gets_the_defaults_for_a_thread_not_stored_yet(
    threads: ThreadRepository,
) -> None:
    request = SessionConfigGet(thread_id="new-thread", defaults_if_missing=True)
    reply = await answer_session(threads, SETTINGS, "ana", request)
    assert isinstance(reply, SessionConfigState)
    assert reply.config.thread_id == "new-thread"
    assert reply.config.system_prompt == "Default prompt."


async def test_reset_wins_over_set_in_one_update(threads: ThreadRepository) -> None:
    update = SessionConfigUpdate(
        thread_id="t1", set=SessionConfigOverrides(memory_limit=5), reset=["memory_limit"]
    )
    reply = await answer_session(threads, SETTINGS, "ana", update)
    assert isinstance(reply, SessionConfigState)
    assert reply.config.memory_limit == 20


async def test_an_empty_change_answers_the_current_config(threads: ThreadRepository) -> None:
    await patch(threads, "ana", {"memory_limit": 6})
    reply = await patch(threads, "ana", {})
    assert isinstance(reply, SessionConfigState) and reply.config.memory_limit == 6
    refused = await patch(threads, "carol", {})
    assert isinstance(refused, ThreadFailure)

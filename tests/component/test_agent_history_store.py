"""The agentHistory log in the memory service's document store, on both adapters
(SQLite, and the MongoDB adapter on tinymongo's emulation): appended in the same write as the
switch, in order under concurrent switches, bounded, per user; and the applied record."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from document_stores import BOTH, opened_store

from memoria_contracts.personas import MAX_AGENT_HISTORY, PersonaApplied
from memoria_contracts.session import (
    SessionConfigGet,
    SessionConfigPatch,
    SessionConfigState,
    SessionPersonaApplied,
)
from memoria_contracts.threads import ThreadFailure
from memoria_memory.docstore import DocumentStore
from memoria_memory.session_configs import answer_session
from memoria_memory.threads import ThreadRepository
from memoria_runtime.settings import Settings

SETTINGS = Settings.load(_env_file=None)


@pytest.fixture(params=BOTH)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[DocumentStore]:
    async with opened_store(request.param, tmp_path, "memoria_personas") as opened:
        yield opened


@pytest.fixture
async def threads(store: DocumentStore) -> ThreadRepository:
    repository = ThreadRepository(store)
    await repository.setup()
    await repository.create("ana", "t1", "Trip")
    await repository.create("bob", "t1", "Bob's")
    return repository


async def switch(
    threads: ThreadRepository, persona: str | None, user: str = "ana"
) -> SessionConfigState | ThreadFailure:
    update = SessionConfigPatch.model_validate({"persona": persona}).as_update("t1")
    return await answer_session(threads, SETTINGS, user, update)


async def read(threads: ThreadRepository, user: str = "ana") -> SessionConfigState:
    reply = await answer_session(threads, SETTINGS, user, SessionConfigGet(thread_id="t1"))
    assert isinstance(reply, SessionConfigState)
    return reply


async def test_switches_are_logged_in_order_and_per_user(threads: ThreadRepository) -> None:
    await switch(threads, "tutor")
    await switch(threads, "tutor")  # already the persona: nothing logged
    await switch(threads, "coach")
    state = await read(threads)
    assert state.config.persona == "coach"
    assert [(e.seq, e.previous, e.persona, e.by) for e in state.agent_history] == [
        (1, "memoria", "tutor", "ana"),
        (2, "tutor", "coach", "ana"),
    ]
    bob = await read(threads, "bob")
    assert bob.config.persona == "memoria" and bob.agent_history == []


async def test_an_unknown_persona_changes_nothing(threads: ThreadRepository) -> None:
    refused = await switch(threads, "pirate")
    assert isinstance(refused, ThreadFailure) and refused.code == "invalid"
    state = await read(threads)
    assert state.config.persona == "memoria" and state.agent_history == []


async def test_concurrent_switches_all_land_in_a_consistent_chain(
    threads: ThreadRepository,
) -> None:
    await asyncio.gather(*(switch(threads, p) for p in ("tutor", "coach", "tutor", "coach")))
    state = await read(threads)
    history = state.agent_history
    assert [e.seq for e in history] == list(range(1, len(history) + 1))
    for before, after in itertools.pairwise(history):
        assert after.previous == before.persona  # no entry was computed from a stale read
    assert history[-1].persona == state.config.persona


async def test_the_log_is_bounded(threads: ThreadRepository) -> None:
    for n in range(MAX_AGENT_HISTORY + 3):
        await switch(threads, "tutor" if n % 2 == 0 else "coach")
    history = (await read(threads)).agent_history
    assert len(history) == MAX_AGENT_HISTORY
    assert history[-1].seq == MAX_AGENT_HISTORY + 3  # positions are never reused


async def test_the_applied_record_is_kept_per_user(threads: ThreadRepository) -> None:
    await switch(threads, "tutor")
    applied = PersonaApplied(seq=1, cycle_id="cyc_1", previous="memoria", turn=0)
    request = SessionPersonaApplied(thread_id="t1", applied=applied)
    recorded = await answer_session(threads, SETTINGS, "ana", request)
    assert isinstance(recorded, SessionConfigState) and recorded.persona_applied == applied
    assert (await read(threads, "bob")).persona_applied is None
    missing = await answer_session(threads, SETTINGS, "carol", request)  # no such thread of carol's
    assert isinstance(missing, ThreadFailure) and missing.code == "not_found"

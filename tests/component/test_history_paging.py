"""Paging back through a long thread (``history.query`` with ``before_id``) in the memory
service, on SQLite and the MongoDB adapter (tinymongo's emulation): every stored message
once, in order, and only the asking user's thread."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest
from document_stores import BOTH, opened_store

from memoria_contracts.chat import ChatRecord
from memoria_contracts.events import Envelope, HistoryPage, HistoryQuery, RpcFailure
from memoria_memory.handlers import MemoryHandlers
from memoria_memory.history import COLLECTION as MESSAGES
from memoria_memory.history import HistoryRepository
from memoria_memory.storage import MemoryStorage
from memoria_memory.threads import ThreadRepository
from memoria_runtime.bus import Delivery
from memoria_runtime.settings import Settings

USER, OTHER, THREAD = "ana", "bob", "t-long"
STORED = 23
PAGE = 10


def record(n: int, *, tool: bool = False) -> ChatRecord:
    extra: dict[str, object] = {"role": "tool", "tool_call_id": f"call_{n}", "name": "X"}
    return ChatRecord.model_validate(
        {
            "id": f"m{n:03d}",
            "cycle_id": f"c{n:03d}",
            "chat-history": True,
            "modal": "text",
            "role": "user",
            "content": f"message {n}",
            **(extra if tool else {}),
        }
    )


@pytest.fixture(params=BOTH)
async def handlers(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[MemoryHandlers]:
    async with opened_store(request.param, tmp_path, "memoria_paging") as store:
        history = HistoryRepository(store.collection(MESSAGES))
        await history.setup()
        threads = ThreadRepository(store)
        await threads.setup()
        for n in range(STORED):
            await history.save(USER, THREAD, record(n), seq=1000 + n)
        await history.save(USER, THREAD, record(STORED, tool=True), seq=1000 + STORED)
        await history.save(OTHER, THREAD, record(900), seq=999)
        served = MemoryHandlers(Settings.load(_env_file=None))
        served.attach(cast(MemoryStorage, SimpleNamespace(history=history)), threads)
        yield served


async def ask(
    handlers: MemoryHandlers, before_id: str | None, *, user: str = USER
) -> HistoryPage | RpcFailure:
    query = HistoryQuery(
        limit=PAGE, only_chat_history=False, tool_records=False, before_id=before_id
    )
    reply = await handlers.on_request(
        Envelope(user_id=user, thread_id=THREAD, payload=query), cast(Delivery, None)
    )
    assert isinstance(reply.payload, HistoryPage | RpcFailure)
    return reply.payload


async def test_paging_back_returns_every_message_once_in_order(
    handlers: MemoryHandlers,
) -> None:
    pages: list[list[str]] = []
    before: str | None = None
    while True:
        page = await ask(handlers, before)
        assert isinstance(page, HistoryPage)
        pages.append([m.id for m in page.messages])
        if len(page.messages) < PAGE:
            break
        before = page.messages[0].id
    assert [len(p) for p in pages] == [10, 10, 3]
    everything = [i for p in reversed(pages) for i in p]
    assert everything == [f"m{n:03d}" for n in range(STORED)]  # the tool record not shown


async def test_an_id_the_thread_does_not_hold_is_not_found(handlers: MemoryHandlers) -> None:
    unknown = await ask(handlers, "m999")
    assert isinstance(unknown, RpcFailure) and unknown.code == "not_found"
    # Another user's message in a thread of the same name is not a cursor for this user...
    foreign = await ask(handlers, "m900")
    assert isinstance(foreign, RpcFailure) and foreign.code == "not_found"
    # ...nor is this user's message one for that user.
    theirs = await ask(handlers, "m010", user=OTHER)
    assert isinstance(theirs, RpcFailure) and theirs.code == "not_found"

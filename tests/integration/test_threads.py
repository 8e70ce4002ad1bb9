"""The threads API end to end: the four services as processes, a real broker, HTTP and a
WebSocket. Threads made over HTTP and threads that simply received messages over the socket
show up in the same list, per user."""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from stack import Stack, running_stack
from ws_client import chat

pytestmark = pytest.mark.integration

ANSWER = "Noted, happy to help."
SCRIPT: dict[str, Any] = {
    "rules": [{"match": "", "decide": ["Finalize"], "chat": {"Finalize": ANSWER}}],
}
SERVER_THREAD_ID = re.compile(r"^t_[0-9a-z]{26}$")
LONG_FIRST_MESSAGE = "I need help planning a ten day trip through the north of Italy next December"
STORE_TIMEOUT_S = 30.0

Threads = list[dict[str, Any]]


@pytest.fixture(scope="module")
def stack(
    valkey_server: Any, milvus_server: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    redis_url = f"redis://127.0.0.1:{valkey_server.port}/13"
    data_dir: Path = tmp_path_factory.mktemp("threads-stack")
    with running_stack(redis_url, milvus_server.uri, data_dir, SCRIPT) as running:
        yield running


class Api:
    """The threads API as one user."""

    def __init__(self, stack: Stack, user_id: str, http: httpx.AsyncClient) -> None:
        self.stack = stack
        self.user_id = user_id
        self.http = http
        self.headers = {"Authorization": f"Bearer {stack.token(user_id)}"}

    async def threads(self, **params: Any) -> Threads:
        response = await self.http.get("/api/threads", params=params, headers=self.headers)
        assert response.status_code == 200, response.text
        threads: Threads = response.json()["threads"]
        return threads

    async def create(self, body: dict[str, Any]) -> httpx.Response:
        return await self.http.post("/api/threads", json=body, headers=self.headers)

    async def rename(self, thread_id: str, title: Any) -> httpx.Response:
        return await self.http.patch(
            f"/api/threads/{thread_id}", json={"title": title}, headers=self.headers
        )

    async def thread(self, thread_id: str) -> dict[str, Any] | None:
        found = [t for t in await self.threads(limit=200) if t["thread_id"] == thread_id]
        return found[0] if found else None

    async def once(self, thread_id: str, done: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        """The thread once ``done`` holds: messages are stored by the memory service after
        the socket has shown them."""
        async with asyncio.timeout(STORE_TIMEOUT_S):
            while True:
                thread = await self.thread(thread_id)
                if thread is not None and done(thread):
                    return thread
                await asyncio.sleep(0.1)

    async def say(self, thread_id: str, content: str) -> None:
        """Send a message over the socket and wait for its cycle to end."""
        async with chat(self.stack.ws_url(self.user_id)) as client:
            accepted = await client.send(thread_id, content)
            assert accepted["type"] == "accepted", accepted
            await client.cycle(accepted["id"])


@pytest.fixture
async def http(stack: Stack) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=stack.base_url) as client:
        yield client


def a_user() -> str:
    return f"u{uuid.uuid4().hex[:10]}"


@pytest.fixture
def ana(stack: Stack, http: httpx.AsyncClient) -> Api:
    return Api(stack, a_user(), http)


@pytest.fixture
def bob(stack: Stack, http: httpx.AsyncClient) -> Api:
    return Api(stack, a_user(), http)


async def test_threads_are_created_listed_newest_first_and_renamed(ana: Api) -> None:
    assert await ana.threads() == []

    created = await ana.create({})
    assert created.status_code == 201
    untitled = created.json()
    assert SERVER_THREAD_ID.fullmatch(untitled["thread_id"])
    assert (untitled["title"], untitled["message_count"], untitled["last_message"]) == (
        "New chat",
        0,
        None,
    )
    assert untitled["created_at"].endswith("Z")
    titled = (await ana.create({"title": "  Budget  "})).json()
    assert titled["title"] == "Budget"
    assert titled["thread_id"] != untitled["thread_id"]

    listed = await ana.threads()
    assert [t["thread_id"] for t in listed] == [titled["thread_id"], untitled["thread_id"]]
    assert [t["thread_id"] for t in await ana.threads(limit=1)] == [titled["thread_id"]]

    renamed = await ana.rename(untitled["thread_id"], "Holidays")
    assert renamed.status_code == 200
    assert renamed.json()["title"] == "Holidays"
    assert [t["title"] for t in await ana.threads()] == ["Budget", "Holidays"]


async def test_a_thread_used_over_the_socket_is_listed_with_its_first_message_as_title(
    ana: Api,
) -> None:
    await ana.say("trip-1", LONG_FIRST_MESSAGE)

    thread = await ana.once("trip-1", lambda t: t["last_message"] == ANSWER)
    stored = ana.stack.history(ana.user_id, "trip-1")
    assert thread["message_count"] == len(stored) >= 2
    assert thread["title"] == "I need help planning a ten day trip through the north of…"
    assert thread["updated_at"] >= thread["created_at"]

    assert (await ana.rename("trip-1", "Italy")).status_code == 200
    await ana.say("trip-1", "And what about Venice?")
    later = await ana.once("trip-1", lambda t: t["message_count"] > thread["message_count"])
    assert later["title"] == "Italy"  # the first message no longer names it
    assert later["updated_at"] > thread["updated_at"]
    assert (await ana.threads())[0]["thread_id"] == "trip-1"


async def test_a_created_thread_is_named_after_the_first_message_sent_to_it(ana: Api) -> None:
    thread_id = (await ana.create({})).json()["thread_id"]
    await ana.say(thread_id, "Remember my passport number")
    thread = await ana.once(thread_id, lambda t: t["last_message"] == ANSWER)
    assert thread["title"] == "Remember my passport number"


async def test_users_see_and_rename_only_their_own_threads(ana: Api, bob: Api) -> None:
    await ana.say("shared-name", "ana's plans for the weekend")
    await ana.say("ana-only", "something private")
    await bob.say("shared-name", "bob's shopping list")
    await ana.once("ana-only", lambda t: t["last_message"] == ANSWER)
    await bob.once("shared-name", lambda t: t["last_message"] == ANSWER)

    bobs = await bob.threads()
    assert [t["thread_id"] for t in bobs] == ["shared-name"]
    assert bobs[0]["title"] == "bob's shopping list"

    foreign = await bob.rename("ana-only", "mine now")
    unknown = await bob.rename("no-such-thread", "mine now")
    assert foreign.status_code == unknown.status_code == 404
    assert foreign.json() == unknown.json() == {"detail": "thread not found"}
    assert (await bob.rename("shared-name", "Shopping")).status_code == 200

    anas = {t["thread_id"]: t["title"] for t in await ana.threads()}
    assert anas == {"shared-name": "ana's plans for the weekend", "ana-only": "something private"}


async def test_bad_requests_are_refused(ana: Api, http: httpx.AsyncClient) -> None:
    thread_id = (await ana.create({})).json()["thread_id"]
    assert (await ana.create({"title": "x", "user_id": "someone"})).status_code == 422
    assert (await ana.rename(thread_id, "   ")).status_code == 422
    assert (await ana.rename(thread_id, "x" * 121)).status_code == 422
    assert (
        await http.get("/api/threads", params={"limit": 201}, headers=ana.headers)
    ).status_code == 422
    assert (await http.get("/api/threads")).status_code == 401
    assert [t["title"] for t in await ana.threads()] == ["New chat"]

"""The socket's stream end to end, on two gateway replicas: event ids, resuming with
``?since=``, the per-connection and per-user rate limits, and fan-out to the right user on
every replica.

Where a test asserts that a socket did *not* get something, it first waits for a later frame
that the same gateway must deliver after it (each gateway reads chat.out in order), so the
absence is certain rather than a matter of waiting long enough."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest
from redis.asyncio import Redis
from stack import Stack, running_stack
from ws_client import ChatClient, Frame, chat

pytestmark = pytest.mark.integration

ANSWER = "Hello there, friend!"
SCRIPT: dict[str, Any] = {
    "rules": [{"match": "", "decide": ["Finalize"], "chat": {"Finalize": ANSWER}}],
    "chat_chunk_words": 1,
}
PER_MINUTE = 6  # one message every 10 s once the burst is spent: no test sends that slowly
BURST = 3
USER_PER_MINUTE = 5  # over all of a user's sockets, on every replica
EVENT_ID = re.compile(r"^[0-9]+-[0-9]+$")
CHAT_OUT = "memoria:chat.out"


@dataclass(frozen=True)
class Replicas:
    stack: Stack
    second_port: int
    redis_url: str

    def url(self, user_id: str, *, second: bool = False, since: str | None = None) -> str:
        url = self.stack.ws_url(user_id, self.second_port if second else None)
        return url if since is None else f"{url}&since={since}"


@pytest.fixture(scope="module")
def replicas(
    valkey_server: Any, milvus_server: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Replicas]:
    redis_url = f"redis://127.0.0.1:{valkey_server.port}/14"
    data_dir: Path = tmp_path_factory.mktemp("ws-stream-stack")
    with running_stack(
        redis_url,
        milvus_server.uri,
        data_dir,
        SCRIPT,
        ws_messages_per_minute=str(PER_MINUTE),
        ws_burst=str(BURST),
        ws_user_messages_per_minute=str(USER_PER_MINUTE),
    ) as stack:
        yield Replicas(stack, stack.add_gateway("gateway-2"), redis_url)


@pytest.fixture
async def broker(replicas: Replicas) -> AsyncIterator[Redis]:
    client = Redis.from_url(replicas.redis_url)
    try:
        yield client
    finally:
        await client.aclose()


def a_user() -> str:
    return f"u{uuid.uuid4().hex[:10]}"


def streamed(frames: list[Frame]) -> list[Frame]:
    """The frames that come from chat.out (not the replies to the client's own frames)."""
    return [f for f in frames if f["type"] in {"message", "delta", "cycle_end"}]


def of_cycle(client: ChatClient, accepted: Frame) -> list[Frame]:
    cycle_id = f"cyc_{accepted['id'].removeprefix('msg_')}"
    return [f for f in client.frames if f.get("cycle_id") == cycle_id]


async def ended(client: ChatClient, accepted: Frame) -> list[Frame]:
    """The cycle's frames on ``client`` once its cycle_end has arrived there."""
    return await client.cycle(accepted["id"])


async def test_streamed_frames_carry_their_chat_out_entry_id(
    replicas: Replicas, broker: Redis
) -> None:
    async with chat(replicas.url(a_user())) as client:
        accepted = await client.send("t1", "hi")
        frames = await ended(client, accepted)

    assert "event_id" not in accepted
    assert {f["type"] for f in frames} == {"message", "delta", "cycle_end"}
    ids = [f["event_id"] for f in frames]
    assert all(EVENT_ID.fullmatch(i) for i in ids)
    as_numbers = [tuple(int(part) for part in i.split("-")) for i in ids]
    assert as_numbers == sorted(as_numbers) and len(set(ids)) == len(ids)
    for frame in frames:
        found = await broker.xrange(CHAT_OUT, min=frame["event_id"], max=frame["event_id"])
        [(entry_id, fields)] = cast(list[tuple[bytes, dict[bytes, bytes]]], found)
        assert entry_id.decode() == frame["event_id"]
        assert frame["cycle_id"].encode() in fields[b"__data__"]


async def test_a_resumed_socket_gets_exactly_the_frames_after_since_then_live_ones(
    replicas: Replicas,
) -> None:
    user = a_user()
    async with chat(replicas.url(user)) as first:
        accepted = await first.send("t1", "hi")
        frames = await ended(first, accepted)
    middle = len(frames) // 2
    since = frames[middle]["event_id"]

    async with chat(replicas.url(user, since=since)) as again:
        resumed = await again.wait_for(lambda f: f["type"] == "resumed")
        replayed = again.frames[: again.frames.index(resumed)]
        assert replayed == frames[middle + 1 :]
        assert resumed == {
            "type": "resumed",
            "since": since,
            "replayed": len(frames) - middle - 1,
            "complete": True,
        }
        # Then live frames, on the same socket, none of them a repeat.
        later = await again.send("t1", "and again")
        assert later["type"] == "accepted"
        live = await ended(again, later)
        every_id = [f["event_id"] for f in streamed(again.frames)]
        assert len(every_id) == len(set(every_id)) == len(replayed) + len(live)


async def test_resuming_from_the_last_frame_seen_replays_nothing(replicas: Replicas) -> None:
    user = a_user()
    async with chat(replicas.url(user)) as first:
        frames = await ended(first, await first.send("t1", "hi"))
    async with chat(replicas.url(user, second=True, since=frames[-1]["event_id"])) as again:
        resumed = await again.wait_for(lambda f: f["type"] == "resumed")
    assert (again.frames[0], resumed["replayed"], resumed["complete"]) == (resumed, 0, True)


@pytest.mark.parametrize(("since", "replays"), [("0-1", True), ("not-an-id", False)])
async def test_a_since_the_stream_cannot_resume_from_is_not_complete(
    replicas: Replicas, since: str, replays: bool
) -> None:
    user = a_user()
    async with chat(replicas.url(user)) as first:
        frames = await ended(first, await first.send("t1", "hi"))

    async with chat(replicas.url(user, since=since)) as again:
        resumed = await again.wait_for(lambda f: f["type"] == "resumed")
        # Older than the oldest entry left: what is left is replayed, but entries after
        # since may have been trimmed away, so the client must reload its threads.
        assert resumed == {
            "type": "resumed",
            "since": since,
            "replayed": len(frames) if replays else 0,
            "complete": False,
        }
        assert again.frames[: resumed["replayed"]] == (frames if replays else [])
        live = await again.send("t1", "still here?")
        assert live["type"] == "accepted"
        await ended(again, live)


async def test_a_connection_over_its_message_rate_is_refused_and_stays_usable(
    replicas: Replicas,
) -> None:
    user = a_user()
    async with chat(replicas.url(user)) as client:
        # Refused frames cost nothing: the whole burst is still there after them.
        assert (await client.send_raw("{not json"))["code"] == "invalid_frame"
        oversized = json.dumps({"type": "message", "thread_id": "t1", "content": "x" * 70_000})
        assert (await client.send_raw(oversized))["code"] == "too_large"

        burst = [await client.send("t1", f"message {n}") for n in range(1, BURST + 1)]
        assert [reply["type"] for reply in burst] == ["accepted"] * BURST
        refused = await client.send("t1", "one too many")
        assert refused["type"] == "error"
        assert refused["code"] == "rate_limited"
        wait = re.search(r"try again in ([0-9]+) s$", refused["message"])
        assert wait is not None
        assert refused["retry_after"] == int(wait.group(1)) >= 1  # the same wait, for programs
        assert (await client.send_raw("[]"))["code"] == "invalid_frame"  # still answering

        async with chat(replicas.url(user)) as another:  # the limit is per connection
            last = await another.send("t1", "from another tab")
            assert last["type"] == "accepted"
            await ended(another, last)
        for reply in burst:
            await ended(client, reply)

    # The thread's cycles run one at a time in order: with the last one over, every message
    # accepted before it has had its cycle, and the refused one never got one.
    contents = [m["content"] for m in replicas.stack.history(user, "t1") if m["role"] == "user"]
    assert contents == ["message 1", "message 2", "message 3", "from another tab"]


async def test_a_users_sockets_on_every_replica_share_one_message_allowance(
    replicas: Replicas,
) -> None:
    user = a_user()
    async with (
        chat(replicas.url(user)) as first,
        chat(replicas.url(user, second=True)) as second,
    ):
        accepted = [await first.send("t1", f"message {n}") for n in range(1, BURST + 1)]
        accepted += [await second.send("t2", f"message {n}") for n in range(BURST + 1, 6)]
        assert [reply["type"] for reply in accepted] == ["accepted"] * USER_PER_MINUTE
        # The second socket has its own burst left, but the user's minute is spent.
        refused = await second.send("t2", "one too many")
        assert (refused["type"], refused["code"]) == ("error", "rate_limited")
        assert "for one user, all connections together" in refused["message"]
        wait = re.search(r"try again in ([0-9]+) s$", refused["message"])
        assert wait is not None
        assert refused["retry_after"] == int(wait.group(1)) >= 1
        assert (await second.send_raw("[]"))["code"] == "invalid_frame"  # still answering
        async with chat(replicas.url(a_user(), second=True)) as other:  # others unaffected
            assert (await other.send("t1", "hello"))["type"] == "accepted"
        for reply in accepted[:BURST]:
            await ended(first, reply)
        for reply in accepted[BURST:]:
            await ended(second, reply)

    said = [
        m["content"]
        for thread in ("t1", "t2")
        for m in replicas.stack.history(user, thread)
        if m["role"] == "user"
    ]
    assert said == [f"message {n}" for n in range(1, USER_PER_MINUTE + 1)]


async def test_every_replica_delivers_a_users_frames_to_that_user_only(
    replicas: Replicas,
) -> None:
    ana, bob = a_user(), a_user()
    async with (
        chat(replicas.url(ana)) as ana_on_1,
        chat(replicas.url(ana, second=True)) as ana_on_2,
        chat(replicas.url(bob, second=True)) as bob_on_2,
    ):
        anas = await ana_on_1.send("t1", "hi from ana")
        on_1 = await ended(ana_on_1, anas)
        on_2 = await ended(ana_on_2, anas)
        assert on_2 == on_1  # the same frames, event ids included, from either replica
        assert [f["content"] for f in on_1 if f["type"] == "message"][-1] == ANSWER

        bobs = await bob_on_2.send("t1", "hi from bob")
        bob_frames = await ended(bob_on_2, bobs)
        # Ana's cycle came first in chat.out, so gateway 2 is past it: none reached bob.
        assert of_cycle(bob_on_2, anas) == []
        assert {f["thread_id"] for f in streamed(bob_on_2.frames)} == {"t1"}
        assert [f["event_id"] for f in streamed(bob_on_2.frames)] == [
            f["event_id"] for f in bob_frames
        ]

        again = await ana_on_2.send("t1", "ana again")
        await ended(ana_on_1, again)
        await ended(ana_on_2, again)
        # Bob's cycle came before this one on both replicas: none of it reached ana.
        assert of_cycle(ana_on_1, bobs) == of_cycle(ana_on_2, bobs) == []
        assert of_cycle(ana_on_1, again) == of_cycle(ana_on_2, again)

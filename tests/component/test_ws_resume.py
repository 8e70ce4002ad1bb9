"""Resuming a socket against a real broker: chat.out entries written the way the services
write them, replayed by the gateway's code to a socket whose live frames arrive meanwhile.
The socket is a recording stand-in; the interleavings that are rare over a network (the
fan-out behind the replay, or ahead of it) are set up exactly here."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, Callable
from typing import Any, cast

import pytest
from redis.asyncio import Redis
from starlette.websockets import WebSocket

from memoria_contracts.chat import ChatRecord
from memoria_contracts.events import ChatDelta, ChatPosted, CycleEnded, Envelope, Payload
from memoria_contracts.streams import Stream
from memoria_gateway.frames import OutboundFrame, frame_for
from memoria_gateway.hub import Connection
from memoria_gateway.replay import ChatOutLog, resume
from memoria_runtime.bus.entry_id import EntryId
from memoria_runtime.bus.framing import frame_for_stream
from memoria_runtime.bus.replay import ReplayScan
from memoria_runtime.bus.service_bus import MESSAGE_FORMAT
from memoria_runtime.bus.signing import Signer
from memoria_runtime.partitions import Partitions

Frame = dict[str, Any]
SIGNER = Signer("resume-test-bus-secret")


class RecordingSocket:
    """Stands in for the client's socket: keeps every frame the gateway sends."""

    def __init__(self) -> None:
        self.sent: list[Frame] = []
        self._changed = asyncio.Condition()

    async def send_text(self, text: str) -> None:
        async with self._changed:
            self.sent.append(json.loads(text))
            self._changed.notify_all()

    async def close(self, code: int = 1000, reason: str = "") -> None:
        return None

    async def until(self, done: Callable[[list[Frame]], bool]) -> list[Frame]:
        async with asyncio.timeout(10), self._changed:
            await self._changed.wait_for(lambda: done(self.sent))
        return self.sent


class ChatOut:
    """Appends entries to chat.out as decision and the workers do (FastStream's framing)."""

    def __init__(self, redis: Redis) -> None:
        self.redis = redis

    async def add(
        self, user: str, payload: Payload, cycle: str = "cyc_1", signer: Signer = SIGNER
    ) -> EntryId:
        event = Envelope(cycle_id=cycle, user_id=user, thread_id="t1", payload=payload)
        framed = await frame_for_stream(signer, Stream.CHAT_OUT, event)
        entry = await self.redis.xadd(Stream.CHAT_OUT.value, {"__data__": framed})
        parsed = EntryId.parse(entry)
        assert parsed is not None
        return parsed

    async def delta(self, user: str, n: int) -> EntryId:
        return await self.add(user, ChatDelta(message_id="m1", content=f"piece {n} "))

    def frame(self, entry: EntryId, user: str, n: int) -> str:
        """The live frame the fan-out makes of a delta written by :meth:`delta`."""
        event = Envelope(
            cycle_id="cyc_1",
            user_id=user,
            thread_id="t1",
            payload=ChatDelta(message_id="m1", content=f"piece {n} "),
        )
        made = frame_for(event, str(entry))
        assert made is not None
        return made.model_dump_json()


def log_of(redis: Redis) -> ChatOutLog:
    return ChatOutLog(redis, MESSAGE_FORMAT, SIGNER, Partitions())


@pytest.fixture
def chat_out(redis: Redis) -> ChatOut:
    return ChatOut(redis)


@pytest.fixture
async def socket() -> AsyncGenerator[tuple[Connection, RecordingSocket]]:
    recording = RecordingSocket()
    connection = Connection(cast(WebSocket, recording), "ana")
    connection.hold_live()  # as the endpoint does for ?since=, before registering it
    connection.start()
    yield connection, recording
    await connection.stop()


def event_ids(frames: list[Frame]) -> list[str]:
    return [f["event_id"] for f in frames if "event_id" in f]


def resumed(frames: list[Frame]) -> Frame:
    [frame] = [f for f in frames if f["type"] == "resumed"]
    return frame


async def test_the_frames_after_since_are_replayed_in_order_with_their_event_ids(
    redis: Redis, chat_out: ChatOut, socket: tuple[Connection, RecordingSocket]
) -> None:
    connection, recording = socket
    record = ChatRecord(id="m1", chat_history=True, modal="text", role="user", content="hi")
    seen = await chat_out.add("ana", ChatPosted(message=record))
    ana = [await chat_out.delta("ana", 1)]
    await chat_out.delta("bob", 1)  # someone else's
    ana.append(await chat_out.add("ana", CycleEnded(actions=["Finalize"], reason="done")))

    answer = await resume(connection, log_of(redis), str(seen))

    frames = await recording.until(lambda sent: any(f["type"] == "resumed" for f in sent))
    assert [f["type"] for f in frames] == ["delta", "cycle_end", "resumed"]
    assert event_ids(frames) == [str(e) for e in ana]
    assert frames[0]["content"] == "piece 1 "
    assert resumed(frames) == {
        "type": "resumed",
        "since": str(seen),
        "replayed": 2,
        "complete": True,
    }
    assert (answer.replayed, answer.complete) == (2, True)


async def test_a_resume_reads_at_most_its_scan_cap_of_entries_and_says_it_is_incomplete(
    redis: Redis, chat_out: ChatOut, socket: tuple[Connection, RecordingSocket]
) -> None:
    """chat.out holds every user's frames: a resume from far back must not read them all
    (each reconnect would cost the gateway seconds of CPU); past its cap the client is told
    to reload instead."""
    connection, recording = socket
    since = await chat_out.delta("ana", 0)
    early = await chat_out.delta("ana", 1)
    for n in range(6):
        await chat_out.delta("bob", n)  # other users' traffic
    await chat_out.delta("ana", 2)  # beyond the cap: not read

    answer = await resume(
        connection,
        log_of(redis),
        str(since),
        scan_cap=5,
    )

    frames = await recording.until(lambda sent: any(f["type"] == "resumed" for f in sent))
    assert event_ids(frames) == [str(early)]
    assert resumed(frames)["complete"] is False
    assert (answer.replayed, answer.complete) == (1, False)


async def test_a_resume_that_reads_the_stream_to_its_end_within_the_cap_is_complete(
    redis: Redis, chat_out: ChatOut, socket: tuple[Connection, RecordingSocket]
) -> None:
    connection, recording = socket
    since = await chat_out.delta("ana", 0)
    await chat_out.delta("bob", 1)
    last = await chat_out.delta("ana", 2)

    answer = await resume(
        connection,
        log_of(redis),
        str(since),
        scan_cap=2,  # exactly the entries after since
    )

    frames = await recording.until(lambda sent: any(f["type"] == "resumed" for f in sent))
    assert event_ids(frames) == [str(last)]
    assert (answer.replayed, answer.complete) == (1, True)


async def test_a_forged_entry_is_never_replayed(
    redis: Redis, chat_out: ChatOut, socket: tuple[Connection, RecordingSocket]
) -> None:
    """Someone with write access to Redis but not the bus secret appends a fake answer."""
    connection, recording = socket
    record = ChatRecord(id="m1", chat_history=True, modal="text", role="user", content="hi")
    seen = await chat_out.add("ana", ChatPosted(message=record))
    forger = Signer("not-the-bus-secret")
    fake = ChatDelta(message_id="m2", content="click evil.example ")
    await chat_out.add("ana", fake, signer=forger)
    ana = await chat_out.delta("ana", 1)

    await resume(connection, log_of(redis), str(seen))

    frames = await recording.until(lambda sent: any(f["type"] == "resumed" for f in sent))
    assert [f["type"] for f in frames] == ["delta", "resumed"]
    assert event_ids(frames) == [str(ana)]
    assert all("evil" not in json.dumps(f) for f in frames)


class RacingLog(ChatOutLog):
    """Plays the fan-out while the replay is read: after the first replayed frame, it
    delivers an entry the replay also has (a fan-out behind the replay) and appends and
    delivers new ones (frames published during the replay)."""

    def __init__(self, chat_out: ChatOut, connection: Connection, replayed: EntryId) -> None:
        super().__init__(chat_out.redis, MESSAGE_FORMAT, SIGNER, Partitions())
        self.chat_out = chat_out
        self.connection = connection
        self.replayed = replayed
        self.new: list[EntryId] = []

    async def frames_after(
        self, user_id: str, after: EntryId, scan: ReplayScan
    ) -> AsyncGenerator[tuple[EntryId, OutboundFrame], None]:
        raced = False
        async for item in super().frames_after(user_id, after, scan):
            yield item
            if not raced:
                raced = True
                self.connection.deliver(self.replayed, self.chat_out.frame(self.replayed, "ana", 2))
                for n in (4, 5):
                    entry = await self.chat_out.delta("ana", n)
                    self.new.append(entry)
                    self.connection.deliver(entry, self.chat_out.frame(entry, "ana", n))


async def test_no_frame_is_lost_or_repeated_when_the_replay_hands_over_to_live_frames(
    chat_out: ChatOut, socket: tuple[Connection, RecordingSocket]
) -> None:
    connection, recording = socket
    since = await chat_out.delta("ana", 1)
    second = await chat_out.delta("ana", 2)
    third = await chat_out.delta("ana", 3)
    log = RacingLog(chat_out, connection, replayed=second)

    await resume(connection, log, str(since))
    # Late deliveries from this replica's fan-out: one replayed, one new.
    connection.deliver(third, chat_out.frame(third, "ana", 3))
    sixth = await chat_out.delta("ana", 6)
    connection.deliver(sixth, chat_out.frame(sixth, "ana", 6))

    frames = await recording.until(lambda sent: len(sent) >= 6)
    await asyncio.sleep(0)  # let the writer send anything queued that should not be there
    assert [f["type"] for f in frames] == ["delta", "delta", "resumed", "delta", "delta", "delta"]
    assert event_ids(frames) == [str(e) for e in (second, third, *log.new, sixth)]
    assert [f["content"] for f in frames if f["type"] == "delta"] == [
        f"piece {n} " for n in (2, 3, 4, 5, 6)
    ]
    assert resumed(frames)["replayed"] == 2


async def test_a_since_older_than_the_oldest_entry_left_is_not_complete(
    redis: Redis, chat_out: ChatOut, socket: tuple[Connection, RecordingSocket]
) -> None:
    connection, recording = socket
    since = await chat_out.delta("ana", 1)
    await chat_out.delta("ana", 2)
    kept = await chat_out.delta("ana", 3)
    await redis.xtrim(Stream.CHAT_OUT.value, minid=str(kept), approximate=False)

    answer = await resume(connection, log_of(redis), str(since))

    assert (answer.replayed, answer.complete) == (1, False)  # piece 2 is gone
    frames = await recording.until(lambda sent: len(sent) == 2)
    assert event_ids(frames) == [str(kept)]


async def test_the_replay_stops_at_its_cap_and_says_it_is_not_complete(
    redis: Redis, chat_out: ChatOut, socket: tuple[Connection, RecordingSocket]
) -> None:
    connection, recording = socket
    since = await chat_out.delta("ana", 0)
    entries = [await chat_out.delta("ana", n) for n in range(1, 6)]

    log = log_of(redis)
    answer = await resume(connection, log, str(since), cap=3)

    assert (answer.replayed, answer.complete) == (3, False)
    frames = await recording.until(lambda sent: len(sent) == 4)
    assert event_ids(frames) == [str(e) for e in entries[:3]]


@pytest.mark.parametrize("since", ["yesterday", "", "12", "1-2-3"])
async def test_a_malformed_since_replays_nothing_and_live_frames_flow(
    redis: Redis,
    chat_out: ChatOut,
    socket: tuple[Connection, RecordingSocket],
    since: str,
) -> None:
    connection, recording = socket
    earlier = await chat_out.delta("ana", 1)
    connection.deliver(earlier, chat_out.frame(earlier, "ana", 1))  # live, during "replay"

    answer = await resume(connection, log_of(redis), since)

    assert answer.model_dump() == {
        "type": "resumed",
        "since": since,
        "replayed": 0,
        "complete": False,
    }
    frames = await recording.until(lambda sent: len(sent) == 2)
    assert [f["type"] for f in frames] == ["resumed", "delta"]


async def test_a_since_from_a_stream_that_is_gone_drops_no_live_frame(
    redis: Redis, chat_out: ChatOut, socket: tuple[Connection, RecordingSocket]
) -> None:
    connection, recording = socket
    # The client saw entries of a broker whose data was since lost: its position is ahead
    # of anything this stream holds, and every frame of the new stream is new to it.
    entry = await chat_out.delta("ana", 1)
    ahead = EntryId(entry.millis + 3_600_000, 0)

    answer = await resume(connection, log_of(redis), str(ahead))
    connection.deliver(entry, chat_out.frame(entry, "ana", 1))

    assert (answer.replayed, answer.complete) == (0, False)
    frames = await recording.until(lambda sent: len(sent) == 2)
    assert event_ids(frames) == [str(entry)]

"""The bus as decision and the workers see it, kept in the process: a publisher that records
what would be appended to the streams, a memory client whose threads have no history, and a
decision engine on them with the scripted model (its Redis state is real)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memoria_contracts.chat import ChatRecord
from memoria_contracts.events import (
    ActionSpec,
    ChatPosted,
    CycleEnded,
    Envelope,
    HistoryPage,
    Payload,
)
from memoria_contracts.streams import Stream
from memoria_decision.chooser import Chooser
from memoria_decision.deadlines import Deadlines
from memoria_decision.executor import CycleExecutor
from memoria_decision.store import CycleStore, released_ttl_s
from memoria_llm.scripted import Script, ScriptedModel, ScriptRule
from memoria_runtime.bus import EventPublisher
from memoria_runtime.bus.memory_requests import MemoryClient
from memoria_runtime.bus.thread_gate import ThreadGate
from memoria_runtime.partitions import Partitions
from memoria_runtime.settings import DecisionSettings, Settings

PARTITIONS = Partitions()
ONE = PARTITIONS.all[0]  # the embedded default: one partition, keys untagged

FINALIZE = ActionSpec(name="Finalize", description="Answer the user.", ends_cycle=True)
"""The action a test's worker advertises when the cycle should simply answer."""


class RecordingPublisher(EventPublisher):
    """Keeps what is published instead of writing it to Redis Streams."""

    def __init__(self) -> None:  # no broker: nothing leaves the process
        self.sent: list[tuple[Stream, Envelope]] = []
        self._partitions = PARTITIONS

    async def publish(self, stream: Stream, event: Envelope) -> None:
        self.sent.append((stream, event))

    async def queue(self, pipe: Any, stream: Stream, event: Envelope) -> None:
        self.sent.append((stream, event))

    async def publish_all(self, stream: Stream, events: Sequence[Envelope]) -> None:
        self.sent.extend((stream, event) for event in events)

    async def execute(self, pipe: Any, *, raise_on_error: bool = True) -> list[Any]:
        """The pipeline's other writes still reach Redis (its state is real)."""
        return list(await pipe.execute(raise_on_error=raise_on_error))

    def on(self, stream: Stream) -> list[Envelope]:
        return [event for sent_to, event in self.sent if sent_to is stream]

    def chat(self) -> list[ChatRecord]:
        """The complete messages posted on chat.out, in order."""
        return [
            e.payload.message for e in self.on(Stream.CHAT_OUT) if isinstance(e.payload, ChatPosted)
        ]

    def ends(self) -> list[CycleEnded]:
        return [e.payload for e in self.on(Stream.CHAT_OUT) if isinstance(e.payload, CycleEnded)]

    def clear(self) -> None:
        self.sent.clear()


class EmptyHistory(MemoryClient):
    """Answers every memory request with an empty history page, in the process."""

    def __init__(self) -> None:  # no broker
        pass

    async def _call(
        self, user_id: str, thread_id: str, cycle_id: str | None, payload: Payload
    ) -> Payload:
        return HistoryPage(messages=[])


def scripted_engine(
    redis: Any,
    publisher: EventPublisher,
    *,
    rules: list[ScriptRule] | None = None,
    memory: MemoryClient | None = None,
    settings: Settings | None = None,
) -> CycleExecutor:
    """Decision on ``redis`` whose scripted model follows ``rules`` (default: always
    Finalize), asking ``memory`` (default: threads without history)."""
    chosen = settings if settings is not None else Settings.load(_env_file=None)
    decision = chosen.process(DecisionSettings)
    model = ScriptedModel(
        Script(rules=rules if rules is not None else [ScriptRule(decide=["Finalize"])])
    )
    return CycleExecutor(
        settings=decision,
        redis=redis,
        publisher=publisher,
        gate=ThreadGate(redis, lock_ttl_s=60, stream_maxlen=1000, partitions=chosen.bus.partitions),
        store=CycleStore(redis, chosen.bus.partitions, released_ttl_s=released_ttl_s(chosen.bus)),
        deadlines=Deadlines(redis, chosen.bus.partitions),
        memory=memory if memory is not None else EmptyHistory(),
        chooser=Chooser(decision, redis, model),
    )

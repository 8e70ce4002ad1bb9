"""What a new cycle reads from the memory service before its first decision: the thread's
history and its session config in one request, with the config asked on its own only when
the answer lacks it (an older memory service), and the defaults when the service is silent.
On a real Redis, scripted LLM."""

from __future__ import annotations

from in_process_bus import FINALIZE, RecordingPublisher, scripted_engine
from redis.asyncio import Redis

from memoria_contracts.cycles import cycle_id_for
from memoria_contracts.events import (
    Envelope,
    HistoryPage,
    HistoryQuery,
    Payload,
    UserMessageReceived,
)
from memoria_contracts.session import SessionConfigGet, SessionConfigOverrides, SessionConfigState
from memoria_decision.core.state import CycleState
from memoria_decision.store import CycleStore
from memoria_runtime import catalog
from memoria_runtime.bus.memory_requests import MemoryClient
from memoria_runtime.bus.request_reply import RpcError
from memoria_runtime.partitions import Partitions
from memoria_runtime.session_defaults import session_defaults
from memoria_runtime.settings import Settings
from memoria_text import i18n

PARTITIONS = Partitions()
ONE = PARTITIONS.all[0]  # the embedded default: one partition, keys untagged

SETTINGS = Settings.load(_env_file=None)


def config_with_limit(limit: int) -> SessionConfigState:
    config = session_defaults(SETTINGS, "t1").model_copy(update={"memory_limit": limit})
    return SessionConfigState(config=config, overrides=SessionConfigOverrides(memory_limit=limit))


class OpeningMemory(MemoryClient):
    """Answers in process as a memory service would; keeps what it was asked."""

    def __init__(
        self,
        *,
        in_page: SessionConfigState | None,
        on_its_own: SessionConfigState | None = None,
        history_fails: Exception | None = None,
    ) -> None:  # no broker
        self.in_page = in_page
        self.on_its_own = on_its_own
        self.history_fails = history_fails
        self.asked: list[str] = []

    async def _call(
        self, user_id: str, thread_id: str, cycle_id: str | None, payload: Payload
    ) -> Payload:
        self.asked.append(payload.type)
        if isinstance(payload, HistoryQuery):
            if self.history_fails is not None:
                raise self.history_fails
            return HistoryPage(messages=[], session=self.in_page if payload.session else None)
        if isinstance(payload, SessionConfigGet) and self.on_its_own is not None:
            return self.on_its_own
        raise RpcError("unavailable", f"not answered here: {payload.type}")


async def start_cycle(redis: Redis, memory: OpeningMemory) -> tuple[CycleState, RecordingPublisher]:
    await catalog.advertise(redis, "worker-1", [FINALIZE], ttl_s=60)
    publisher = RecordingPublisher()
    engine = scripted_engine(redis, publisher, memory=memory, settings=SETTINGS)
    message = UserMessageReceived(message_id="msg_opening1", content="hi there")
    await engine.on_user_message(
        Envelope(user_id="ana", thread_id="t1", payload=message), message, b"framed"
    )
    store = CycleStore(redis, PARTITIONS, released_ttl_s=60)
    state = await store.load(ONE, cycle_id_for(message.message_id))
    assert isinstance(state, CycleState) and state.session is not None
    return state, publisher


async def test_history_and_session_config_come_in_one_request(redis: Redis) -> None:
    memory = OpeningMemory(in_page=config_with_limit(3))
    state, _ = await start_cycle(redis, memory)
    assert memory.asked == ["history.query"]
    assert state.session is not None and state.session.memory_limit == 3


async def test_an_answer_without_the_config_asks_for_it_on_its_own(redis: Redis) -> None:
    """A memory service from before the field ignores it: the cycle still gets its config."""
    memory = OpeningMemory(in_page=None, on_its_own=config_with_limit(7))
    state, _ = await start_cycle(redis, memory)
    assert memory.asked == ["history.query", "session.get"]
    assert state.session is not None and state.session.memory_limit == 7


async def test_a_failed_history_still_reads_the_config(redis: Redis) -> None:
    memory = OpeningMemory(
        in_page=config_with_limit(3),
        on_its_own=config_with_limit(5),
        history_fails=RpcError("storage", "history unreadable"),
    )
    state, publisher = await start_cycle(redis, memory)
    assert memory.asked == ["history.query", "session.get"]
    assert state.session is not None and state.session.memory_limit == 5
    notice = i18n.text("history_unavailable", "en")
    assert notice in [record.content for record in publisher.chat()]


async def test_a_silent_memory_service_is_not_asked_twice(redis: Redis) -> None:
    """Asking again for the config alone would make the user wait the timeout twice."""
    memory = OpeningMemory(
        in_page=None, on_its_own=config_with_limit(7), history_fails=TimeoutError()
    )
    state, publisher = await start_cycle(redis, memory)
    assert memory.asked == ["history.query"]
    assert state.session == session_defaults(SETTINGS, "t1")
    notice = i18n.text("history_unavailable", "en")
    assert notice in [record.content for record in publisher.chat()]

"""The chat's side of memoria_client's long-lived connection: every frame goes to
``on_frame`` in order, what the connection does is told through ``notify``, and a message's
sender learns when the cycle it started is over.

The connection (``AsyncMemoria.connect``) owns the socket: it resumes a dropped one with
``since`` and sends a message whose reply was lost again under the same client id. What is
left here is the REPL's: knowing which cycle a message started and whether it ended, and
releasing a wait with a warning when that end may have gone by unseen (frames lost with a
socket, or a cycle that went silent) instead of hanging on it.

The session ends for good (:class:`SessionEnded`) when the gateway refuses the socket (the
token; one socket too many for the user) or every reconnection attempt failed; whoever
waits on it is then told why.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, Final

from memoria_client import (
    APIError,
    AsyncMemoria,
    ChatClosed,
    Conversation,
    CycleEndFrame,
    Disconnected,
    Incoming,
    MemoriaError,
    Message,
    Reconnected,
    ReconnectFailed,
)
from memoria_client import Frame as ServerFrame
from memoria_client.conversation import RECONNECT_DELAYS_S

log = logging.getLogger("memoria.cli.chat")

Frame = dict[str, Any]

__all__ = ["RECONNECT_DELAYS_S", "ChatSession", "CycleOutcome", "Frame", "SessionEnded"]

CYCLE_SILENCE_S: Final = 300.0
"""Longest a wait for a cycle's end goes without any frame: longer than a step may take
(MEMORIA_STEP_TIMEOUT_SECONDS, 120 s by default), so only a lost cycle gets here."""


class SessionEnded(Exception):
    """The chat cannot go on; the message says why."""


class CycleOutcome(enum.Enum):
    ENDED = "ended"
    INTERRUPTED = "interrupted"  # the socket dropped and the missed frames are lost
    SILENT = "silent"  # nothing came for CYCLE_SILENCE_S


class ChatSession:
    def __init__(
        self,
        client: AsyncMemoria,
        on_frame: Callable[[Frame], None],
        notify: Callable[[str], None],
        *,
        reconnect_delays: Sequence[float] = RECONNECT_DELAYS_S,
        cycle_silence_s: float = CYCLE_SILENCE_S,
    ) -> None:
        self._client = client
        self._on_frame = on_frame
        self._notify = notify
        self._delays = tuple(reconnect_delays)
        self._cycle_silence_s = cycle_silence_s
        self._conversation: Conversation | None = None
        self._reader: asyncio.Task[None] | None = None
        self._error: SessionEnded | None = None
        self._dead = asyncio.Event()
        self._changed = asyncio.Event()
        self._cycle_of: dict[str, str] = {}  # user message id -> the cycle it started
        self._ended: set[str] = set()
        self._gaps = 0  # reconnections that lost frames
        self._waiting = 0

    # -- lifetime ---------------------------------------------------------------------------

    async def open(self) -> None:
        """Connect once; a failure here ends the command (nothing to resume yet)."""
        conversation = self._client.connect(reconnect_delays=self._delays)
        try:
            await conversation.open()
        except MemoriaError as exc:
            raise SessionEnded(_why(exc)) from exc
        self._conversation = conversation
        self._reader = asyncio.create_task(self._listen(conversation), name="memoria-chat")

    async def close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        if self._conversation is not None:
            await self._conversation.close()

    async def ended(self) -> SessionEnded:
        """Wait until the session ends for good; why."""
        await self._dead.wait()
        assert self._error is not None
        return self._error

    # -- requests ---------------------------------------------------------------------------

    async def send(self, thread_id: str, content: str, message_id: str) -> Frame:
        """Send a message; its reply, ``accepted`` or ``error``, as the view draws frames."""
        self._raise_if_ended()
        assert self._conversation is not None, "send() before open()"
        try:
            reply = await self._conversation.send(thread_id, content, message_id=message_id)
        except ChatClosed as exc:
            raise self._end(SessionEnded(_why(exc))) from None
        return _drawn(reply)

    async def wait_for_cycle(self, message_id: str) -> CycleOutcome:
        """Until the cycle that ``message_id`` (an accepted message's id) started is over."""
        gaps = self._gaps
        self._waiting += 1
        try:
            while True:
                self._raise_if_ended()
                cycle_id = self._cycle_of.get(message_id)
                if cycle_id is not None and cycle_id in self._ended:
                    return CycleOutcome.ENDED
                if self._gaps != gaps:
                    return CycleOutcome.INTERRUPTED
                try:
                    await asyncio.wait_for(self._next_change(), self._cycle_silence_s)
                except TimeoutError:
                    return CycleOutcome.SILENT
        finally:
            self._waiting -= 1

    # -- what the connection brings ---------------------------------------------------------

    async def _listen(self, conversation: Conversation) -> None:
        try:
            async for item in conversation:
                self._handle(item)
        except ChatClosed as exc:
            self._end(SessionEnded(_why(exc)))
        except Exception as exc:  # a bug must end the chat visibly, not leave it hanging
            log.exception("chat reader failed")
            self._end(SessionEnded(f"the chat stopped on an unexpected error: {exc!r}"))

    def _handle(self, item: Incoming) -> None:
        if isinstance(item, Disconnected):
            self._notify("connection to the gateway lost; reconnecting...")
        elif isinstance(item, ReconnectFailed):
            self._notify(f"reconnection attempt {item.attempt} failed: {item.reason}")
        elif isinstance(item, Reconnected):
            self._reconnected(item)
        else:
            if isinstance(item, Message) and item.role == "user" and item.cycle_id:
                self._cycle_of[item.id] = item.cycle_id
            elif isinstance(item, CycleEndFrame) and item.cycle_id:
                self._ended.add(item.cycle_id)
            self._on_frame(_drawn(item))
        self._pulse()

    def _reconnected(self, event: Reconnected) -> None:
        if event.complete:
            self._notify("reconnected; nothing was missed")
            return
        # A wait for a cycle whose end may have gone by is released (INTERRUPTED).
        self._gaps += 1
        if self._waiting:
            self._notify("reconnected, but part of the reply was lost with the connection")
        else:
            self._notify("reconnected")

    # -- waiting ----------------------------------------------------------------------------

    def _pulse(self) -> None:
        """Wake everyone waiting for something to change."""
        self._changed.set()
        self._changed = asyncio.Event()

    def _next_change(self) -> Coroutine[Any, Any, bool]:
        """What to await for the next change. The event is taken *now*: ``asyncio.wait_for``
        starts the wait in a task a loop turn later, and a frame handled in between (a
        ``cycle_end`` right behind the answer) would otherwise replace the event before the
        wait began and be missed until the next frame — or the silence timeout."""
        return self._changed.wait()

    def _end(self, error: SessionEnded) -> SessionEnded:
        if self._error is None:
            self._error = error
            self._dead.set()
            self._pulse()
        return self._error

    def _raise_if_ended(self) -> None:
        if self._error is not None:
            raise self._error


def _drawn(frame: ServerFrame) -> Frame:
    """A typed frame as the view reads it: the wire's field names and values."""
    drawn: Frame = frame.model_dump(mode="json", by_alias=True)
    return drawn


def _why(exc: MemoriaError) -> str:
    """Why the chat cannot go on, in the chat's words."""
    if isinstance(exc, ChatClosed):
        if exc.code == "unauthorized":
            return f"the gateway refused the token: {exc.message}"
        if exc.code == "too_many_connections":
            too_many = "the gateway refused the chat socket: too many open for this user"
            return f"{too_many} ({exc.message})"
        return exc.message
    if isinstance(exc, APIError):
        return str(exc.detail)
    return str(exc)

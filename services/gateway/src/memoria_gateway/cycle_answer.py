"""One cycle's answer as it happens, read from the frames the hub delivers to a listener.

The web page shows every frame; a client that wants only "the answer" (the OpenAI-compatible
endpoint) needs the cycle's text in order, the memories it used, and its end. Status lines
and the user's own message are left out. A message is streamed as deltas and then sent
whole under the same id: the whole one only adds what its deltas did not already give.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from memoria_contracts.frames import CycleEndFrame, DeltaFrame, MessageFrame
from memoria_gateway.hub import FrameListener

MESSAGE_SEPARATOR = "\n\n"
"""Between two messages of one cycle (a search's explanation, then the final answer)."""


@dataclass(frozen=True)
class TextPiece:
    text: str


@dataclass(frozen=True)
class MemoryUsed:
    memory: Any


@dataclass(frozen=True)
class CycleOver:
    end: CycleEndFrame


AnswerEvent = TextPiece | MemoryUsed | CycleOver


class AnswerLost(Exception):
    """The listener fell too far behind and frames were dropped."""


class AnswerTimeout(Exception):
    """The cycle did not end in the time allowed."""


class _Texts:
    """What has been given of each message so far, and in what order they started."""

    def __init__(self) -> None:
        self._given: dict[str, str] = {}

    def add(self, message_id: str, text: str, *, whole: bool) -> str:
        """The text to pass on for this piece (a delta) or whole message."""
        given = self._given.get(message_id)
        lead = MESSAGE_SEPARATOR if given is None and self._given else ""
        if given is None:
            given = ""
        if whole:
            if not text.startswith(given):  # a redone step said it differently: too late
                return ""
            piece = text[len(given) :]
        else:
            piece = text
        self._given[message_id] = given + piece
        return lead + piece if piece else ""


async def follow(
    listener: FrameListener, cycle_id: str, timeout_s: float
) -> AsyncIterator[AnswerEvent]:
    """Yield the cycle's answer pieces, memories and end; frames of other cycles and
    threads of the user are skipped."""
    texts = _Texts()
    deadline = time.monotonic() + timeout_s
    while True:
        if listener.overflowed:
            raise AnswerLost
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AnswerTimeout
        try:
            frame = await asyncio.wait_for(listener.frames.get(), remaining)
        except TimeoutError as exc:
            raise AnswerTimeout from exc
        if frame.cycle_id != cycle_id:
            continue
        if isinstance(frame, CycleEndFrame):
            yield CycleOver(frame)
            return
        if isinstance(frame, DeltaFrame):
            piece = texts.add(frame.id, frame.content, whole=False)
        else:
            event = _message_event(frame, texts)
            if isinstance(event, MemoryUsed):
                yield event
                continue
            piece = event
        if piece:
            yield TextPiece(piece)


def _message_event(frame: MessageFrame, texts: _Texts) -> MemoryUsed | str:
    if frame.modal == "memory":
        return MemoryUsed(frame.content)
    if frame.role == "user" or frame.modal == "textForReplace":
        return ""  # the user's own words; a status line
    content = frame.content if isinstance(frame.content, str) else str(frame.content)
    return texts.add(frame.id, content, whole=True)

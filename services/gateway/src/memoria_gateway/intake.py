"""Turning a client frame into a durably queued user message, or a clear error."""

from __future__ import annotations

import asyncio
import json
import logging

from opentelemetry import trace
from pydantic import ValidationError
from redis.exceptions import RedisError

from memoria_contracts.events import Envelope, UserMessageReceived
from memoria_contracts.frames import (
    AcceptedFrame,
    ClientMessage,
    ClientSessionConfig,
    ErrorFrame,
)
from memoria_contracts.ids import new_id
from memoria_contracts.streams import Stream
from memoria_gateway.error_words import one_line
from memoria_runtime.bus.framing import frame_for_stream
from memoria_runtime.bus.signing import Signer
from memoria_runtime.bus.thread_gate import ThreadGate
from memoria_runtime.settings import GatewaySettings
from memoria_runtime.telemetry import current_trace_carrier

log = logging.getLogger("memoria.gateway.intake")
tracer = trace.get_tracer("memoria.gateway")

ADMIT_TIMEOUT_S = 5.0
"""Longest a message waits for the broker to queue it. A broker cut off without a reset (a
network partition) would otherwise leave the client waiting without a word; told instead,
it sends the message again (with its id, so it is queued once)."""


def _describe(exc: ValidationError) -> str:
    return one_line(exc.errors(include_url=False, include_input=False))


class Intake:
    def __init__(self, settings: GatewaySettings, gate: ThreadGate, signer: Signer) -> None:
        self._settings = settings
        self._gate = gate
        self._signer = signer

    def parse(self, raw: str | bytes) -> ClientMessage | ClientSessionConfig | ErrorFrame:
        size = len(raw.encode() if isinstance(raw, str) else raw)
        if size > self._settings.max_frame_bytes:
            return ErrorFrame(
                code="too_large",
                message=f"frame of {size} bytes; the limit is {self._settings.max_frame_bytes}",
            )
        try:
            data = json.loads(raw)
        except RecursionError:  # "[[[[…" a few thousand deep fits in any frame limit
            return ErrorFrame(code="invalid_frame", message="the frame's JSON nests too deeply")
        except ValueError:  # JSONDecodeError, UnicodeDecodeError, an int of > 4300 digits
            return ErrorFrame(code="invalid_frame", message="frames must be JSON text")
        try:
            if isinstance(data, dict) and data.get("type") == "session_config":
                return ClientSessionConfig.model_validate(data)
            frame = ClientMessage.model_validate(data)
        except ValidationError as exc:
            return ErrorFrame(code="invalid_frame", message=_describe(exc))
        if not frame.content.strip():
            return ErrorFrame(code="invalid_frame", message="content: the message is empty")
        if len(frame.content) > self._settings.max_message_chars:
            return ErrorFrame(
                code="too_large",
                message=f"message of {len(frame.content)} characters; "
                f"the limit is {self._settings.max_message_chars}",
            )
        return frame

    async def submit(self, user_id: str, frame: ClientMessage) -> AcceptedFrame | ErrorFrame:
        message_id = new_id("msg")
        with tracer.start_as_current_span(
            "gateway.user_message",
            attributes={"memoria.user_id": user_id, "memoria.thread_id": frame.thread_id},
        ):
            event = Envelope(
                user_id=user_id,
                thread_id=frame.thread_id,
                trace=current_trace_carrier(),
                payload=UserMessageReceived(message_id=message_id, content=frame.content),
            )
            try:
                framed = await frame_for_stream(self._signer, Stream.CHAT_IN, event)
                async with asyncio.timeout(ADMIT_TIMEOUT_S):
                    result = await self._gate.admit(
                        user_id, frame.thread_id, message_id, framed, frame.id
                    )
            except TimeoutError:
                log.error("the broker did not queue a message of %s in time", user_id)
                return ErrorFrame(
                    code="broker_unavailable",
                    message="the broker did not confirm the message in time; please send it "
                    "again (sent again with the same id, it is queued at most once)",
                )
            except (RedisError, OSError) as exc:
                log.error("could not queue a message of %s: %s", user_id, exc)
                return ErrorFrame(
                    code="broker_unavailable",
                    message="the message could not be queued; nothing was accepted, "
                    "please send it again",
                )
        return AcceptedFrame(
            id=result.message_id,
            thread_id=frame.thread_id,
            queued=result.outcome == "queued",
            duplicate=result.outcome == "duplicate",
        )

"""WebSocket frames between a browser (or any client) and the gateway; see docs/protocol.md."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, StringConstraints

from memoria_contracts.chat import CardInfo, Modal, Role
from memoria_contracts.events import CycleEndReason, CycleSummary, CycleUsage, ThreadId
from memoria_contracts.personas import AgentHistoryEntry
from memoria_contracts.session import SessionConfig, SessionConfigOverrides, SessionConfigPatch
from memoria_contracts.text import PlainText

ClientMessageId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_-]{8,64}$")]
StreamEventId = Annotated[str, StringConstraints(pattern=r"^[0-9]+-[0-9]+$")]
"""A ``chat.out`` stream entry id, ``<milliseconds>-<sequence>``: what ``?since=`` takes."""

ErrorCode = Literal[
    "invalid_frame",  # not JSON, unknown type, or a field of the wrong shape
    "too_large",  # the frame or the message text is over the limit
    "unauthorized",  # missing, forged or expired token
    "broker_unavailable",  # the message could not be queued; nothing was accepted
    "rate_limited",
    "too_many_connections",  # on connecting: the user's sockets on this gateway are at the cap
    "not_found",  # no such thread of yours (session_config)
    "unavailable",  # the memory service did not answer (session_config); send again
]

SOCKET_REFUSALS: Final[dict[ErrorCode, int]] = {"unauthorized": 4401, "too_many_connections": 4429}
"""Error codes that refuse the socket itself, each with the close code that follows its error
frame (4000-4999 are application codes; these mirror HTTP 401 and 429). Reconnecting would
only be refused again."""


SOCKET_SUBPROTOCOL: Final = "memoria.v1"
"""The subprotocol a client offers with its ``bearer.<token>`` one; the gateway echoes this
one back (browsers fail a socket whose server picks none of those offered)."""
BEARER_SUBPROTOCOL_PREFIX: Final = "bearer."
"""``Sec-WebSocket-Protocol: memoria.v1, bearer.<token>`` carries the token out of the URL."""


class _Frame(BaseModel):
    model_config = ConfigDict(
        frozen=True, validate_by_name=True, validate_by_alias=True, serialize_by_alias=True
    )


class ClientMessage(_Frame):
    """``{"type": "message", "thread_id": "...", "content": "..."}`` from the client.

    ``id`` is optional: a client that sets it can resend after a reconnect without the
    message being handled twice.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: Literal["message"]
    thread_id: ThreadId
    content: PlainText = Field(min_length=1)
    id: ClientMessageId | None = None


class ClientSessionConfig(_Frame):
    """``{"type": "session_config", "thread_id": "...", "config": {...}}``: change the
    thread's session config (fields left out unchanged, null resets to the default); without
    ``config``, read it. Answered by a ``session_config`` frame or an error frame."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: Literal["session_config"]
    thread_id: ThreadId
    config: SessionConfigPatch | None = None


class ClientAuth(_Frame):
    """``{"type": "auth", "token": "..."}``: the first frame of a socket opened without a
    token in its handshake. Secret, so no repr, log or dump shows it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: Literal["auth"]
    token: SecretStr = Field(min_length=1)


ClientFrame = Annotated[ClientMessage | ClientSessionConfig, Field(discriminator="type")]


class AcceptedFrame(_Frame):
    """The message is durably queued; its answer will follow as frames of the same thread."""

    type: Literal["accepted"] = "accepted"
    id: str
    thread_id: str
    queued: bool = Field(
        default=False, description="True when another cycle of the thread runs first."
    )
    duplicate: bool = Field(
        default=False, description="True when this client id was already accepted."
    )


def _absent(value: object) -> bool:
    return value is None


def _event_id_field() -> Any:
    # Left out of the JSON when unset: frames that do not come from chat.out (a thread's
    # stored messages, accepted, error) carry no event id at all, not a null one.
    return Field(
        default=None,
        exclude_if=_absent,
        description="The chat.out entry this frame came from; reconnect with "
        "`/ws?since=<event_id>` to get the frames after it.",
    )


class MessageFrame(_Frame):
    type: Literal["message"] = "message"
    id: str
    thread_id: str
    cycle_id: str | None
    chat_history: bool = Field(alias="chat-history")
    modal: Modal
    role: Role
    content: Any
    model: str | None = None
    created_at: datetime
    event_id: StreamEventId | None = _event_id_field()
    card: CardInfo | None = Field(
        default=None,
        exclude_if=_absent,
        description="A memory card only: found (with `match`: `best` or `related`), saved, "
        "or updated (with `replaced`, the old content).",
    )
    cycle_end: CycleSummary | None = Field(
        default=None,
        exclude_if=_absent,
        description="A thread's stored messages only: on the last message of an ended cycle "
        "in the page, how that cycle ended (what its live `cycle_end` frame said, with its "
        "duration), so a client can draw the reply's summary again.",
    )


class DeltaFrame(_Frame):
    type: Literal["delta"] = "delta"
    id: str
    thread_id: str
    cycle_id: str | None
    content: str
    event_id: StreamEventId | None = _event_id_field()


class CycleEndFrame(_Frame):
    type: Literal["cycle_end"] = "cycle_end"
    cycle_id: str | None
    thread_id: str
    actions: list[str]
    reason: CycleEndReason
    usage: CycleUsage | None = Field(
        default=None,
        description="Tokens and estimated cost (USD) of the cycle's LLM calls, when known.",
    )
    event_id: StreamEventId | None = _event_id_field()


class ResumedFrame(_Frame):
    """After a reconnect with ``?since=``: the frames after ``since`` were replayed; live
    frames follow. ``complete`` false: some may be missing (``since`` malformed, unknown or
    trimmed away, or too many to replay), so reload the threads from their history."""

    type: Literal["resumed"] = "resumed"
    since: str
    replayed: int = Field(ge=0, description="Frames replayed before this one.")
    complete: bool


class SessionConfigFrame(_Frame):
    """A thread's session config: the answer to a client ``session_config`` frame."""

    type: Literal["session_config"] = "session_config"
    thread_id: str
    user_id: str = Field(description="The session's user.")
    config: SessionConfig = Field(description="Effective: the defaults, overrides on top.")
    overrides: SessionConfigOverrides = Field(
        description="What the thread sets itself; null fields follow the defaults."
    )
    agent_history: list[AgentHistoryEntry] = Field(
        default_factory=list,
        alias="agentHistory",
        description="The thread's persona switches, oldest first.",
    )


class ErrorFrame(_Frame):
    type: Literal["error"] = "error"
    code: ErrorCode
    message: str
    retry_after: int | None = Field(
        default=None,
        ge=0,
        # Left out of the frame when unset: only ``rate_limited`` carries it.
        exclude_if=lambda value: value is None,
        description="rate_limited only: whole seconds until the same frame would be taken.",
    )


ServerFrame = Annotated[
    AcceptedFrame
    | MessageFrame
    | DeltaFrame
    | CycleEndFrame
    | ErrorFrame
    | ResumedFrame
    | SessionConfigFrame,
    Field(discriminator="type"),
]

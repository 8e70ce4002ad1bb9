"""A cycle's session config: read once when the cycle starts and kept in its state, so
every step of the cycle runs with the same one; and proactive retrieval, the memories found
with the user's message before the first decision.

Neither may stop a cycle: when the memory service does not answer, the cycle runs with the
settings' defaults and without proactive memories.
"""

from __future__ import annotations

import logging
from typing import Final

from memoria_contracts.chat import ChatRecord
from memoria_contracts.memory import MAX_BINDING_CHARS, MEMORY_TYPES, MemoryFailure, MemorySearch
from memoria_contracts.session import (
    SessionConfig,
    SessionConfigGet,
    SessionConfigOverrides,
    SessionConfigState,
)
from memoria_contracts.threads import ThreadFailure
from memoria_decision import commands
from memoria_runtime.memory_client import MemoryClient
from memoria_runtime.rpc import RpcError
from memoria_runtime.session_defaults import session_defaults
from memoria_runtime.settings import SessionSettings

log = logging.getLogger("memoria.decision.session")

RECALL_STEP: Final = 0
"""Memory cards of proactive retrieval are ``<cycle_id>.0.<n>``: the message ids of a step
``<cycle_id>.<step>.<n>`` for the step before the first, so whatever reads a step's memories
from the ids (MemorySearch's "already retrieved", the offline planner) counts them too."""


async def read_session(
    memory: MemoryClient, settings: SessionSettings, user_id: str, thread_id: str, cycle_id: str
) -> SessionConfigState:
    """The thread's effective session config and persona log (the defaults and no log for a
    thread not stored yet, or when the memory service does not answer)."""
    request = SessionConfigGet(thread_id=thread_id, defaults_if_missing=True)
    try:
        reply = await memory.session_config(user_id, request, cycle_id=cycle_id)
    except (TimeoutError, RpcError) as exc:
        log.error("cycle %s: no session config, using the defaults: %r", cycle_id, exc)
        reply = None
    if reply is None or isinstance(reply, ThreadFailure):
        return default_session(settings, thread_id)
    return reply


def default_session(settings: SessionSettings, thread_id: str) -> SessionConfigState:
    """A thread's session config when none can be read: the settings' defaults, no persona
    log (as for a thread not stored yet)."""
    defaults = session_defaults(settings, thread_id)
    return SessionConfigState(config=defaults, overrides=SessionConfigOverrides())


def recall_query(message: str) -> str:
    """The user's message as a search query: on one line, cut to a query's length."""
    return " ".join(message.split())[:MAX_BINDING_CHARS]


async def recall(
    memory: MemoryClient, session: SessionConfig, user_id: str, original: ChatRecord
) -> list[ChatRecord]:
    """With proactive retrieval on, the memories that match the user's message, as the
    memory cards MemorySearch shows (``modal: memory``, in the chat history); else none."""
    query = recall_query(str(original.content))
    if not session.proactive_retrieval or not query or original.cycle_id is None:
        return []
    if commands.recognize(query) is not None:  # "delete all my memories" is not a topic
        return []
    cycle_id = original.cycle_id
    search = MemorySearch(
        mode="semantic",
        queries=[query],
        limit=session.memory_limit,
        min_relevance=session.memory_min_relevance,
    )
    try:
        found = await memory.search(user_id, search, thread_id=session.thread_id, cycle_id=cycle_id)
    except (TimeoutError, RpcError) as exc:
        log.error("cycle %s: proactive retrieval failed: %r", cycle_id, exc)
        return []
    if isinstance(found, MemoryFailure):
        log.error("cycle %s: proactive retrieval failed: %s", cycle_id, found.error_message)
        return []
    return [
        ChatRecord.memory_card(f"{cycle_id}.{RECALL_STEP}.{n}", cycle_id, found_memory)
        for n, found_memory in enumerate(found.memories, start=1)
    ]


def recalled(transcript: list[ChatRecord], cycle_id: str) -> list[ChatRecord]:
    """The proactive memory cards of a cycle's transcript."""
    prefix = f"{cycle_id}.{RECALL_STEP}."
    return [record for record in transcript if record.id.startswith(prefix)]


def session_instructions(session: SessionConfig | None) -> str:
    """What the decision prompt adds to its system text: the thread's system prompt and the
    memory types with their descriptions; nothing without a session."""
    if session is None:
        return ""
    types = "\n".join(
        f"- {name}: {session.memory_type_descriptions[name]}" for name in MEMORY_TYPES
    )
    recall_note = (
        "\n\nMemories marked [memory found] right after the user's message were retrieved "
        "for it before this decision; do not search for them again."
        if session.proactive_retrieval
        else ""
    )
    return (
        f"\n\nInstructions for this conversation (the assistant's system prompt):\n<<<\n"
        f"{session.system_prompt}\n>>>\n\nMemory types:\n{types}{recall_note}"
    )

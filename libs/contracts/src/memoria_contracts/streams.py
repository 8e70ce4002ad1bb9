"""Every Redis stream and consumer group name, in one place."""

from __future__ import annotations

from enum import StrEnum


class Stream(StrEnum):
    CHAT_IN = "memoria:chat.in"
    """User messages accepted by a gateway; read by decision."""
    ACTIONS = "memoria:actions"
    """One entry per step to run; read by the action-worker group (scaled out)."""
    ACTIONS_DONE = "memoria:actions.done"
    """Step outcomes; read by decision to pick the next step or end the cycle."""
    CHAT_OUT = "memoria:chat.out"
    """Messages, stream deltas and cycle ends for users; every gateway reads all of it."""
    MEMORY_RPC = "memoria:memory.rpc"
    """Requests to the memory service (request/reply)."""
    DEAD_LETTER = "memoria:dead-letter"
    """Entries that failed too often or could not be parsed, with the reason."""


class Group(StrEnum):
    DECISION = "decision"
    ACTION_WORKER = "action-worker"
    MEMORY = "memory"
    MEMORY_HISTORY = "memory-history"
    """The memory service's second group on chat.out, to persist the chat history (and each
    cycle's trace of its messages)."""
    MEMORY_TRACE = "memory-trace"
    """The memory service's group on chat.in, actions and actions.done: each cycle's trace."""


READERS: dict[Stream, tuple[Group, ...]] = {
    Stream.CHAT_IN: (Group.DECISION, Group.MEMORY_TRACE),
    Stream.ACTIONS: (Group.ACTION_WORKER, Group.MEMORY_TRACE),
    Stream.ACTIONS_DONE: (Group.DECISION, Group.MEMORY_TRACE),
    Stream.CHAT_OUT: (Group.MEMORY_HISTORY,),
    Stream.MEMORY_RPC: (Group.MEMORY,),
    Stream.DEAD_LETTER: (),
}
"""The consumer groups that read each stream. A stream is only ever created together with
all of them (memoria_runtime.bus.topology), so no entry can be appended where a group that
must read it does not exist yet. Gateways read chat.out without a group (every replica reads
all of it), and nothing reads the dead letters but people."""

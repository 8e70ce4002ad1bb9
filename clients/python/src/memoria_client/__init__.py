"""Typed Python client for Memoria: memories, threads, cycle traces, chat, export/import.

from memoria_client import Memoria

with Memoria("http://127.0.0.1:8000") as memoria:
    memoria.login("ana")
    memoria.add("Prefers window seats", ["seat preference"], memory_type="preference")
    for memory in memoria.search("where do I like to sit?"):
        print(memory.content, memory.relevance_score)
"""

from memoria_client.chat import ChatOptions, ChatReply
from memoria_client.client import AsyncMemoria, Memoria
from memoria_client.conversation import (
    ConnectionEvent,
    Conversation,
    Disconnected,
    Incoming,
    Reconnected,
    ReconnectFailed,
)
from memoria_client.errors import (
    APIError,
    AuthenticationError,
    ChatClosed,
    ChatError,
    GatewayUnreachable,
    InvalidRequest,
    MemoriaError,
    NotFound,
    RateLimited,
    Unavailable,
    UnreadableAnswer,
)
from memoria_client.models import (
    AcceptedFrame,
    CreatedMemory,
    CycleEndFrame,
    CycleTrace,
    DeletedMemory,
    DeltaFrame,
    ErrorFrame,
    Frame,
    Health,
    Memory,
    MemoryChange,
    MemoryHistory,
    MemoryPage,
    MemoryUpdate,
    Message,
    Persona,
    PersonaList,
    ResumedFrame,
    SessionConfigFrame,
    Thread,
    ThreadConfig,
    Token,
)
from memoria_client.retry import RetryPolicy
from memoria_client.transfer import ImportSummary

__all__ = [
    "APIError",
    "AcceptedFrame",
    "AsyncMemoria",
    "AuthenticationError",
    "ChatClosed",
    "ChatError",
    "ChatOptions",
    "ChatReply",
    "ConnectionEvent",
    "Conversation",
    "CreatedMemory",
    "CycleEndFrame",
    "CycleTrace",
    "DeletedMemory",
    "DeltaFrame",
    "Disconnected",
    "ErrorFrame",
    "Frame",
    "GatewayUnreachable",
    "Health",
    "ImportSummary",
    "Incoming",
    "InvalidRequest",
    "Memoria",
    "MemoriaError",
    "Memory",
    "MemoryChange",
    "MemoryHistory",
    "MemoryPage",
    "MemoryUpdate",
    "Message",
    "NotFound",
    "Persona",
    "PersonaList",
    "RateLimited",
    "ReconnectFailed",
    "Reconnected",
    "ResumedFrame",
    "RetryPolicy",
    "SessionConfigFrame",
    "Thread",
    "ThreadConfig",
    "Token",
    "Unavailable",
    "UnreadableAnswer",
]

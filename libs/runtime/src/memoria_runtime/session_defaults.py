"""The session configuration a thread has before it sets anything: the settings'."""

from __future__ import annotations

from memoria_contracts.session import SessionConfig
from memoria_runtime.settings import SessionSettings


def session_defaults(settings: SessionSettings, thread_id: str) -> SessionConfig:
    """``chat_model`` is null: the provider's configured chat model answers."""
    return SessionConfig(
        thread_id=thread_id,
        system_prompt=settings.cycle.system_prompt,
        chat_model=None,
        memory_limit=settings.memory.memory_limit,
        memory_min_relevance=settings.memory.memory_min_relevance,
        memory_type_descriptions=dict(settings.memory.memory_type_descriptions),
        proactive_retrieval=settings.memory.proactive_retrieval,
        persona=settings.cycle.default_persona,
    )

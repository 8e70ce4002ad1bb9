"""The session configuration a thread has before it sets anything: the settings'."""

from __future__ import annotations

from memoria_contracts.session import SessionConfig
from memoria_runtime.settings import SessionSettings


def session_defaults(settings: SessionSettings, thread_id: str) -> SessionConfig:
    """``chat_model`` is null: the provider's configured chat model answers."""
    return SessionConfig(
        thread_id=thread_id,
        system_prompt=settings.system_prompt,
        chat_model=None,
        memory_limit=settings.memory_limit,
        memory_min_relevance=settings.memory_min_relevance,
        memory_type_descriptions=dict(settings.memory_type_descriptions),
        proactive_retrieval=settings.proactive_retrieval,
        persona=settings.default_persona,
    )

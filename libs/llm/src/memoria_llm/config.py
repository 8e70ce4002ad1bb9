"""What the providers need to know, and nothing else.

Each remote provider takes its own small config. Field names are those of the service
settings that hold the same values (``MEMORIA_LLM_RETRIES`` → ``llm_retries``), so a service
builds a config from its settings object by attribute (:meth:`LLMConfig.of`) without this
package importing the settings, and the environment variables keep their names.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, SecretStr

LlmProvider = Literal["auto", "gemini", "openai", "offline", "scripted"]


class RemoteConfig(BaseModel):
    """What every remote provider shares: how long one call may take, how often it is tried,
    and the size of the vectors the store was made for."""

    model_config = ConfigDict(frozen=True, from_attributes=True)

    llm_timeout_seconds: float = 60.0
    llm_retries: int = 3
    embedding_dim: int = 768


class GeminiConfig(RemoteConfig):
    gemini_api_key: SecretStr
    gemini_base_url: str | None = None
    model_reasoning_heavy: str = "gemini-2.5-pro"
    model_reasoning: str = "gemini-2.5-flash"
    model_chat: str = "gemini-2.5-flash"
    model_embedding: str = "gemini-embedding-001"


class OpenAIConfig(RemoteConfig):
    openai_base_url: str
    openai_api_key: SecretStr | None = None
    openai_model: str | None = None
    openai_model_reasoning_heavy: str | None = None
    openai_model_reasoning: str | None = None
    openai_model_chat: str | None = None
    openai_tool_messages: bool = True
    openai_embedding_model: str | None = None


class LLMConfig(BaseModel):
    """The provider asked for, with the config of each one that is configured (``gemini``
    when a key is set, ``openai`` when a base URL is)."""

    model_config = ConfigDict(frozen=True)

    llm_provider: LlmProvider = "auto"
    gemini: GeminiConfig | None = None
    openai: OpenAIConfig | None = None
    scripted_llm_file: Path | None = None

    @classmethod
    def of(cls, settings: object) -> LLMConfig:
        """The config held by ``settings``: any object with the fields' names as attributes."""
        gemini = openai = None
        if getattr(settings, "gemini_api_key", None) is not None:
            gemini = GeminiConfig.model_validate(settings, from_attributes=True)
        if getattr(settings, "openai_base_url", None):
            openai = OpenAIConfig.model_validate(settings, from_attributes=True)
        return cls(
            llm_provider=getattr(settings, "llm_provider", "auto"),
            gemini=gemini,
            openai=openai,
            scripted_llm_file=getattr(settings, "scripted_llm_file", None),
        )

"""What the providers need to know, and nothing else.

The settings themselves (names, defaults, environment variables) are declared once, in
:class:`memoria_contracts.llm_settings.LlmSettings`; each remote provider takes the part of
them it needs, checked (a Gemini config has a key, an OpenAI-compatible one a base URL).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, SecretStr

from memoria_contracts.llm_settings import LlmProvider, LlmSettings


class RemoteConfig(BaseModel):
    """What every remote provider shares: how long one call may take, how often it is tried,
    and the size of the vectors the store was made for."""

    model_config = ConfigDict(frozen=True, from_attributes=True)

    llm_timeout_seconds: float
    llm_retries: int
    embedding_dim: int

    @classmethod
    def defaults(cls, *, embedding_dim: int) -> RemoteConfig:
        """The settings' defaults (no environment read), for vectors of ``embedding_dim``."""
        return cls.model_validate(
            LlmSettings.model_construct(embedding_dim=embedding_dim), from_attributes=True
        )


class GeminiConfig(RemoteConfig):
    gemini_api_key: SecretStr
    gemini_base_url: str | None
    model_reasoning_heavy: str
    model_reasoning: str
    model_chat: str
    model_embedding: str


class OpenAIConfig(RemoteConfig):
    openai_base_url: str
    openai_api_key: SecretStr | None
    openai_model: str | None
    openai_model_reasoning_heavy: str | None
    openai_model_reasoning: str | None
    openai_model_chat: str | None
    openai_tool_messages: bool
    openai_embedding_model: str | None


class LLMConfig(BaseModel):
    """The provider asked for, with the config of each one that is configured (``gemini``
    when a key is set, ``openai`` when a base URL is)."""

    model_config = ConfigDict(frozen=True)

    llm_provider: LlmProvider
    gemini: GeminiConfig | None = None
    openai: OpenAIConfig | None = None
    scripted_llm_file: Path | None = None

    @classmethod
    def of(cls, settings: LlmSettings) -> LLMConfig:
        gemini = openai = None
        if settings.gemini_api_key is not None:
            gemini = GeminiConfig.model_validate(settings, from_attributes=True)
        if settings.openai_base_url:
            openai = OpenAIConfig.model_validate(settings, from_attributes=True)
        return cls(
            llm_provider=settings.llm_provider,
            gemini=gemini,
            openai=openai,
            scripted_llm_file=settings.scripted_llm_file,
        )

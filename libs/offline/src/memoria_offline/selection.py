"""The language model a service runs: the provider its settings configure, else the offline
planner. The choice of the planner lives here, not in ``memoria_llm``'s factory, so the
providers' package knows nothing of the planner (which depends on it)."""

from __future__ import annotations

from memoria_contracts.llm_settings import LlmSettings
from memoria_llm.config import LLMConfig
from memoria_llm.factory import create_language_model
from memoria_llm.port import LanguageModel
from memoria_offline.model import OfflineModel


def language_model(settings: LlmSettings) -> LanguageModel:
    return create_language_model(LLMConfig.of(settings)) or OfflineModel()

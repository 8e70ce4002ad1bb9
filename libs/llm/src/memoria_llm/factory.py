"""Pick the provider the settings ask for."""

from __future__ import annotations

from memoria_llm.offline import OfflineModel
from memoria_llm.port import LanguageModel
from memoria_llm.scripted import Script, ScriptedModel
from memoria_runtime.settings import Settings


def create_language_model(settings: Settings) -> LanguageModel:
    provider = settings.llm_provider
    if provider == "auto":
        provider = "gemini" if settings.gemini_api_key else "offline"
    if provider == "scripted":
        if settings.scripted_llm_file is None:
            raise ValueError("MEMORIA_LLM_PROVIDER=scripted needs MEMORIA_SCRIPTED_LLM_FILE")
        return ScriptedModel(Script.load(settings.scripted_llm_file))
    if provider == "gemini":
        if settings.gemini_api_key is None:
            raise ValueError("MEMORIA_LLM_PROVIDER=gemini needs GEMINI_API_KEY")
        from memoria_llm.gemini import GeminiModel

        return GeminiModel(settings)
    return OfflineModel()

"""Pick the provider the settings ask for."""

from __future__ import annotations

from memoria_llm.offline import OfflineModel
from memoria_llm.port import LanguageModel
from memoria_llm.scripted import Script, ScriptedModel
from memoria_runtime.settings import Settings


def create_language_model(settings: Settings) -> LanguageModel:
    provider = settings.llm_provider
    if provider == "auto":
        # A Gemini key wins: it is the provider the defaults (models, prices) are made for.
        if settings.gemini_api_key:
            provider = "gemini"
        elif settings.openai_base_url:
            provider = "openai"
        else:
            provider = "offline"
    if provider == "scripted":
        if settings.scripted_llm_file is None:
            raise ValueError("MEMORIA_LLM_PROVIDER=scripted needs MEMORIA_SCRIPTED_LLM_FILE")
        return ScriptedModel(Script.load(settings.scripted_llm_file))
    if provider == "gemini":
        if settings.gemini_api_key is None:
            raise ValueError("MEMORIA_LLM_PROVIDER=gemini needs GEMINI_API_KEY")
        from memoria_llm.gemini import GeminiModel

        return GeminiModel(settings)
    if provider == "openai":
        if not settings.openai_base_url:
            raise ValueError(
                "MEMORIA_LLM_PROVIDER=openai needs MEMORIA_OPENAI_BASE_URL, e.g. "
                "http://localhost:11434/v1 (Ollama)"
            )
        # Imported when chosen, like Gemini: a deployment needs one SDK, not both.
        from memoria_llm.openai_compat import OpenAICompatibleModel

        # A missing model is a ValueError from the constructor, naming the settings to set.
        return OpenAICompatibleModel(settings)
    return OfflineModel()

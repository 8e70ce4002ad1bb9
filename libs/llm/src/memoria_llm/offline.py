"""The provider used when no model is configured. It does not pretend: every answer says
that no language model is running and how to configure one."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from memoria_llm.port import (
    EmbedPurpose,
    LanguageModel,
    LLMOutputError,
    LLMRequest,
    Mode,
    T,
    UnsupportedMode,
)

LABEL = "offline planner (no LLM)"
_QUOTE_CHARS = 80

_FINALIZE = {
    "en": (
        "No language model is configured, so this is the offline planner answering. I got "
        'your message ("{quote}"). To get real answers, set GEMINI_API_KEY and restart.'
    ),
    "pt": (
        "Nenhum modelo de linguagem está configurado, então quem responde é o planejador "
        'offline. Recebi sua mensagem ("{quote}"). Para respostas de verdade, defina '
        "GEMINI_API_KEY e reinicie."
    ),
}
_QUESTION = {
    "en": "Could you tell me more? (offline planner: no language model is configured)",
    "pt": "Pode me contar mais? (planejador offline: nenhum modelo de linguagem configurado)",
}


def _quote(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _QUOTE_CHARS else flat[: _QUOTE_CHARS - 1] + "…"


class OfflineModel(LanguageModel):
    @property
    def name(self) -> str:
        return "offline"

    def label(self, mode: Mode) -> str:
        return LABEL

    async def reasoning_heavy(self, request: LLMRequest, choices: Sequence[str]) -> str:
        return "Finalize" if "Finalize" in choices else choices[0]

    async def reasoning(self, request: LLMRequest, schema: type[T]) -> T:
        raise LLMOutputError(f"the offline planner cannot produce {request.task} output yet")

    async def chat(self, request: LLMRequest) -> AsyncIterator[str]:
        language = request.context.language if request.context else "en"
        if request.task == "Question":
            text = _QUESTION[language]
        else:
            original = request.context.original_message.content if request.context else ""
            text = _FINALIZE[language].format(quote=_quote(str(original)))
        for word in text.split(" "):
            yield word + " "

    async def embedding(self, texts: Sequence[str], purpose: EmbedPurpose) -> list[list[float]]:
        raise UnsupportedMode("the offline planner has no embedding model")

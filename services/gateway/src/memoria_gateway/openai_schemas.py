"""The OpenAI chat-completions wire format, as far as Memoria speaks it.

Requests keep OpenAI's shape so any OpenAI client or chat UI can send them; fields Memoria
has no use for (``temperature``, ``top_p``, ``tools``…) are accepted and ignored, because
clients send them by default. Answers carry OpenAI's fields plus one extension field,
``memoria``, with the thread, the cycle, the actions taken and the memories used: clients
that do not know it ignore it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from memoria_contracts.events import CycleEndReason, CycleUsage

MODEL_ID = "memoria"
"""The one model this endpoint serves: a full thought cycle over the user's memories."""


class TextPart(BaseModel):
    model_config = ConfigDict(extra="allow")

    type: Literal["text"]
    text: str


class OtherPart(BaseModel):
    """An image, audio or file part: refused with a clear error (only text is read)."""

    model_config = ConfigDict(extra="allow")

    type: str


class ChatMessageIn(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[TextPart | OtherPart] | None = None


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")

    include_usage: bool = Field(default=False, strict=True)


class ChatCompletionRequest(BaseModel):
    model_config = ConfigDict(extra="allow")

    model: str = Field(description=f"`{MODEL_ID}` (see GET /v1/models).")
    messages: list[ChatMessageIn] = Field(
        min_length=1,
        description="Only the newest `user` message is read: it starts a thought cycle. "
        "Memoria keeps the thread's history itself, so earlier messages are not replayed.",
    )
    # Strict: "yes" or 1 is not true to a JSON client, and guessing would stream by surprise.
    stream: bool = Field(default=False, strict=True)
    stream_options: StreamOptions | None = None
    n: int | None = Field(default=None, strict=True, description="Only 1 is supported.")
    user: str | None = Field(
        default=None,
        description="Names the Memoria thread when no X-Memoria-Thread header does.",
    )


class AnswerMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str
    refusal: None = None


class Choice(BaseModel):
    index: int = 0
    message: AnswerMessage
    logprobs: None = None
    finish_reason: Literal["stop"] = "stop"


class Usage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0

    @classmethod
    def of(cls, usage: CycleUsage | None) -> Usage:
        if usage is None:  # the offline planner: no model call reports tokens
            return cls()
        total = usage.input_tokens + usage.output_tokens
        return cls(
            prompt_tokens=usage.input_tokens,
            completion_tokens=usage.output_tokens,
            total_tokens=total,
        )


class MemoriaExtension(BaseModel):
    """What the cycle did, beside the text: the extension field ``memoria``."""

    thread_id: str
    cycle_id: str
    message_id: str = Field(description="The user message's id in the thread.")
    actions: list[str] = Field(default_factory=list, description="The steps taken, in order.")
    reason: CycleEndReason | None = None
    memories: list[Any] = Field(default_factory=list, description="Memories found or saved.")
    usage: CycleUsage | None = Field(default=None, description="Tokens and cost by model.")


class ChatCompletion(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[Choice]
    usage: Usage
    memoria: MemoriaExtension


class ChunkDelta(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: Literal["assistant"] | None = Field(default=None, exclude_if=lambda v: v is None)
    content: str | None = Field(default=None, exclude_if=lambda v: v is None)


class ChunkChoice(BaseModel):
    index: int = 0
    delta: ChunkDelta
    logprobs: None = None
    finish_reason: Literal["stop"] | None = None


class ChatCompletionChunk(BaseModel):
    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChunkChoice]
    usage: Usage | None = Field(default=None, exclude_if=lambda v: v is None)
    memoria: dict[str, Any] | None = Field(default=None, exclude_if=lambda v: v is None)


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "memoria"


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


class ErrorBody(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class ErrorResponse(BaseModel):
    """OpenAI's error object: ``{"error": {"message", "type", "param", "code"}}``."""

    error: ErrorBody

"""What the OpenAI-compatible adapter (``openai_compat``) needs to speak the chat-completions
dialect: messages, response formats, reading errors and answers, and token counts.

Servers that call themselves OpenAI-compatible (OpenAI, Ollama, llama.cpp, vLLM, LM Studio)
agree on the shapes but not on the extras, so everything here reads answers defensively: the
SDK does not validate a response body, and a field a server left out is simply missing.
"""

from __future__ import annotations

import email.utils
import json
import math
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

import openai
from openai.types import CreateEmbeddingResponse
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionAssistantMessageParam,
    ChatCompletionMessageParam,
    ChatCompletionMessageToolCallParam,
    ChatCompletionSystemMessageParam,
    ChatCompletionToolMessageParam,
    ChatCompletionUserMessageParam,
)
from opentelemetry.trace import Span
from pydantic import BaseModel, ValidationError

from memoria_llm import usage
from memoria_llm.port import LLMOutputError, LLMUnavailable, Prompt, PromptMessage

RETRY_CLIENT_CODES = frozenset({408, 429})  # the only 4xx that asking again can fix
REFUSAL_CODES = frozenset({400, 422})  # how servers say "I do not take that parameter"
RESPONSE_FORMAT = "response_format"
STREAM_OPTIONS = "stream_options"
# Words in a refusal that blame one optional parameter. A schema the server cannot turn into
# a grammar (llama.cpp) is blamed on response_format too: falling back is right for it.
_BLAME: dict[str, tuple[str, ...]] = {
    STREAM_OPTIONS: ("stream_options", "include_usage"),
    RESPONSE_FORMAT: ("response_format", "response format", "json_schema", "json_object"),
}
REASK_ERROR_CHARS = 600
SERVER_MESSAGE_CHARS = 500
SCHEMA_NAME_CHARS = 64  # OpenAI's limit on ``json_schema.name``
ACTION_SCHEMA_NAME = "next_action"
_SCHEMA_NAME_INVALID = re.compile(r"[^A-Za-z0-9_-]")

ACTION_INSTRUCTION = "Answer with exactly one of these action names and nothing else: {names}."
SCHEMA_INSTRUCTION = (
    "Answer with JSON only: one JSON object matching this JSON schema, no other text.\n{schema}"
)
REASK = (
    "That answer does not match the required JSON schema ({problem}). "
    "Answer again with JSON only, matching the schema exactly."
)


class StructuredFormat(IntEnum):
    """How strongly a server can be made to answer in JSON, best first. A model starts at
    ``JSON_SCHEMA`` and moves down, for good, each time its server refuses a format."""

    JSON_SCHEMA = 0  # constrained to the schema (OpenAI, vLLM, llama.cpp, recent Ollama)
    JSON_OBJECT = 1  # any JSON, the schema in the prompt (older Ollama)
    PROMPT_ONLY = 2  # nothing but the prompt asks for JSON (LM Studio refuses json_object)


class Refused(LLMUnavailable):
    """The server refused the request as invalid (HTTP 400/422). ``parameter`` names the
    optional parameter its message blames, if any, so the caller can drop it and ask again."""

    def __init__(self, message: str, parameter: str | None) -> None:
        super().__init__(message)
        self.parameter = parameter


class Unreadable(Exception):
    """A successful status with a body that is not the JSON asked for (a proxy's page)."""


# -- errors ------------------------------------------------------------------------------------


def is_transient(exc: BaseException) -> bool:
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in RETRY_CLIENT_CODES or exc.status_code >= 500
    if isinstance(exc, openai.APIError):
        # A connection failure or timeout (APIConnectionError), or an error event in the
        # middle of a stream (a bare APIError): the server failed, not the request.
        return not isinstance(exc, openai.APIResponseValidationError)
    return isinstance(exc, (TimeoutError, Unreadable, json.JSONDecodeError))


def server_delay(exc: BaseException | None) -> float:
    """The wait a 429 or 503 asks for: ``retry-after-ms`` (OpenAI's), else ``Retry-After``
    in seconds or as an HTTP date; 0 when there is none or it cannot be read."""
    if not isinstance(exc, openai.APIStatusError):
        return 0.0
    headers = exc.response.headers
    for name, unit_s in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            delay = float(value) * unit_s
        except ValueError:
            continue
        return delay if math.isfinite(delay) and delay > 0 else 0.0
    when = email.utils.parsedate_tz(headers.get("retry-after") or "")
    if when is None:
        return 0.0
    return max(0.0, email.utils.mktime_tz(when) - time.time())


def server_message(exc: openai.APIStatusError) -> str:
    """The server's own words: ``error.message`` (OpenAI, Ollama, llama.cpp), a top-level
    ``message`` (vLLM), or a plain-text body."""
    body: object = exc.body
    if isinstance(body, dict):
        body = body.get("message") or body.get("detail") or json.dumps(body)
    text = str(body).strip() if body else ""
    return (text or exc.message)[:SERVER_MESSAGE_CHARS]


def blamed_parameter(exc: openai.APIStatusError) -> str | None:
    if exc.status_code not in REFUSAL_CODES:
        return None
    text = server_message(exc).lower()
    for parameter, words in _BLAME.items():
        if any(word in text for word in words):
            return parameter
    return None


# -- requests ----------------------------------------------------------------------------------


def _as_text(message: PromptMessage) -> PromptMessage:
    """A tool call or result as an assistant text turn, for servers without tool roles."""
    if message.role == "tool":
        return PromptMessage(role="assistant", content=f"[{message.name}] {message.content}")
    return PromptMessage(role=message.role, content=message.content)


def messages(
    prompt: Prompt, instruction: str = "", *, tool_messages: bool = True
) -> list[ChatCompletionMessageParam]:
    """The prompt as chat messages; ``instruction`` is appended to the system prompt.
    ``tool_messages`` false: tool calls and results go as text (``[MemorySearch] …``)."""
    system = "\n\n".join(part for part in (prompt.system, instruction) if part)
    result: list[ChatCompletionMessageParam] = []
    if system:
        result.append(ChatCompletionSystemMessageParam(role="system", content=system))
    for given in prompt.messages:
        message = given if tool_messages or given.plain else _as_text(given)
        if message.role == "user":
            result.append(ChatCompletionUserMessageParam(role="user", content=message.content))
        elif message.role == "tool":
            result.append(
                ChatCompletionToolMessageParam(
                    role="tool", tool_call_id=message.tool_call_id or "", content=message.content
                )
            )
        elif message.tool_calls:
            result.append(_tool_calls_message(message))
        else:
            result.append(
                ChatCompletionAssistantMessageParam(role="assistant", content=message.content)
            )
    return result


def _tool_calls_message(message: PromptMessage) -> ChatCompletionAssistantMessageParam:
    """An assistant turn that called actions: ``tool_calls`` with JSON arguments and
    no text (the text form of the calls is for providers without tools)."""
    calls: list[ChatCompletionMessageToolCallParam] = [
        {
            "id": call.id,
            "type": "function",
            "function": {
                "name": call.name,
                "arguments": json.dumps(call.arguments, ensure_ascii=False),
            },
        }
        for call in message.tool_calls
    ]
    return ChatCompletionAssistantMessageParam(role="assistant", content=None, tool_calls=calls)


def action_format(choices: Sequence[str]) -> dict[str, Any]:
    """``response_format`` for the next action: an object whose ``action`` is one of the
    names (an object, not a bare string: servers constrain objects far more reliably)."""
    schema = {
        "type": "object",
        "properties": {"action": {"type": "string", "enum": list(choices)}},
        "required": ["action"],
    }
    return {"type": "json_schema", "json_schema": {"name": ACTION_SCHEMA_NAME, "schema": schema}}


def schema_format(schema: type[BaseModel], level: StructuredFormat) -> dict[str, Any] | None:
    """``response_format`` for ``schema`` at ``level``; None: send none. ``strict`` stays off:
    OpenAI's strict mode rejects optional fields and defaults, which our schemas use."""
    if level is StructuredFormat.JSON_SCHEMA:
        name = _SCHEMA_NAME_INVALID.sub("_", schema.__name__)[:SCHEMA_NAME_CHARS]
        return {
            "type": "json_schema",
            "json_schema": {"name": name, "schema": schema.model_json_schema(), "strict": False},
        }
    if level is StructuredFormat.JSON_OBJECT:
        return {"type": "json_object"}
    return None


def schema_instruction(schema: type[BaseModel]) -> str:
    return SCHEMA_INSTRUCTION.format(schema=json.dumps(schema.model_json_schema()))


def problem(exc: ValidationError) -> str:
    parts = [
        f"{'.'.join(map(str, error['loc'])) or 'answer'}: {error['msg']}"
        for error in exc.errors(include_input=False)
    ]
    return "; ".join(parts)[:REASK_ERROR_CHARS]


# -- answers -----------------------------------------------------------------------------------


def checked_completion(response: object) -> ChatCompletion:
    # With a non-JSON content type the SDK returns the body as a string instead of failing.
    if not isinstance(response, ChatCompletion):
        raise Unreadable(f"expected a chat completion, got {str(response)[:80]!r}")
    return response


def checked_embeddings(response: object) -> CreateEmbeddingResponse:
    if not isinstance(response, CreateEmbeddingResponse) or not isinstance(
        getattr(response, "data", None), list
    ):
        raise Unreadable(f"expected embeddings, got {str(response)[:80]!r}")
    return response


def answer(completion: ChatCompletion) -> tuple[str, str]:
    """The first choice's text, and why there is none when it is empty."""
    choices = getattr(completion, "choices", None) or []
    if not choices:
        return "", "no choices"
    message = getattr(choices[0], "message", None)
    text = getattr(message, "content", None) or ""
    refusal = getattr(message, "refusal", None)
    if refusal:
        return text, f"refused: {refusal}"
    return text, f"finish reason {getattr(choices[0], 'finish_reason', None)}"


def action_name(text: str) -> str:
    """The name in ``{"action": ...}``; a server that ignored the format answers in plain
    text, which is returned stripped (callers validate the name either way)."""
    try:
        value = json.loads(text)
    except ValueError:
        return text.strip()
    if isinstance(value, dict) and isinstance(value.get("action"), str):
        return str(value["action"]).strip()
    return text.strip()


def unit(values: object, dim: int, model: str) -> list[float]:
    """A unit-length copy of one embedding (servers differ on normalising), checked against
    the dimension the vector store was made for."""
    if not isinstance(values, list) or not all(isinstance(v, (int, float)) for v in values):
        raise LLMOutputError(f"{model} returned an embedding that is not a list of numbers")
    if len(values) != dim:
        raise LLMOutputError(
            f"{model} returns {len(values)}-dimensional embeddings but MEMORIA_EMBEDDING_DIM is "
            f"{dim}: set MEMORIA_EMBEDDING_DIM={len(values)}"
        )
    norm = math.sqrt(math.fsum(value * value for value in values))
    if norm == 0.0 or not math.isfinite(norm):
        raise LLMOutputError(f"{model} returned an embedding that cannot be normalised")
    return [value / norm for value in values]


# -- token usage -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tokens:
    input: int
    output: int


def tokens(counts: object) -> Tokens | None:
    """Counts from a ``usage`` object (chat: prompt and completion tokens; embeddings: prompt
    tokens only); None when the server sent none."""
    prompt = getattr(counts, "prompt_tokens", None)
    completion = getattr(counts, "completion_tokens", None)
    if not isinstance(prompt, int) and not isinstance(completion, int):
        return None
    return Tokens(
        prompt if isinstance(prompt, int) else 0,
        completion if isinstance(completion, int) else 0,
    )


class TokenTally:
    """The tokens of one span's responses, summed onto the span (re-asks add up) and
    reported, one response at a time, to whoever collects usage."""

    def __init__(self, span: Span, model: str) -> None:
        self.span = span
        self._model = model
        self._input = 0
        self._output = 0

    def add(self, counts: Tokens | None) -> None:
        if counts is None:
            return
        self._input += counts.input
        self._output += counts.output
        self.span.set_attribute("gen_ai.usage.input_tokens", self._input)
        self.span.set_attribute("gen_ai.usage.output_tokens", self._output)
        self.span.set_attribute("gen_ai.usage.total_tokens", self._input + self._output)
        usage.report(usage.Usage(self._model, counts.input, counts.output))

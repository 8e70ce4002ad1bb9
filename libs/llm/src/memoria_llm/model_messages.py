"""The port's prompts as pydantic-ai messages, whose models replay them in each API's native
form: tool calls and results as Gemini function call/response parts (ADR 11), text turns
as text. Consecutive turns of one side share a message, as the APIs want them."""

from __future__ import annotations

import json
from collections.abc import Sequence

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    ModelResponsePart,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.output import OutputObjectDefinition

from memoria_llm.port import Prompt, PromptMessage

ACTION_SCHEMA_NAME = "next_action"


def model_messages(
    prompt: Prompt, instruction: str = "", tool_roles: bool = True
) -> list[ModelMessage]:
    """``prompt`` as pydantic-ai messages, ``instruction`` after its system prompt; without
    ``tool_roles``, tool calls and results as text (:func:`as_text`)."""
    result: list[ModelMessage] = []
    if system := "\n\n".join(part for part in (prompt.system, instruction) if part):
        result.append(ModelRequest(parts=[SystemPromptPart(content=system)]))
    for message in prompt.messages if tool_roles else map(as_text, prompt.messages):
        if message.role == "assistant":
            answer: list[ModelResponsePart] = [
                ToolCallPart(tool_name=call.name, args=call.arguments, tool_call_id=call.id)
                for call in message.tool_calls
            ] or [TextPart(content=message.content)]
            if result and isinstance(result[-1], ModelResponse):
                result[-1] = ModelResponse(parts=[*result[-1].parts, *answer])
            else:
                result.append(ModelResponse(parts=answer))
            continue
        asked: ModelRequestPart = UserPromptPart(content=message.content)
        if message.role == "tool":
            asked = ToolReturnPart(
                tool_name=message.name or "action",
                content=message.content,
                tool_call_id=message.tool_call_id or "",
            )
        if result and isinstance(result[-1], ModelRequest):
            result[-1] = ModelRequest(parts=[*result[-1].parts, asked])
        else:
            result.append(ModelRequest(parts=[asked]))
    return result


def as_text(message: PromptMessage) -> PromptMessage:
    """A tool call or result as assistant text (``[MemorySearch] …``), for servers whose chat
    template has no tool roles."""
    if message.plain:
        return message
    text = f"[{message.name}] {message.content}" if message.role == "tool" else message.content
    return PromptMessage(role="assistant", content=text)


def action_output(choices: Sequence[str]) -> ModelRequestParameters:
    """The next action in the API's own structured-output mode: an object whose ``action`` is
    one of the names (an object, not a bare string: structured output constrains objects)."""
    schema: dict[str, object] = {
        "type": "object",
        "properties": {"action": {"type": "string", "enum": list(choices)}},
        "required": ["action"],
    }
    return ModelRequestParameters(
        output_mode="native",
        output_object=OutputObjectDefinition(
            json_schema=schema, name=ACTION_SCHEMA_NAME, strict=False
        ),
        allow_text_output=False,
    )


def action_name(response: ModelResponse) -> str:
    """The name in ``{"action": ...}``; a model that ignored the format answers in plain
    text, which is returned stripped (callers validate the name either way)."""
    text = response.text or ""
    try:
        value = json.loads(text)
    except ValueError:
        return text.strip()
    if isinstance(value, dict) and isinstance(value.get("action"), str):
        return str(value["action"]).strip()
    return text.strip()

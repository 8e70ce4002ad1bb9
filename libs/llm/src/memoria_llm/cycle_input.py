"""What models that answer by rules (the offline planner, the scripted model) read instead of
the prompt's text: the cycle the caller put in the request as ``input_json``."""

from __future__ import annotations

from pydantic import ValidationError

from memoria_contracts.events import CycleContext
from memoria_llm.port import LLMOutputError, LLMRequest


def cycle_input(request: LLMRequest, reader: str) -> CycleContext | None:
    """The request's cycle, or None when it carries no input; other input is an
    :class:`LLMOutputError` naming ``reader`` (who expected a cycle)."""
    if request.input_json is None:
        return None
    try:
        return CycleContext.model_validate_json(request.input_json)
    except ValidationError as exc:
        raise LLMOutputError(f"{reader} reads a cycle, not this input: {exc}") from exc

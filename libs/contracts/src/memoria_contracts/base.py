"""The bases every event, payload and reply model shares."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict


class ContractModel(BaseModel):
    model_config = ConfigDict(
        frozen=True,
        extra="ignore",  # newer producers may add fields; older consumers keep working
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )


class SuccessReply(ContractModel):
    """A request's answer. Each reply narrows ``type`` to its own name (the fields keep this
    order: ``type``, ``success``, then the reply's own)."""

    type: str
    success: Literal[True] = True


class FailureReply(ContractModel):
    """A request refused or failed: each kind narrows ``type`` to its name and ``code`` to its
    codes; ``error_message`` says why in words."""

    type: str
    success: Literal[False] = False
    code: str
    error_message: str

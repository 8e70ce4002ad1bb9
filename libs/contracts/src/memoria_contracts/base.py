"""The base every event and payload model shares."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class ContractModel(BaseModel):
    model_config = ConfigDict(
        frozen=True,
        extra="ignore",  # newer producers may add fields; older consumers keep working
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )

"""The OpenAPI document says every status a route answers, including those that come from
outside the route's own code: the body limit's 413 (body_limit.py) on every route that takes
a body."""

from __future__ import annotations

from typing import Any, Final

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

_ERROR_BODY: Final = {"$ref": "#/components/schemas/ErrorBody"}
_OPENAI_ERROR: Final = {"$ref": "#/components/schemas/ErrorResponse"}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _too_large(path: str) -> dict[str, Any]:
    return _json(
        _OPENAI_ERROR if path.startswith("/v1/") else _ERROR_BODY,
        "The body is larger than this route takes (MEMORIA_MAX_BODY_BYTES, or "
        "MEMORIA_MAX_BULK_BODY_BYTES on the bulk routes); nothing was read or done.",
    )


def install(app: FastAPI) -> None:
    """Replace ``app.openapi`` with one that completes the generated document."""

    def document() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title, version=app.version, routes=app.routes, description=app.description
            )
            _complete(schema)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = document  # type: ignore[method-assign]


def _complete(schema: dict[str, Any]) -> None:
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    components.setdefault(
        "ErrorBody",
        {
            "title": "ErrorBody",
            "type": "object",
            "properties": {"detail": {"title": "Detail", "type": "string"}},
            "required": ["detail"],
        },
    )
    for path, operations in schema.get("paths", {}).items():
        for operation in operations.values():
            if "requestBody" in operation:
                operation["responses"].setdefault("413", _too_large(path))

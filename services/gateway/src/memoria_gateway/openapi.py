"""The OpenAPI document says every status a route answers, including those that come from
outside the route's own code:

* the body limit's 413 (body_limit.py), on every route that takes a body;
* the token check's 401 and the request limit's 429, on every route that needs a token;
* under /v1, OpenAI's error object for all of them, and 400 where FastAPI would list a 422
  (the OpenAI-compatible routes answer a refused request 400, as OpenAI does).

schemathesis checks the result against the live services (tests/abuse/test_schema.py).
"""

from __future__ import annotations

from typing import Any, Final

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

_ERROR_BODY: Final = {"$ref": "#/components/schemas/ErrorBody"}
_OPENAI_ERROR: Final = {"$ref": "#/components/schemas/ErrorResponse"}
OPENAI_PREFIX: Final = "/v1/"
NO_TOKEN_PATHS: Final = frozenset({"/api/token", "/api/limits"})


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def install(app: FastAPI) -> None:
    """Replace ``app.openapi`` with one that completes the generated document."""

    def document() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title, version=app.version, routes=app.routes, description=app.description
            )
            complete(schema)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = document  # type: ignore[method-assign]


def complete(schema: dict[str, Any]) -> None:
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
        openai = path.startswith(OPENAI_PREFIX)
        error = _OPENAI_ERROR if openai else _ERROR_BODY
        for operation in operations.values():
            responses: dict[str, Any] = operation["responses"]
            if "requestBody" in operation:
                responses.setdefault(
                    "413",
                    _json(
                        error,
                        "The body is larger than this route takes (MEMORIA_MAX_BODY_BYTES, or "
                        "MEMORIA_MAX_BULK_BODY_BYTES on the bulk routes); nothing was read.",
                    ),
                )
            if openai and responses.pop("422", None) is not None:
                responses.setdefault("400", _json(error, "The request is not valid."))
            if openai or (path.startswith("/api/") and path not in NO_TOKEN_PATHS):
                responses.setdefault(
                    "401", _json(error, "No bearer token, or a forged or expired one.")
                )
                responses.setdefault(
                    "429",
                    _json(error, "Over the user's request limit (`Retry-After` says when)."),
                )

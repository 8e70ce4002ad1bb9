"""422 answers that can always be sent.

FastAPI's own handler echoes each refused value (``input``) into the JSON answer, and
Starlette renders it as strict UTF-8 JSON: a lone surrogate (``"\\ud800"`` is valid JSON) or
a NaN (Python's JSON parser reads ``NaN``) in a refused field turned the 422 into a 500.
Here the answer keeps FastAPI's shape, with such values made printable first.
"""

from __future__ import annotations

import math
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.status import HTTP_422_UNPROCESSABLE_CONTENT


def _printable(value: Any) -> Any:
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode("utf-8")  # a lone surrogate -> "?"
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {_printable(k): _printable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_printable(item) for item in value]
    return value


def install(app: FastAPI) -> None:
    """Answer every 422 of ``app`` with :func:`validation_error`."""

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        detail = _printable(jsonable_encoder(exc.errors()))
        return JSONResponse({"detail": detail}, status_code=HTTP_422_UNPROCESSABLE_CONTENT)

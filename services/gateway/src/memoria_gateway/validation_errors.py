"""422 answers in the user's words, that echo at most an excerpt of what was sent, and that
can always be sent.

FastAPI's own handler echoes each refused value (``input``) whole, in the validator's words;
a 200 MB string came back as a 200 MB answer, and a lone surrogate or a NaN (valid in the
JSON Python reads) turned the 422 into a 500. Here the answer keeps FastAPI's shape
(``{"detail": [{"loc", "msg", "type"}]}``) with each ``msg`` a sentence for people
(error_words.py) and ``input`` only when it is a short scalar.

A body that is not UTF-8 is a 422 like any other unreadable JSON (FastAPI answers it 400).
A 405 names in ``Allow`` every method of the path (Starlette names those of one route).
"""

from __future__ import annotations

from typing import Final

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException
from starlette.routing import Match
from starlette.status import (
    HTTP_400_BAD_REQUEST,
    HTTP_405_METHOD_NOT_ALLOWED,
    HTTP_422_UNPROCESSABLE_CONTENT,
)

from memoria_gateway.error_words import in_user_words

UNREADABLE_BODY: Final = "There was an error parsing the body"
"""FastAPI's detail for a body its JSON reading failed on in a way other than a syntax error
(bytes that are not UTF-8)."""
NOT_TEXT: Final = "The body is not valid JSON (it is not UTF-8 text)."


def unprocessable(errors: list[dict[str, object]]) -> JSONResponse:
    return JSONResponse({"detail": errors}, status_code=HTTP_422_UNPROCESSABLE_CONTENT)


def install(app: FastAPI) -> None:
    """Answer every 422 of ``app`` in the user's words, and an unreadable body with a 422."""

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        return unprocessable(in_user_words(exc.errors()))

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> Response:
        if exc.status_code == HTTP_400_BAD_REQUEST and exc.detail == UNREADABLE_BODY:
            return unprocessable([{"loc": ["body"], "msg": NOT_TEXT, "type": "json_invalid"}])
        if exc.status_code == HTTP_405_METHOD_NOT_ALLOWED:
            allowed = ", ".join(sorted(methods_of(request)))
            return JSONResponse(
                {"detail": f"Method Not Allowed: this path takes {allowed}"},
                status_code=HTTP_405_METHOD_NOT_ALLOWED,
                headers={"Allow": allowed},
            )
        return await http_exception_handler(request, exc)


def methods_of(request: Request) -> set[str]:
    """Every method some route of the request's path answers."""
    methods: set[str] = set()
    for route in request.app.router.routes:
        match, _ = route.matches(request.scope)  # PARTIAL: the path, not the method
        if match is not Match.NONE:
            methods |= set(getattr(route, "methods", None) or ())
    return methods

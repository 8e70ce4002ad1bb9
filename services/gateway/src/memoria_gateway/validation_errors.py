"""422 answers in the user's words, that echo at most an excerpt of what was sent, and that
can always be sent.

FastAPI's own handler echoes each refused value (``input``) whole, in the validator's words;
a 200 MB string came back as a 200 MB answer, and a lone surrogate or a NaN (valid in the
JSON Python reads) turned the 422 into a 500. Here the answer keeps FastAPI's shape
(``{"detail": [{"loc", "msg", "type"}]}``) with each ``msg`` a sentence for people
(error_words.py) and ``input`` only when it is a short scalar.

A body that is not UTF-8 is a 422 like any other unreadable JSON (FastAPI answers it 400).
"""

from __future__ import annotations

from typing import Final

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException
from starlette.status import HTTP_400_BAD_REQUEST, HTTP_422_UNPROCESSABLE_CONTENT

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
        return await http_exception_handler(request, exc)

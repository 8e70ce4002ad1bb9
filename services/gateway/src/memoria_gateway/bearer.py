"""Who calls the HTTP API: the user of the ``Authorization: Bearer`` token, or a 401.

One dependency for every API router, so each answers a missing or bad token the same way.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Final

from fastapi import Depends, HTTPException, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from memoria_runtime.auth import AuthError, TokenIssuer

TOKEN_REQUIRED: Final = "a bearer token is required (Authorization: Bearer <token>)"
_CHALLENGE: Final = {"WWW-Authenticate": "Bearer"}

_scheme = HTTPBearer(
    auto_error=False,  # our own 401 (FastAPI's default would be a 403 without a token)
    description="A session token from POST /api/token or your identity provider.",
)

UserDependency = Callable[[HTTPAuthorizationCredentials | None], Awaitable[str]]


def bearer_user(tokens: Callable[[], TokenIssuer]) -> UserDependency:
    """A dependency that returns the token's user id; ``tokens`` is called per request
    because the issuer exists only once the gateway has started."""

    async def current_user(
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_scheme)],
    ) -> str:
        if credentials is None:
            raise HTTPException(
                status.HTTP_401_UNAUTHORIZED, detail=TOKEN_REQUIRED, headers=_CHALLENGE
            )
        try:
            return tokens().verify(credentials.credentials)
        except AuthError as exc:
            raise HTTPException(
                status.HTTP_401_UNAUTHORIZED, detail=str(exc), headers=_CHALLENGE
            ) from exc

    return current_user

"""Session tokens: HS256 JWTs signed with MEMORIA_AUTH_SECRET (PyJWT). The gateway verifies
them; `memoria token` issues them where the dev login is off."""

from __future__ import annotations

import time

import jwt
from pydantic import TypeAdapter, ValidationError

from memoria_contracts.events import UserId
from memoria_runtime.local_secrets import load_or_create_secret as load_or_create
from memoria_runtime.settings import Settings

_ALGORITHM = "HS256"
_ISSUER = "memoria"
_SECRET_FILE = "auth_secret"
_USER_IDS = TypeAdapter(UserId)


class AuthError(Exception):
    """Missing, malformed, forged or expired token."""


def load_or_create_secret(settings: Settings) -> str:
    """The configured secret, else one generated once and kept (0600) in the data directory,
    so tokens survive restarts and every local gateway replica accepts them."""
    return load_or_create(settings, settings.auth_secret, _SECRET_FILE)


class TokenIssuer:
    def __init__(self, secret: str, ttl_seconds: int) -> None:
        self._secret = secret
        self._ttl = ttl_seconds

    def issue(self, user_id: UserId) -> str:
        now = int(time.time())
        claims = {"sub": user_id, "iss": _ISSUER, "iat": now, "exp": now + self._ttl}
        return jwt.encode(claims, self._secret, algorithm=_ALGORITHM)

    def verify(self, token: str | None) -> str:
        """Return the user id the token was issued to."""
        if not token:
            raise AuthError("a token is required (?token=...)")
        try:
            claims = jwt.decode(
                token,
                self._secret,
                algorithms=[_ALGORITHM],
                issuer=_ISSUER,
                options={"require": ["sub", "exp", "iss"]},
            )
        except jwt.ExpiredSignatureError as exc:
            raise AuthError("the token has expired") from exc
        except jwt.PyJWTError as exc:
            raise AuthError("the token is not valid") from exc
        # Signed by the secret's holder, but the services route by this id (envelopes, keys,
        # partitions): one they would refuse (e.g. "auth0|123") is a refused token, not a 500.
        try:
            return _USER_IDS.validate_python(claims["sub"])
        except ValidationError as exc:
            raise AuthError(
                "the token's subject is not a valid user id ([A-Za-z0-9._@-], 1-64 characters)"
            ) from exc

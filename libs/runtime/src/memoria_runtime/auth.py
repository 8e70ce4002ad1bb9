"""Session tokens: HS256 JWTs signed with MEMORIA_AUTH_SECRET (PyJWT). The gateway verifies
them; `memoria token` issues them where the dev login is off."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import jwt
from pydantic import TypeAdapter, ValidationError

from memoria_contracts.events import UserId
from memoria_runtime.local_secrets import load_or_create_secret as load_or_create
from memoria_runtime.settings import AuthSettings

_ALGORITHM = "HS256"
_ISSUER = "memoria"
CLOCK_SKEW_S = 60
"""How far another host's clock may run ahead of ours: a token issued up to this far in the
future is taken."""
SECRET_FILE = "auth_secret"
_USER_IDS = TypeAdapter(UserId)


class AuthError(Exception):
    """Missing, malformed, forged or expired token."""


def load_or_create_secret(settings: AuthSettings) -> str:
    """The configured secret, else one generated once and kept (0600) in the data directory,
    so tokens survive restarts and every local gateway replica accepts them."""
    return load_or_create(settings, settings.auth_secret, SECRET_FILE)


class TokenIssuer:
    """Signs tokens with ``secret``; also accepts, during a rotation, those signed with the
    secrets in ``accepted`` (the next one, then the previous one: ADR 0008)."""

    def __init__(self, secret: str, ttl_seconds: int, accepted: Sequence[str] = ()) -> None:
        self._secret = secret
        self._ttl = ttl_seconds
        self._keys = [secret, *(key for key in accepted if key)]

    @classmethod
    def from_settings(cls, settings: AuthSettings, ttl_seconds: int | None = None) -> TokenIssuer:
        """MEMORIA_AUTH_SECRET (or the one kept in the data directory) and the rotation's."""
        accepted = [
            secret.get_secret_value()
            for secret in (settings.auth_secret_next, settings.auth_secret_previous)
            if secret is not None
        ]
        return cls(
            load_or_create_secret(settings), ttl_seconds or settings.token_ttl_seconds, accepted
        )

    def issue(self, user_id: UserId, name: str | None = None) -> str:
        """``name``: how the person is shown (a ``name`` claim), when it is not the id."""
        now = int(time.time())
        claims: dict[str, Any] = {
            "sub": user_id,
            "iss": _ISSUER,
            "iat": now,
            "exp": now + self._ttl,
        }
        if name is not None:
            claims["name"] = name
        return jwt.encode(claims, self._secret, algorithm=_ALGORITHM)

    def verify(self, token: str | None) -> str:
        """Return the user id the token was issued to. A token lives at most this issuer's
        lifetime from its issue time (``iat``), whatever its ``exp`` says: one signed for a
        year, or for ever, is refused when the lifetime is over."""
        if not token:
            raise AuthError("a token is required (?token=...)")
        claims = self._claims(token)
        issued = claims["iat"]
        if not isinstance(issued, int | float) or isinstance(issued, bool):
            raise AuthError("the token is not valid")
        now = time.time()
        if issued > now + CLOCK_SKEW_S:
            raise AuthError("the token is not valid (issued in the future)")
        if now >= issued + self._ttl:
            raise AuthError("the token has expired")
        # Signed by a secret's holder, but the services route by this id (envelopes, keys,
        # partitions): one they would refuse (e.g. "auth0|123") is a refused token, not a 500.
        try:
            return _USER_IDS.validate_python(claims["sub"])
        except ValidationError as exc:
            raise AuthError(
                "the token's subject is not a valid user id ([A-Za-z0-9._@-], 1-64 characters)"
            ) from exc

    def _claims(self, token: str) -> dict[str, Any]:
        """The claims of a token signed with one of the keys. A signature that does not match
        a key is tried with the next one; anything else wrong with the token is final."""
        for key in self._keys:
            try:
                claims: dict[str, Any] = jwt.decode(
                    token,
                    key,
                    algorithms=[_ALGORITHM],
                    issuer=_ISSUER,
                    # The issue time is checked below, with the clock skew allowed; PyJWT
                    # would refuse one a second ahead. The expiry gets no such leeway.
                    options={"require": ["sub", "exp", "iss", "iat"], "verify_iat": False},
                )
            except jwt.InvalidSignatureError:
                continue
            except jwt.ExpiredSignatureError as exc:
                raise AuthError("the token has expired") from exc
            except jwt.PyJWTError as exc:
                raise AuthError("the token is not valid") from exc
            return claims
        raise AuthError("the token is not valid")

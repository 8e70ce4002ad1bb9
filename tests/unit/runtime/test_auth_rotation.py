"""Session tokens while MEMORIA_AUTH_SECRET is rotated (ADR 0008): nobody is logged out."""

from __future__ import annotations

import time
from pathlib import Path

import jwt
import pytest
from pydantic import SecretStr

from memoria_runtime.auth import AuthError, TokenIssuer
from memoria_runtime.settings import Settings

OLD = "old-secret-0123456789abcdef0123456789"
NEW = "new-secret-0123456789abcdef0123456789"
OTHER = "someone-elses-secret-0123456789abcdef"


def token(secret: str, user: str = "ana", *, expired: bool = False) -> str:
    now = int(time.time())
    exp = now - 60 if expired else now + 600
    return jwt.encode({"sub": user, "iss": "memoria", "iat": now, "exp": exp}, secret, "HS256")


def test_each_step_accepts_the_tokens_the_others_issue() -> None:
    before = TokenIssuer(OLD, 600)
    step_1 = TokenIssuer(OLD, 600, accepted=[NEW])  # NEXT=new
    step_2 = TokenIssuer(NEW, 600, accepted=[OLD])  # SECRET=new, PREVIOUS=old
    after = TokenIssuer(NEW, 600)
    assert step_1.verify(before.issue("ana")) == "ana"
    assert step_1.verify(step_2.issue("bo")) == "bo"  # a step-2 gateway's login, mid-roll
    assert step_2.verify(before.issue("ana")) == "ana"  # issued before the rotation
    assert after.verify(step_2.issue("bo")) == "bo"
    with pytest.raises(AuthError, match="not valid"):
        after.verify(before.issue("ana"))  # the old secret retired: its tokens are refused


def test_a_token_no_key_signed_or_expired_is_refused_during_a_rotation() -> None:
    rotating = TokenIssuer(NEW, 600, accepted=[OLD])
    with pytest.raises(AuthError, match="not valid"):
        rotating.verify(token(OTHER))
    with pytest.raises(AuthError, match="expired"):
        rotating.verify(token(OLD, expired=True))  # an accepted key does not revive it
    with pytest.raises(AuthError, match="not valid"):
        rotating.verify(token(OTHER, expired=True))  # nor is a forgery called "expired"


def test_tokens_are_signed_with_the_current_secret_only(tmp_path: Path) -> None:
    settings = Settings.load(
        data_dir=tmp_path,
        auth_secret=SecretStr(NEW),
        auth_secret_previous=SecretStr(OLD),
        auth_secret_next=None,
        _env_file=None,
    )
    issued = TokenIssuer.from_settings(settings.auth).issue("ana")
    assert jwt.decode(issued, NEW, algorithms=["HS256"], issuer="memoria")["sub"] == "ana"
    with pytest.raises(jwt.InvalidSignatureError):
        jwt.decode(issued, OLD, algorithms=["HS256"], issuer="memoria")
    assert TokenIssuer.from_settings(settings.auth).verify(token(OLD)) == "ana"

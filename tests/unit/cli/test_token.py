"""`memoria token`: the login path where the dev login is off."""

from __future__ import annotations

import time
from pathlib import Path

import jwt
import pytest
from typer.testing import CliRunner

from memoria_cli.main import app
from memoria_runtime.auth import AuthError, TokenIssuer

SECRET = "s3cret-for-tests-only-0123456789abcdef"


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for name in ("MEMORIA_AUTH_SECRET", "MEMORIA_TOKEN_TTL_SECONDS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MEMORIA_DATA_DIR", str(tmp_path))
    monkeypatch.chdir(tmp_path)  # no stray .env
    return tmp_path


def test_the_token_is_accepted_by_a_gateway_with_the_same_secret(
    env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMORIA_AUTH_SECRET", SECRET)
    result = CliRunner().invoke(app, ["token", "ana", "--ttl", "3600"])
    assert result.exit_code == 0, result.output
    token = result.output.strip()
    assert TokenIssuer(SECRET, 60).verify(token) == "ana"
    with pytest.raises(AuthError):
        TokenIssuer("another-secret-0123456789abcdef0123", 60).verify(token)
    expires = jwt.decode(token, options={"verify_signature": False})["exp"]
    assert 3500 < expires - time.time() <= 3600


def test_without_a_secret_it_signs_with_the_one_memoria_run_keeps(env: Path) -> None:
    token = CliRunner().invoke(app, ["token", "bo"]).output.strip()
    kept = (env / "auth_secret").read_text().strip()
    assert TokenIssuer(kept, 60).verify(token) == "bo"


def test_an_invalid_user_id_is_refused(env: Path) -> None:
    result = CliRunner().invoke(app, ["token", "a:b"])
    assert result.exit_code == 2
    assert "not a valid user id" in result.output

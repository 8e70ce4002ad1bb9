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
    (env / "auth_secret").write_text("kept-by-the-gateway-0123456789abcdef\n")
    token = CliRunner().invoke(app, ["token", "bo"]).output.strip()
    assert TokenIssuer("kept-by-the-gateway-0123456789abcdef", 60).verify(token) == "bo"


def test_it_refuses_to_sign_for_a_data_directory_no_memoria_has_used(env: Path) -> None:
    """The finding: `memoria token Carla` without MEMORIA_DATA_DIR made a new secret under
    the default directory, exited 0 and printed a token the running instance refused."""
    result = CliRunner().invoke(app, ["token", "carla"])
    assert result.exit_code == 2
    assert f"no Memoria has used {env.resolve()}" in result.output
    assert "MEMORIA_DATA_DIR" in result.output and "--create-secret" in result.output
    assert not (env / "auth_secret").exists()


def test_told_to_it_creates_the_secret_for_a_memoria_to_come(env: Path) -> None:
    result = CliRunner().invoke(app, ["token", "carla", "--create-secret"])
    assert result.exit_code == 0, result.output
    kept = (env / "auth_secret").read_text().strip()
    assert (env / "auth_secret").stat().st_mode & 0o077 == 0
    assert TokenIssuer(kept, 60).verify(result.output.strip()) == "carla"


def test_a_lifetime_longer_than_any_gateway_honours_is_refused(
    env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMORIA_AUTH_SECRET", SECRET)
    monkeypatch.setenv("MEMORIA_TOKEN_TTL_SECONDS", "3600")
    result = CliRunner().invoke(app, ["token", "ana", "--ttl", "7200"])
    assert result.exit_code == 2
    assert "longer than MEMORIA_TOKEN_TTL_SECONDS (3600)" in result.output


def test_an_invalid_user_id_is_refused(env: Path) -> None:
    result = CliRunner().invoke(app, ["token", "a:b"])
    assert result.exit_code == 2
    assert "not a valid user id" in result.output

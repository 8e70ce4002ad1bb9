"""Session tokens: what they claim, how long they live from their issue time, how much another
host's clock may run ahead, and the words of each refusal."""

from __future__ import annotations

import stat
import time
from pathlib import Path

import jwt
import pytest

from memoria_runtime.auth import CLOCK_SKEW_S, AuthError, TokenIssuer, load_or_create_secret
from memoria_runtime.settings import AuthSettings

SECRET = "a-test-secret-long-enough-for-hs256"
HOUR_S = 3600


def signed(claims: dict[str, object], secret: str = SECRET) -> str:
    return jwt.encode(claims, secret, algorithm="HS256")


def claims(**changes: object) -> dict[str, object]:
    now = int(time.time())
    every = {"sub": "alice", "iss": "memoria", "iat": now, "exp": now + HOUR_S}
    return {name: value for name, value in {**every, **changes}.items() if value is not None}


def refusal(token: str | None, issuer: TokenIssuer | None = None) -> str:
    with pytest.raises(AuthError) as refused:
        (issuer or TokenIssuer(SECRET, HOUR_S)).verify(token)
    return str(refused.value)


def test_an_issued_token_names_its_user_and_a_shown_name_only_when_given() -> None:
    issuer = TokenIssuer(SECRET, HOUR_S)
    plain = jwt.decode(issuer.issue("alice"), SECRET, algorithms=["HS256"])
    assert set(plain) == {"sub", "iss", "iat", "exp"}
    assert plain["exp"] - plain["iat"] == HOUR_S
    named = jwt.decode(issuer.issue("alice", name="Alice A."), SECRET, algorithms=["HS256"])
    assert named["name"] == "Alice A."


@pytest.mark.parametrize("token", [None, ""])
def test_no_token_says_one_is_required(token: str | None) -> None:
    assert refusal(token) == "a token is required (?token=...)"


@pytest.mark.parametrize("missing", ["sub", "iss", "iat", "exp"])
def test_a_token_without_a_required_claim_is_not_valid(missing: str) -> None:
    assert refusal(signed(claims(**{missing: None}))) == "the token is not valid"


@pytest.mark.parametrize("issued", ["1700000000", True])
def test_an_issue_time_that_is_not_a_number_is_not_valid(issued: object) -> None:
    assert refusal(signed(claims(iat=issued))) == "the token is not valid"


def test_another_issuer_or_secret_is_not_valid() -> None:
    assert refusal(signed(claims(iss="someone-else"))) == "the token is not valid"
    assert refusal(signed(claims(), secret="another-secret-long-enough-for-hs256")) == (
        "the token is not valid"
    )


def test_a_clock_running_a_little_ahead_is_forgiven_but_not_much() -> None:
    now = int(time.time())
    issuer = TokenIssuer(SECRET, HOUR_S)
    ahead = now + CLOCK_SKEW_S // 2
    assert issuer.verify(signed(claims(iat=ahead, exp=ahead + HOUR_S))) == "alice"
    far = now + 2 * CLOCK_SKEW_S
    assert refusal(signed(claims(iat=far, exp=far + HOUR_S))) == (
        "the token is not valid (issued in the future)"
    )
    assert CLOCK_SKEW_S == 60


def test_a_token_lives_the_issuers_lifetime_from_its_issue_time() -> None:
    now = int(time.time())
    issuer = TokenIssuer(SECRET, HOUR_S)
    far_exp = now + 100 * HOUR_S
    assert issuer.verify(signed(claims(iat=now - HOUR_S + 30, exp=far_exp))) == "alice"
    assert refusal(signed(claims(iat=now - HOUR_S, exp=far_exp))) == "the token has expired"


def test_a_passed_expiry_is_said_as_expired() -> None:
    now = int(time.time())
    old = signed(claims(iat=now - 600, exp=now - 1))  # no leeway for the expiry
    assert refusal(old) == "the token has expired"


def test_a_token_of_a_secret_being_rotated_in_is_taken() -> None:
    following = "the-next-secret-long-enough-for-hs256"
    issuer = TokenIssuer(SECRET, HOUR_S, accepted=["", following])
    assert issuer.verify(signed(claims(), secret=following)) == "alice"


def test_the_generated_secret_is_kept_in_the_data_directory_for_its_owner(
    tmp_path: Path,
) -> None:
    settings = AuthSettings(_env_file=None, data_dir=tmp_path)
    secret = load_or_create_secret(settings)
    kept = tmp_path / "auth_secret"
    assert kept.read_text().strip() == secret
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert load_or_create_secret(settings) == secret

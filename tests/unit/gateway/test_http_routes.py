"""The public HTTP routes of the page: the dev login takes the name a person types (any
script, spaces and accents, trimmed and bounded) mapped to a stable user id, ids valid before
still mapping to themselves; /api/limits tells the message limit."""

from __future__ import annotations

from types import SimpleNamespace

import jwt
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from pydantic import TypeAdapter

from memoria_contracts.events import UserId
from memoria_gateway.dev_login import DisplayNameError, clean_name, user_id_for
from memoria_gateway.http_routes import http_router
from memoria_runtime.auth import TokenIssuer
from memoria_runtime.settings import Settings

SECRET = "a-test-secret-long-enough-for-hs256"
USER_IDS = TypeAdapter(UserId)


@pytest.fixture
def client() -> TestClient:
    issuer = TokenIssuer(SECRET, 3600)
    gateway = SimpleNamespace(
        settings=Settings.load(_env_file=None, dev_login=True),
        tokens=lambda: issuer,
        requests=None,
    )
    app = FastAPI()
    app.include_router(http_router(gateway))  # type: ignore[arg-type]
    return TestClient(app, base_url="http://127.0.0.1:8000")  # the dev login answers here


@pytest.mark.parametrize("existing", ["ana", "bob.smith", "x@example.org", "A-1_b"])
def test_an_existing_user_id_is_its_own_id(existing: str) -> None:
    assert user_id_for(clean_name(existing)) == existing


@pytest.mark.parametrize("name", ["João Silva", "Joao Silva", "李雷", "Анна", "محمد", "a" * 64])
def test_any_name_maps_to_a_valid_stable_id(name: str) -> None:
    user_id = user_id_for(clean_name(name))
    assert USER_IDS.validate_python(user_id) == user_id
    assert user_id_for(clean_name(f"  {name}\t")) == user_id  # trimmed: the same person


def test_names_that_differ_only_in_accents_are_different_people() -> None:
    joao, plain = user_id_for("João Silva"), user_id_for("Joao Silva")
    assert joao != plain
    assert joao.startswith("joao-silva.") and plain.startswith("joao-silva.")


def test_composed_and_decomposed_accents_are_the_same_name() -> None:
    assert user_id_for(clean_name("Jo\u00e3o")) == user_id_for(clean_name("Joa\u0303o"))


@pytest.mark.parametrize("bad", ["", "   ", "a" * 65, "ana\u202eevil", "tab\x07bell"])
def test_unusable_names_are_refused(bad: str) -> None:
    with pytest.raises(DisplayNameError):
        clean_name(bad)


def test_the_token_route_takes_a_name_and_keeps_it_in_the_token(client: TestClient) -> None:
    response = client.post("/api/token", json={"name": "  João Silva "})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["name"] == "João Silva"
    assert body["user_id"] == user_id_for("João Silva")
    claims = jwt.decode(body["token"], SECRET, algorithms=["HS256"], issuer="memoria")
    assert claims["sub"] == body["user_id"] and claims["name"] == "João Silva"
    assert TokenIssuer(SECRET, 60).verify(body["token"]) == body["user_id"]


def test_the_token_route_still_takes_a_user_id(client: TestClient) -> None:
    body = client.post("/api/token", json={"user_id": "ana"}).json()
    assert body["user_id"] == "ana" and body.get("name") is None
    assert client.post("/api/token", json={"user_id": "a:b"}).status_code == 422


@pytest.mark.parametrize(
    "request_body",
    [{}, {"name": "ana", "user_id": "ana"}, {"name": " "}, {"name": "x\u202ey"}],
)
def test_the_token_route_refuses_a_bad_request(client: TestClient, request_body: object) -> None:
    response = client.post("/api/token", json=request_body)
    assert response.status_code == 422


def test_the_limits_route_tells_the_message_limit() -> None:
    gateway = SimpleNamespace(
        settings=Settings.load(_env_file=None, max_message_chars=1234, max_frame_bytes=5678),
        tokens=lambda: TokenIssuer(SECRET, 60),
        requests=None,
    )
    app = FastAPI()
    app.include_router(http_router(gateway))  # type: ignore[arg-type]
    body = TestClient(app).get("/api/limits").json()
    assert body == {"max_message_chars": 1234, "max_frame_bytes": 5678}

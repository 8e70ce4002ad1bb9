"""Defaults that are safe where a gateway is reachable by others: the dev login answers only
requests addressed to this machine and a gateway listening beyond it does not start with it
on unless told; tokens live at most the configured lifetime whatever their ``exp`` says; the
WebSocket takes pages of the gateway's own origin (and those configured) only; the page
comes with a Content-Security-Policy, ``X-Frame-Options: DENY`` and ``nosniff``. The app is
built but not started (no broker)."""

from __future__ import annotations

import re
import time
from pathlib import Path
from types import SimpleNamespace

import jwt
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from memoria_gateway.app import create_app
from memoria_gateway.dev_login import answers_on, exposed_dev_login, host_name
from memoria_gateway.http_routes import http_router
from memoria_gateway.origins import origin_allowed
from memoria_gateway.security_headers import PAGE_POLICY
from memoria_runtime.auth import AuthError, TokenIssuer
from memoria_runtime.settings import GatewayProcessSettings, Settings

SECRET = "a-test-secret-long-enough-for-hs256"
WEEK_S = 7 * 24 * 3600


def login_client(base_url: str, **settings: object) -> TestClient:
    issuer = TokenIssuer(SECRET, 3600)
    gateway = SimpleNamespace(
        settings=Settings.load(_env_file=None, dev_login=True, **settings),
        tokens=lambda: issuer,
        requests=None,
    )
    app = FastAPI()
    app.include_router(http_router(gateway))  # type: ignore[arg-type]
    return TestClient(app, base_url=base_url)


# -- the dev login ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "base_url",
    ["http://127.0.0.1:8000", "http://localhost:8000", "http://[::1]:8000", "http://127.0.0.2"],
)
def test_the_dev_login_answers_requests_addressed_to_this_machine(base_url: str) -> None:
    response = login_client(base_url).post("/api/token", json={"user_id": "alice"})
    assert response.status_code == 200, response.text


@pytest.mark.parametrize(
    "base_url", ["http://attacker.example", "http://192.168.1.20:8000", "http://memoria.lan"]
)
def test_the_dev_login_refuses_a_request_addressed_to_another_name(base_url: str) -> None:
    """The finding: ``Host: attacker.example`` got alice's token (DNS rebinding: a page on
    that site whose name now points at 127.0.0.1 would log in as anyone)."""
    response = login_client(base_url).post("/api/token", json={"user_id": "alice"})
    assert response.status_code == 403
    assert "only requests addressed to this machine" in response.json()["detail"]
    assert "token" not in response.json()


def test_the_dev_login_answers_the_hosts_it_is_told_to() -> None:
    client = login_client("http://memoria.lan:8000", dev_login_hosts=["memoria.lan"])
    assert client.post("/api/token", json={"user_id": "alice"}).status_code == 200
    anyone = login_client("http://attacker.example", dev_login_hosts=["*"])
    assert anyone.post("/api/token", json={"user_id": "alice"}).status_code == 200


@pytest.mark.parametrize(
    ("header", "name"),
    [("127.0.0.1:8000", "127.0.0.1"), ("[::1]:8000", "::1"), ("LocalHost", "localhost")],
)
def test_host_names_lose_their_port(header: str, name: str) -> None:
    assert host_name(header) == name


def test_no_host_header_is_no_loopback() -> None:
    assert not answers_on(None, [])
    assert answers_on("chat.localhost:8000", [])


@pytest.mark.parametrize("bind", ["0.0.0.0", "::", "192.168.1.20"])
def test_a_gateway_listening_beyond_this_machine_does_not_start_with_the_dev_login(
    bind: str,
) -> None:
    problem = exposed_dev_login(True, bind, [])
    assert problem is not None
    assert "MEMORIA_DEV_LOGIN=false" in problem and "MEMORIA_DEV_LOGIN_HOSTS" in problem


@pytest.mark.parametrize(
    ("dev_login", "bind", "hosts"),
    [(True, "127.0.0.1", []), (True, "localhost", []), (False, "0.0.0.0", []), (True, "::", ["*"])],
)
def test_a_gateway_starts_where_the_dev_login_is_off_local_or_allowed(
    dev_login: bool, bind: str, hosts: list[str]
) -> None:
    assert exposed_dev_login(dev_login, bind, hosts) is None


def test_settings_default_to_a_loopback_bind() -> None:
    settings = Settings.load(_env_file=None)
    assert exposed_dev_login(settings.auth.dev_login, settings.gateway.gateway_host, []) is None


# -- token lifetime --------------------------------------------------------------------------


def signed(claims: dict[str, object]) -> str:
    return jwt.encode({"sub": "alice", "iss": "memoria", **claims}, SECRET, algorithm="HS256")


def test_a_token_signed_for_ever_lives_the_configured_lifetime_only() -> None:
    """The finding: a validly signed token with ``exp`` in the year 9999 was accepted."""
    issuer = TokenIssuer(SECRET, WEEK_S)
    now = int(time.time())
    forever = int(time.mktime((9999, 1, 1, 0, 0, 0, 0, 0, 0)))
    assert issuer.verify(signed({"iat": now, "exp": forever})) == "alice"
    with pytest.raises(AuthError, match="expired"):
        issuer.verify(signed({"iat": now - WEEK_S - 1, "exp": forever}))


def test_a_token_without_an_issue_time_or_from_the_future_is_refused() -> None:
    issuer = TokenIssuer(SECRET, WEEK_S)
    now = int(time.time())
    with pytest.raises(AuthError):
        issuer.verify(signed({"exp": now + 60}))
    with pytest.raises(AuthError):
        issuer.verify(signed({"iat": now + 3600, "exp": now + 7200}))


def test_a_token_the_gateway_issued_is_taken_until_its_lifetime_ends() -> None:
    issuer = TokenIssuer(SECRET, 3600)
    assert issuer.verify(issuer.issue("alice")) == "alice"


# -- the WebSocket's origin ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("origin", "host", "allowed", "ok"),
    [
        (None, "127.0.0.1:8000", [], True),  # the CLI, the Python client: no Origin
        ("http://127.0.0.1:8000", "127.0.0.1:8000", [], True),
        ("HTTP://LOCALHOST:8000", "localhost:8000", [], True),
        ("https://chat.example.com", "chat.example.com", [], True),  # default port either way
        ("http://evil.example", "127.0.0.1:8000", [], False),
        ("http://127.0.0.1:9999", "127.0.0.1:8000", [], False),  # another port, another site
        ("null", "127.0.0.1:8000", [], False),  # a sandboxed frame, a file:// page
        ("https://chat.example.com", "10.0.0.5:8000", ["https://chat.example.com"], True),
        ("https://chat.example.com:443", "10.0.0.5:8000", ["https://chat.example.com"], True),
        ("http://evil.example", "127.0.0.1:8000", ["*"], True),
    ],
)
def test_only_the_gateways_own_pages_and_the_configured_ones_open_a_socket(
    origin: str | None, host: str, allowed: list[str], ok: bool
) -> None:
    assert origin_allowed(origin, host, allowed) is ok


@pytest.fixture
def app_client(tmp_path: Path) -> TestClient:
    settings = Settings.load(_env_file=None, data_dir=tmp_path)
    return TestClient(
        create_app(settings.process(GatewayProcessSettings)), base_url="http://127.0.0.1:8000"
    )


def test_a_socket_from_a_foreign_page_is_refused_at_the_handshake(app_client: TestClient) -> None:
    with (
        pytest.raises(WebSocketDisconnect) as refused,
        app_client.websocket_connect("/ws", headers={"origin": "http://evil.example"}),
    ):
        pass
    assert refused.value.code == 1008


# -- the page --------------------------------------------------------------------------------


def test_the_page_comes_with_its_policy_and_may_not_be_framed(app_client: TestClient) -> None:
    page = app_client.get("/")
    assert page.status_code == 200
    assert page.headers["content-security-policy"] == PAGE_POLICY
    assert "script-src 'self'" in PAGE_POLICY and "frame-ancestors 'none'" in PAGE_POLICY
    assert "unsafe-inline" not in PAGE_POLICY
    assert page.headers["x-frame-options"] == "DENY"
    assert page.headers["x-content-type-options"] == "nosniff"


@pytest.mark.parametrize("path", ["/static/js/app.js", "/static/style.css", "/livez", "/docs"])
def test_every_answer_says_nosniff_and_deny(app_client: TestClient, path: str) -> None:
    response = app_client.get(path)
    assert response.status_code == 200, path
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["x-frame-options"] == "DENY"


def test_the_page_has_no_inline_script_or_style() -> None:
    from memoria_gateway.http_routes import STATIC

    html = (STATIC / "index.html").read_text()
    assert "<script>" not in html and "<style" not in html and 'style="' not in html
    assert not re.search(r"\son[a-z]+=", html)  # no inline event handler

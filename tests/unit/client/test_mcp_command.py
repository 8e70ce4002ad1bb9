"""`memoria mcp` and `memoria-mcp`: where the gateway and the user come from."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from memoria_cli.main import app
from memoria_client import mcp_server
from memoria_client.client import default_url


def test_stdio_without_a_token_refuses_to_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMORIA_TOKEN", raising=False)
    result = CliRunner().invoke(app, ["mcp"])
    assert result.exit_code != 0
    assert "set MEMORIA_TOKEN" in result.output


def test_the_cli_passes_its_options_on(monkeypatch: pytest.MonkeyPatch) -> None:
    served: list[tuple[object, ...]] = []
    monkeypatch.setattr(mcp_server, "serve", lambda *args: served.append(args))
    result = CliRunner().invoke(
        app, ["mcp", "--transport", "http", "--url", "http://gw:1", "--port", "9000"]
    )
    assert result.exit_code == 0, result.output
    assert served == [("http", "http://gw:1", "127.0.0.1", 9000)]


def test_the_gateway_url_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMORIA_URL", raising=False)
    monkeypatch.delenv("MEMORIA_GATEWAY_PORT", raising=False)
    assert default_url() == "http://127.0.0.1:8000"
    monkeypatch.setenv("MEMORIA_GATEWAY_PORT", "8123")
    assert default_url() == "http://127.0.0.1:8123"
    monkeypatch.setenv("MEMORIA_URL", "https://memoria.example")
    assert default_url() == "https://memoria.example"

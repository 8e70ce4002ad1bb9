"""Every command that talks to the gateway finds it by one rule: --url, else $MEMORIA_URL,
else the loopback address of MEMORIA_GATEWAY_PORT, else of the port the instance of
MEMORIA_DATA_DIR wrote down when `memoria run` started it (8000 by default)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

import memoria_cli.chat
import memoria_cli.transfer
from memoria_cli.gateway_client import Connection, gateway_url
from memoria_cli.main import app
from memoria_runtime import instance
from memoria_runtime.settings import Settings

COMMANDS = (["export"], ["import", "memories.jsonl"], ["chat"])


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No MEMORIA_* variable and no .env file reaches the settings."""
    for name in list(os.environ):
        if name.startswith("MEMORIA_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("MEMORIA_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The gateway URL each command was given, instead of running it."""
    urls: list[str] = []

    def record(connection: Connection, *_: object) -> int:
        urls.append(connection.url)
        return 0

    monkeypatch.setattr(memoria_cli.transfer, "run_export", record)
    monkeypatch.setattr(memoria_cli.transfer, "run_import", record)
    monkeypatch.setattr(memoria_cli.chat, "run_chat", record)
    return urls


def test_default_is_port_8000_on_loopback() -> None:
    assert gateway_url() == "http://127.0.0.1:8000"


def recorded_instance(tmp_path: Path, **ports: object) -> None:
    settings = Settings.load(_env_file=None, **ports)
    (tmp_path / "data").mkdir(exist_ok=True)
    instance.record(settings, tmp_path / "data")


def test_the_data_directory_alone_finds_the_port_its_instance_wrote_down(tmp_path: Path) -> None:
    recorded_instance(tmp_path, gateway_port=8311)
    assert gateway_url() == "http://127.0.0.1:8311"


def test_the_gateway_port_set_wins_over_the_one_written_down(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorded_instance(tmp_path, gateway_port=8311)
    monkeypatch.setenv("MEMORIA_GATEWAY_PORT", "8123")
    assert gateway_url() == "http://127.0.0.1:8123"


def test_an_instance_listening_on_one_address_is_reached_there(tmp_path: Path) -> None:
    recorded_instance(tmp_path, gateway_host="192.168.5.9", gateway_port=8311)
    assert gateway_url() == "http://192.168.5.9:8311"
    recorded_instance(tmp_path, gateway_host="0.0.0.0", gateway_port=8312)
    assert gateway_url() == "http://127.0.0.1:8312"


def test_the_gateway_port_moves_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORIA_GATEWAY_PORT", "8123")
    assert gateway_url() == "http://127.0.0.1:8123"


def test_the_gateway_port_of_a_dotenv_file_moves_it(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("MEMORIA_GATEWAY_PORT=8124\n")
    assert gateway_url() == "http://127.0.0.1:8124"


def test_memoria_url_wins_over_the_port(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORIA_GATEWAY_PORT", "8123")
    monkeypatch.setenv("MEMORIA_URL", "https://memoria.example")
    assert gateway_url() == "https://memoria.example"


def test_the_url_option_wins_over_everything(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORIA_URL", "https://memoria.example")
    assert gateway_url("http://other:9") == "http://other:9"


def test_given_settings_are_used_as_they_are() -> None:
    assert gateway_url(settings=Settings.load(_env_file=None, gateway_port=8125).gateway).endswith(
        ":8125"
    )


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_every_command_follows_the_gateway_port(
    command: list[str], seen: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMORIA_GATEWAY_PORT", "8126")
    result = CliRunner().invoke(app, command)
    assert result.exit_code == 0, result.output
    assert seen == ["http://127.0.0.1:8126"]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_every_command_follows_memoria_url_and_url(
    command: list[str], seen: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMORIA_URL", "http://from-env:1")
    runner = CliRunner()
    assert runner.invoke(app, command).exit_code == 0
    assert runner.invoke(app, [*command, "--url", "http://from-flag:2"]).exit_code == 0
    assert seen == ["http://from-env:1", "http://from-flag:2"]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_an_invalid_gateway_port_is_said_plainly(
    command: list[str], seen: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMORIA_GATEWAY_PORT", "not-a-port")
    result = CliRunner().invoke(app, command)
    assert result.exit_code == 2
    assert "invalid setting gateway_port" in result.output
    assert seen == []


def test_doctor_checks_the_same_gateway(monkeypatch: pytest.MonkeyPatch) -> None:
    from memoria_cli.doctor import describe

    monkeypatch.setenv("MEMORIA_URL", "http://from-env:3")
    config = describe(Settings.load(_env_file=None), "offline", "", None)
    assert config.gateway_url == "http://from-env:3"

"""What `memoria run` asks the supervisor to run, in both broker profiles.

The end-to-end run of the real services is tests/integration/test_make_run.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from memoria_cli import embedded_broker, embedded_milvus
from memoria_cli.run import build_specs
from memoria_cli.supervisor import ProcessSpec
from memoria_runtime.settings import EMBEDDED_PASSWORD_FILE, Settings

pytestmark = pytest.mark.integration

SERVICES = [
    ("action-worker", "memoria_action_worker"),
    ("decision", "memoria_decision"),
    ("memory", "memoria_memory"),
    ("gateway", "memoria_gateway"),
]
WAITED_FOR = {"memory", "gateway"}  # serving only once their stores / HTTP server are up


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("REDIS_URL", "MEMORIA_REDIS_URL", "MEMORIA_DATA_DIR", "MEMORIA_MILVUS_URI"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SOME_USER_SETTING", "kept")
    monkeypatch.chdir(tmp_path)  # a relative data directory resolves here


def assert_services(
    specs: list[ProcessSpec], redis_url: str, data_dir: Path, milvus_uri: str
) -> None:
    """The four services, in start order, each told where the broker, Milvus and the data
    are."""
    assert [(spec.name, list(spec.argv)) for spec in specs] == [
        (name, [sys.executable, "-m", module]) for name, module in SERVICES
    ]
    for spec in specs:
        assert spec.env is not None
        assert spec.env["MEMORIA_REDIS_URL"] == redis_url
        assert spec.env["MEMORIA_MILVUS_URI"] == milvus_uri
        assert spec.env["MEMORIA_DATA_DIR"] == str(data_dir)
        assert Path(spec.env["MEMORIA_DATA_DIR"]).is_absolute()
        assert spec.env["SOME_USER_SETTING"] == "kept"
        assert spec.critical
        assert (spec.ready is not None) == (spec.name in WAITED_FOR)


def test_embedded_profile_starts_valkey_and_milvus_first_then_the_services(
    tmp_path: Path,
) -> None:
    settings = Settings.load(
        data_dir=Path("data"),
        embedded_redis_port=6411,
        embedded_milvus_port=19611,
        gateway_port=8111,
    )
    specs = build_specs(settings)

    valkey = specs[0]
    assert valkey.name == "valkey"
    assert valkey.argv == embedded_broker.argv(6411, tmp_path / "data")
    assert valkey.executable == str(embedded_broker.binary_path())
    assert valkey.argv[valkey.argv.index("--dir") + 1] == str(tmp_path / "data" / "valkey")
    assert valkey.ready is not None
    assert valkey.critical
    milvus = specs[1]
    assert milvus.name == "milvus"
    assert milvus.argv == embedded_milvus.argv(19611, tmp_path / "data")
    assert milvus.ready is not None
    assert_services(
        specs[2:], "redis://127.0.0.1:6411/0", tmp_path / "data", "http://127.0.0.1:19611"
    )


def test_external_profile_starts_no_broker_or_milvus_and_passes_the_urls_on(
    tmp_path: Path,
) -> None:
    url = "redis://broker.example:6379/3"
    milvus = "http://milvus.example:19530"
    settings = Settings.load(data_dir=tmp_path / "d", redis_url=url, milvus_uri=milvus)
    specs = build_specs(settings)

    assert not {"valkey", "milvus"} & {spec.name for spec in specs}
    assert_services(specs, url, tmp_path / "d", milvus)


def test_redis_url_from_the_environment_selects_the_external_profile(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("REDIS_URL", "redis://elsewhere:6379/0")
    specs = build_specs(Settings.load(data_dir=tmp_path))
    assert [spec.name for spec in specs] == ["milvus", *(name for name, _ in SERVICES)]
    specs = specs[1:]
    assert all(
        spec.env is not None and spec.env["MEMORIA_REDIS_URL"] == "redis://elsewhere:6379/0"
        for spec in specs
    )


def test_with_the_password_memoria_run_makes_every_part_requires_and_uses_it(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    embedded_broker.broker_dir(data).mkdir(parents=True)  # as memoria run's checks leave it
    (data / EMBEDDED_PASSWORD_FILE).write_text("the-password")
    settings = Settings.load(data_dir=data, embedded_redis_port=6411, embedded_milvus_port=19611)
    valkey, milvus, *services = build_specs(settings)
    config = embedded_broker.config_file(data)
    assert valkey.argv == embedded_broker.argv(6411, data, config)
    assert 'requirepass "the-password"' in config.read_text()
    assert milvus.argv == embedded_milvus.argv(19611, data, data / EMBEDDED_PASSWORD_FILE)
    for argv in (valkey.argv, milvus.argv):
        assert not any("the-password" in part for part in argv)
    for service in services:
        assert service.env is not None
        assert service.env["MEMORIA_REDIS_URL"] == "redis://:the-password@127.0.0.1:6411/0"
        assert service.env["MEMORIA_MILVUS_TOKEN"] == "memoria:the-password"

"""/docs and /redoc work with no network: each page, and every file it loads, comes from the
gateway itself. The app is built but not started (no broker): the pages need none."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from memoria_gateway.app import create_app
from memoria_runtime.settings import GatewayProcessSettings, Settings

_REFERENCE = re.compile(r"""(?:src|href)\s*=\s*["']([^"']+)["']|(?:url)\s*:\s*['"]([^'"]+)['"]""")


@pytest.fixture
def client(tmp_path: Path) -> TestClient:
    settings = Settings.load(_env_file=None, data_dir=tmp_path)
    return TestClient(create_app(settings.process(GatewayProcessSettings)))


def references(html: str) -> list[str]:
    return [a or b for a, b in _REFERENCE.findall(html)]


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_the_api_docs_load_nothing_from_another_host(client: TestClient, page: str) -> None:
    response = client.get(page)
    assert response.status_code == 200
    found = references(response.text)
    assert len(found) >= 2  # the script (and a stylesheet or the OpenAPI document) at least
    for url in found:
        assert url.startswith("/"), f"{page} loads {url} from elsewhere"
        asset = client.get(url)
        assert asset.status_code == 200, url
        assert asset.content, url
    assert not re.search(r"https?://(?!www\.w3\.org)", response.text), "a link to another host"


def test_the_openapi_document_names_the_gateway(client: TestClient) -> None:
    assert client.get("/openapi.json").json()["info"]["title"] == "Memoria gateway"

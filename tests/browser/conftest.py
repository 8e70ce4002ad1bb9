"""Fixtures of the browser suite: the real stack (broker, milvus-lite and the four services as
processes, offline planner) and Debian's chromium driven by Playwright. No browser is
downloaded: without a `chromium` binary the suite is skipped with the reason."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, expect, sync_playwright

# The stack helpers live beside the tests, not in a package (as for tests/integration).
sys.path.insert(0, str(Path(__file__).parent.parent / "support"))

REPO_ROOT = Path(__file__).resolve().parents[2]
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
TIMEOUT_MS = 30_000  # generous: the machine running this may be slow and shared


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "browser: drives the web chat in a real chromium")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    setattr(item, f"report_{report.when}", report)  # for the failure screenshot below
    return report


def chromium_executable() -> str | None:
    for candidate in (
        shutil.which("chromium"),
        "/usr/bin/chromium",
        shutil.which("chromium-browser"),
    ):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


@pytest.fixture(scope="session")
def artifacts() -> Path:
    """Where screenshots go: $MEMORIA_TEST_ARTIFACTS, else test-artifacts/browser/."""
    directory = Path(
        os.environ.get("MEMORIA_TEST_ARTIFACTS") or REPO_ROOT / "test-artifacts" / "browser"
    )
    directory.mkdir(parents=True, exist_ok=True)
    return directory


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    executable = chromium_executable()
    if executable is None:
        pytest.skip("no chromium binary found: install Debian's (`sudo apt install chromium`)")
    expect.set_options(timeout=TIMEOUT_MS)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()

"""A gateway asked to listen beyond this machine with the password-free dev login on stops
at start, saying why and what to set, rather than serve it to whoever reaches it; told
where the dev login may answer, it starts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

START_TIMEOUT_S = 120


def gateway_env(tmp_path: Path, **settings: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("MEMORIA_")}
    env.update(MEMORIA_DATA_DIR=str(tmp_path / "data"), **settings)
    return env


@pytest.mark.parametrize("host", ["0.0.0.0", "::"])
def test_a_gateway_listening_everywhere_with_the_dev_login_does_not_start(
    tmp_path: Path, host: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "memoria_gateway"],
        env=gateway_env(tmp_path, MEMORIA_GATEWAY_HOST=host),
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 1
    assert f"cannot start: MEMORIA_DEV_LOGIN is on and the gateway listens on {host}" in (
        done.stderr
    )
    assert "MEMORIA_DEV_LOGIN=false" in done.stderr and "MEMORIA_DEV_LOGIN_HOSTS" in done.stderr
    assert "Traceback" not in done.stderr

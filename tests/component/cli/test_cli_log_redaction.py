"""Whatever a `memoria` command (or a library under it) logs goes out without credentials:
the CLI installs the runtime's redaction before any command runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SECRET = "s3cret-for-tests-only-0123456789abcdef"
# In a process of its own: the redaction is process-wide, and other tests install it too.
SCRIPT = """
import logging
from typer.testing import CliRunner
from memoria_cli.main import app

result = CliRunner().invoke(app, ["token", "ana"])
assert result.exit_code == 0, result.output
logging.getLogger("websockets.client").warning(
    "> GET /ws?token=%s HTTP/1.1 | Sec-WebSocket-Protocol: memoria.v1, bearer.%s",
    result.output.strip(),
    result.output.strip(),
)
"""


def test_a_command_logs_no_token(tmp_path: Path) -> None:
    env = {"MEMORIA_AUTH_SECRET": SECRET, "MEMORIA_DATA_DIR": str(tmp_path), "PATH": ""}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,  # the assertion below shows its stderr
    )
    assert done.returncode == 0, done.stderr
    assert "GET /ws?token=[REDACTED] HTTP/1.1" in done.stderr
    assert "bearer.[REDACTED]" in done.stderr
    assert "eyJ" not in done.stderr

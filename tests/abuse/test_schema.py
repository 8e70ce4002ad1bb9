"""The API does what its OpenAPI document says: schemathesis runs every operation of the
gateway's own ``/openapi.json`` against the four services as processes, with all its checks
(no 5xx, no status the document does not list, no refused valid data and no accepted
invalid data, response bodies, headers and content types as documented, authentication
honoured, resources gone once deleted).

``make test`` runs a few examples per operation (MEMORIA_SCHEMA_EXAMPLES, default 3: about a
minute); ``make chaos`` runs many more. A failure prints schemathesis' report, with a curl
command that reproduces each finding.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import pytest
from stack import Stack

from tests.abuse.helpers import a_user, abuse_stack, assert_services_up, no_tracebacks

pytestmark = pytest.mark.integration

EXAMPLES: Final = int(os.environ.get("MEMORIA_SCHEMA_EXAMPLES", "3"))
SEED: Final = 38
SCHEMATHESIS: Final = Path(sys.executable).with_name("st")
REQUEST_TIMEOUT_S: Final = 60
RUN_TIMEOUT_S: Final = 600 + 20 * EXAMPLES
CONFIG: Final = Path(__file__).with_name("schemathesis.toml")
SCRIPT: Final[dict[str, Any]] = {"rules": [{"match": "", "decide": ["Finalize"]}]}


@pytest.fixture(scope="module")
def stack(
    valkey_server: Any, milvus_server: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    with abuse_stack(
        valkey_server,
        milvus_server,
        tmp_path_factory,
        name="abuse-schema",
        db=13,
        script=SCRIPT,
        rpc_timeout_seconds="5",
        http_requests_per_minute="1000000",  # the run is one user's many requests
        ws_user_messages_per_minute="0",
        step_timeout_seconds="20",
    ) as running:
        yield running
        assert_services_up(running)
        no_tracebacks(running)


@pytest.mark.timeout(RUN_TIMEOUT_S)
def test_every_operation_does_what_the_openapi_document_says(stack: Stack, tmp_path: Path) -> None:
    token = stack.token(a_user("schema"))
    report = tmp_path / "junit.xml"
    command = [
        str(SCHEMATHESIS),
        "--config-file",
        str(CONFIG),
        "run",
        f"{stack.base_url}/openapi.json",
        "--checks",
        "all",
        "--max-examples",
        str(EXAMPLES),
        "--seed",
        str(SEED),
        "--workers",
        "2",
        "--header",
        f"Authorization: Bearer {token}",
        "--request-timeout",
        str(REQUEST_TIMEOUT_S),
        "--generation-database",
        "none",
        "--no-color",
        "--report",
        "junit",
        "--report-junit-path",
        str(report),
    ]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False, cwd=tmp_path
    )
    assert done.returncode == 0, done.stdout[-20000:] + done.stderr[-4000:]

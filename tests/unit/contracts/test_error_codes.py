"""The error frame codes the gateway can send are the ones docs/protocol.md lists, so a
client written from the documentation knows every code it can be told."""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

from memoria_contracts.frames import ErrorCode

PROTOCOL = Path(__file__).resolve().parents[3] / "docs" / "protocol.md"


def documented_codes() -> set[str]:
    (row,) = [line for line in PROTOCOL.read_text().splitlines() if "Refused. Codes:" in line]
    listed = row.split("Refused. Codes:", 1)[1]
    return set(re.findall(r"`([a-z_]+)`(?: \(|,|\.)", listed))


def test_every_error_code_is_documented_and_nothing_else_is() -> None:
    assert documented_codes() == set(get_args(ErrorCode))

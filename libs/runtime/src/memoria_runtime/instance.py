"""Which Memoria a process belongs to: its instance id, derived from its data directory.

Two Memorias on one machine never share a data directory (`memoria run` locks it), so the
directory tells them apart; the processes of one deployment (containers, pods) are given the
same MEMORIA_DATA_DIR, so they agree on it without sharing a file. The id is a digest, not
the path: it is shown where the path should not be (the gateway's public ``/healthz``).
`memoria doctor` compares it with what the broker's announcements and the gateway report.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Final

from memoria_runtime.settings import DataSettings

ID_CHARS: Final = 16


def resolved_data_dir(settings: DataSettings) -> Path:
    return settings.data_dir.expanduser().resolve()


def instance_id(data_dir: Path) -> str:
    return hashlib.sha256(str(data_dir).encode()).hexdigest()[:ID_CHARS]


def instance_of(settings: DataSettings) -> str:
    return instance_id(resolved_data_dir(settings))

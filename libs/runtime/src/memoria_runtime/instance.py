"""Which Memoria a process belongs to: its instance id, derived from its data directory.

Two Memorias on one machine never share a data directory (`memoria run` locks it), so the
directory tells them apart; the processes of one deployment (containers, pods) are given the
same MEMORIA_DATA_DIR, so they agree on it without sharing a file. The id is a digest, not
the path: it is shown where the path should not be (the gateway's public ``/healthz``).
`memoria doctor` compares it with what the broker's announcements and the gateway report.

`memoria run` also writes down where its instance listens (:func:`record`): the CLI's
commands read it, so MEMORIA_DATA_DIR alone is enough to find the instance.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Final, TypeVar

from pydantic import BaseModel

from memoria_runtime.settings import DataSettings, Settings

ID_CHARS: Final = 16
RECORD_FILE: Final = "instance.json"
RECORDED: Final = ("gateway_host", "gateway_port", "embedded_redis_port", "embedded_milvus_port")
"""What `memoria run` writes down in its data directory: where its instance can be reached."""

S = TypeVar("S", bound=BaseModel)


def resolved_data_dir(settings: DataSettings) -> Path:
    return settings.data_dir.expanduser().resolve()


def instance_id(data_dir: Path) -> str:
    return hashlib.sha256(str(data_dir).encode()).hexdigest()[:ID_CHARS]


def instance_of(settings: DataSettings) -> str:
    return instance_id(resolved_data_dir(settings))


def record(settings: Settings, data_dir: Path) -> Path:
    """Write down where this instance listens (`memoria run`, at start), so that a command
    given only MEMORIA_DATA_DIR finds it (:func:`with_recorded`)."""
    path = data_dir / RECORD_FILE
    values = {
        name: getattr(component, name)
        for component in (settings.bus, settings.gateway, settings.storage)
        for name in RECORDED
        if name in type(component).model_fields
    }
    draft = path.with_name(f".{RECORD_FILE}.{os.getpid()}")
    fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump(values, handle)
    draft.replace(path)
    return path


def recorded(data_dir: Path) -> dict[str, Any]:
    """What the instance of ``data_dir`` wrote down; nothing when none ran there (or the
    file is unreadable: the defaults apply, as they did before it existed)."""
    try:
        values = json.loads((data_dir.expanduser() / RECORD_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return {name: values[name] for name in RECORDED if isinstance(values, dict) and name in values}


def with_recorded(settings: S, data_dir: Path) -> S:
    """``settings`` with what the instance of ``data_dir`` wrote down in place of every
    value the environment (or .env) leaves to its default."""
    found = recorded(data_dir)
    taken = {
        name: value
        for name, value in found.items()
        if name in type(settings).model_fields and name not in settings.model_fields_set
    }
    if not taken:
        return settings
    return settings.model_copy(update=taken)


def with_recorded_ports(settings: Settings) -> Settings:
    """:func:`with_recorded` for every component that holds something written down."""
    root = resolved_data_dir(settings.data)
    return settings.model_copy(
        update={
            "bus": with_recorded(settings.bus, root),
            "gateway": with_recorded(settings.gateway, root),
            "storage": with_recorded(settings.storage, root),
        }
    )

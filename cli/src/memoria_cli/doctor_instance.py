"""Whose is what `memoria doctor` reaches: this Memoria's, or another's on the same machine.

Run without the port variables of its own `memoria run`, the doctor reaches the default
ports, where another Memoria may answer. Each part is recognised by what ties it to a data
directory, the one thing two Memorias never share (`memoria run` locks it):

* the embedded Valkey keeps its files in ``<data_dir>/valkey`` and says where (CONFIG GET);
* the embedded milvus-lite holds a lock on ``<data_dir>/milvus``; the process holding it
  was started with the port it serves;
* services announce their instance (instance.py) with their presence in the broker, and the
  gateway says it in ``/healthz``.

Announcements without an instance come from services older than it: they count as this
instance's, as the doctor said before it could tell.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from memoria_cli import embedded_broker, embedded_milvus
from memoria_runtime import keys
from memoria_runtime.presence import Presence

PROC: Final = Path("/proc")
PORT_FLAG: Final = "--port"
OTHER_INSTANCE_HINT: Final = (
    "another Memoria answers here: give this one's settings (MEMORIA_EMBEDDED_REDIS_PORT, "
    "MEMORIA_EMBEDDED_MILVUS_PORT, MEMORIA_GATEWAY_PORT as its `memoria run` had them), or "
    "MEMORIA_DATA_DIR of the one you mean to check"
)


async def broker_dir(client: Any) -> Path | None:
    """Where a Valkey/Redis keeps its files; None when CONFIG is refused (managed Redis)."""
    try:
        answer = await client.config_get("dir")
    except Exception:
        return None
    found = answer.get("dir") or answer.get(b"dir")
    if not found:
        return None
    return Path(found.decode() if isinstance(found, bytes) else found)


def embedded_broker_of(data_dir: Path, reported: Path) -> bool:
    return reported.resolve() == embedded_broker.broker_dir(data_dir).resolve()


def milvus_lite_port(data_dir: Path) -> int | None:
    """The port of the milvus-lite serving ``data_dir`` (holding its lock), from the holder's
    command line; None when none holds it."""
    holder = embedded_milvus.lock_holder(data_dir)
    if holder is None:
        return None
    try:
        argv = (PROC / str(holder) / "cmdline").read_bytes().split(b"\0")
    except OSError:  # it ended meanwhile
        return None
    flag = PORT_FLAG.encode()
    if flag in argv[:-1]:
        value = argv[argv.index(flag) + 1]
        return int(value) if value.isdigit() else None
    return None


def can_tell_milvus_lite() -> bool:
    """Locks are visible (Linux /proc/locks): without them no holder can be found."""
    return embedded_milvus.PROC_LOCKS.is_file()


async def live_presences(client: Any) -> list[Presence]:
    now = time.time()
    entries = await client.hgetall(keys.SERVICES)
    found = (Presence.model_validate_json(raw) for raw in entries.values())
    return [entry for entry in found if entry.expires_at >= now]


@dataclass(frozen=True)
class Owners:
    """A service's live announcements, split by the instance they serve."""

    ours: list[Presence]
    others: list[Presence]

    @property
    def other_data_dirs(self) -> str:
        return ", ".join(sorted({entry.data_dir or "unknown" for entry in self.others}))


def owners(presences: list[Presence], instance: str, service: str | None = None) -> Owners:
    chosen = [entry for entry in presences if service is None or entry.service == service]
    ours = [entry for entry in chosen if entry.instance in (instance, None)]
    return Owners(ours, [entry for entry in chosen if entry.instance not in (instance, None)])

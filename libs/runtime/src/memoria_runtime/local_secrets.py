"""Secrets that a single-host install may leave unset: generated once, kept in the data
directory, shared by every process that uses that directory."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from pydantic import SecretStr

from memoria_runtime.settings import DataSettings

_SECRET_BYTES = 32


def load_or_create_secret(
    settings: DataSettings, configured: SecretStr | None, file_name: str
) -> str:
    """``configured`` when set; else the secret in ``data_dir/file_name``, created (0600) by
    whichever process gets there first. The file appears complete or not at all (written
    aside, then hard-linked into place), so processes starting together agree on one value."""
    if configured is not None:
        return configured.get_secret_value()
    path: Path = settings.data_dir / file_name
    if not path.exists():
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        draft = path.with_name(f".{file_name}.{os.getpid()}")
        fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(secrets.token_urlsafe(_SECRET_BYTES))
        try:
            os.link(draft, path)
        except FileExistsError:
            pass  # another process won; its secret is the one
        finally:
            draft.unlink()
    return path.read_text().strip()

"""A data directory only its owner can read: files 0600, folders 0700.

Memories, chat history, the broker's append-only file and the secrets all live in the data
directory; on a machine shared with other accounts, a file readable by others is a user's
bank PIN readable by them. Every Memoria process creates files with the umask 077 (and the
embedded servers inherit it from `memoria run`); `memoria run` tightens what an earlier
version left wider; `memoria doctor` says what is still wider.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Final

PRIVATE_UMASK: Final = 0o077
OTHERS: Final = stat.S_IRWXG | stat.S_IRWXO


def keep_files_private() -> None:
    """Every file and folder this process (and its children) creates is its owner's alone."""
    os.umask(PRIVATE_UMASK)


def _entries(root: Path) -> Iterator[Path]:
    yield root
    for folder, folders, files in os.walk(root):
        for name in (*folders, *files):
            yield Path(folder) / name


def wider_than_private(root: Path) -> list[tuple[Path, int]]:
    """Files and folders under ``root`` (itself included) that other accounts may read,
    write or enter, with their permission bits; links are not followed."""
    found = []
    for path in _entries(root):
        try:
            mode = path.lstat().st_mode
        except OSError:  # gone meanwhile
            continue
        if not stat.S_ISLNK(mode) and mode & OTHERS:
            found.append((path, stat.S_IMODE(mode)))
    return found


def make_private(root: Path) -> int:
    """Take every permission of others off what this account owns under ``root``; returns
    how many entries changed."""
    changed = 0
    me = os.getuid()
    for path, mode in wider_than_private(root):
        try:
            if path.lstat().st_uid == me:
                path.chmod(mode & ~OTHERS)
                changed += 1
        except OSError:
            continue
    return changed

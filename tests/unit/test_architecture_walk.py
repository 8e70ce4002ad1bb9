"""docs/architecture.md's "One message, file by file" stays true: every file it names exists,
each is named once, in numbered order, and there are at most 12 of them."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MOST_FILES = 12
ABBREVIATION = re.compile(r"`(\w+)` = `([^`]+)`")
ROW = re.compile(r"^\| (\d+) \| `([^`]+)` \|", re.MULTILINE)
PATH_LIKE = re.compile(r"`([\w./-]+\.(?:py|js|md)|\w+/[\w./-]+)`")


def walk() -> str:
    text = (ROOT / "docs/architecture.md").read_text(encoding="utf-8")
    start = text.index("## One message, file by file")
    return text[start : text.index("\n## ", start + 1)]


def named(section: str) -> list[tuple[int, Path]]:
    short = dict(ABBREVIATION.findall(section))
    rows = []
    for number, name in ROW.findall(section):
        head, _, rest = name.partition("/")
        rows.append((int(number), ROOT / short.get(head, head) / rest))
    return rows


def test_the_walk_names_at_most_twelve_files_each_once_in_order() -> None:
    rows = named(walk())
    assert [number for number, _ in rows] == list(range(1, len(rows) + 1))
    files = [path for _, path in rows]
    assert 0 < len(files) <= MOST_FILES
    assert len(set(files)) == len(files), "a file named twice"


def test_every_file_the_walk_names_exists() -> None:
    missing = [str(path.relative_to(ROOT)) for _, path in named(walk()) if not path.is_file()]
    assert missing == []


def test_the_walk_names_no_file_outside_its_rows() -> None:
    section = walk()
    listed = {name for _, name in ROW.findall(section)}
    listed |= {folder for _, folder in ABBREVIATION.findall(section)}
    assert set(PATH_LIKE.findall(section)) - listed == set()

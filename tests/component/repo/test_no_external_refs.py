"""The repository speaks for itself: no file points at documents it does not contain —
requirement ids ("R-6", "N-3"), a "SPEC", numbered seeds ("seed 000"), our own issue or
stop numbers ("issue 8", "stop 25", "(#8)"), or "DESIGN.md". Whatever such a reference
meant has to be said where it is used, or the reader cannot follow it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
THIS_FILE = Path(__file__).resolve().relative_to(ROOT).as_posix()

PATTERNS: dict[str, re.Pattern[str]] = {
    # "R-1" … "N-9" standing alone: not "UTF-8", "HS-256", "R-10" or an id inside a word.
    # Maths such as "N-1 replicas" would match too: write it out ("all but one").
    "requirement id": re.compile(r"(?<![\w-])[RN]-[1-9](?![\w-])"),
    "SPEC": re.compile(r"\bSPEC\b"),
    "numbered seed": re.compile(r"\bseeds?\b\W{0,3}0\d\d\b", re.IGNORECASE),
    "issue or stop number": re.compile(r"\b(?:issues?|stops?)\s*#?\d+\b", re.IGNORECASE),
    # "#8" as a reference — "(#8)", "see #8", "fixes #8" — but not a CSS colour ("#333"),
    # a third-party tracker's "mem0 #1674" or "restart #2" in a log line.
    "issue reference": re.compile(r"(?:\(|\b(?:see|fixes|closes|pr)\s+)#\d+\b", re.IGNORECASE),
    "DESIGN.md": re.compile(r"DESIGN\.md"),
}

# (path, the matched text): matches that are legitimately something else. Keep it tiny.
ALLOWED: frozenset[tuple[str, str]] = frozenset()

SKIPPED = {"uv.lock", THIS_FILE}


def tracked_text_files() -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, text=True
    ).stdout
    return [path for path in listed.split("\0") if path and path not in SKIPPED]


def references(path: str, text: str) -> list[str]:
    found = []
    for name, pattern in PATTERNS.items():
        for match in pattern.finditer(text):
            if (path, match.group()) in ALLOWED:
                continue
            line = text.count("\n", 0, match.start()) + 1
            found.append(f"{path}:{line}: {name} {match.group()!r}")
    return found


def test_no_file_refers_to_documents_outside_the_repository() -> None:
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: no tracked files to read")
    found: list[str] = []
    for path in tracked_text_files():
        try:
            text = (ROOT / path).read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue  # binary, or deleted in the work tree and not yet committed
        found.extend(references(path, text))
    assert not found, "say what is meant instead:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "text",
    [
        "as R-6 asks",
        "(SPEC N-3)",
        "SPEC: the chat message",
        "seed 000's order",
        "the seed (`001`)",
        "see issue 8",
        "Issue #12 says",
        "after stop 25",
        "fixed in (#8)",
        "see #8",
        "types of DESIGN.md",
    ],
)
def test_each_kind_of_reference_is_caught(text: str) -> None:
    assert references("x.md", text)


@pytest.mark.parametrize(
    "text",
    [
        "color: #333;",
        "background: #1e1e1e",
        'a number ("2", "#2", "the second")',
        "restart #1 in 0.5s",
        "mem0 #1674, #4536",
        "UTF-8 and HS-256",
        "MEMORIA_CHAOS_SEED=2921190335",
        "random seed 31661347",
        "--seed 8",
        "a spec of the API",
    ],
)
def test_what_only_looks_like_a_reference_passes(text: str) -> None:
    assert not references("x.md", text)

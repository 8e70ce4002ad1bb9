"""Every text the decision service and the action worker show the user comes from the i18n
catalogue, in English and in Portuguese: the catalogue is checked entry by entry, and the
emitters' source is walked so that a new English-only literal fails here."""

from __future__ import annotations

import ast
import string
from collections.abc import Iterator
from pathlib import Path

import pytest

from memoria_text import i18n

ROOT = Path(__file__).resolve().parents[3]
EMITTERS = (
    ROOT / "services/decision/src/memoria_decision",
    ROOT / "services/action_worker/src/memoria_action_worker",
)
# Arguments that reach the user's screen: a record's content, a cycle's notice, a step's
# error (shown when the step ends the cycle), and the text of the helpers that post them.
SHOWN_KEYWORDS = frozenset({"content", "notice", "error", "text"})
POSTING_CALLS = frozenset({"reply", "notice"})
# Calls that name a catalogue entry, and where among their arguments.
KEY_AT = {"text": 0, "status": -1, "_text": 1, "_say": 1}
# The catalogue's own look-up, and messages for the model rather than for people.
NOT_SHOWN_CALLS = frozenset({"text", "PromptMessage"})


def _fields(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


@pytest.mark.parametrize("key", sorted(i18n.TEXTS))
def test_every_catalogue_entry_has_both_languages_with_the_same_fields(key: str) -> None:
    entry = i18n.TEXTS[key]
    assert set(entry) == {"en", "pt"}
    assert entry["en"].strip() and entry["pt"].strip()
    assert entry["en"] != entry["pt"], "a Portuguese text that is the English one"
    assert _fields(entry["en"]) == _fields(entry["pt"])


def _sources() -> Iterator[tuple[Path, ast.Module]]:
    for folder in EMITTERS:
        for path in sorted(folder.rglob("*.py")):
            yield path, ast.parse(path.read_text(encoding="utf-8"), str(path))


def _is_text(node: ast.expr) -> bool:
    """A literal that would be shown as it is (an empty string shows nothing)."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str) and bool(node.value)
    return isinstance(node, ast.JoinedStr)


def _name(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def _literal_texts(tree: ast.AST) -> list[int]:
    """Lines where a literal is passed as what the user sees (not through ``i18n.text``)."""
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or _name(node) in NOT_SHOWN_CALLS:
            continue
        shown = [k.value for k in node.keywords if k.arg in SHOWN_KEYWORDS]
        if _name(node) in POSTING_CALLS:
            shown += node.args[-1:]
        lines += [value.lineno for value in shown if _is_text(value)]
    return lines


def test_no_emitter_shows_a_literal_text() -> None:
    """A literal shown as it is would be English-only (or Portuguese-only)."""
    found = [f"{path.name}:{line}" for path, tree in _sources() for line in _literal_texts(tree)]
    assert found == []


def test_the_walk_finds_literal_texts() -> None:
    """The walk above is no tautology: each way of showing a literal is caught."""
    shown = """
outputs.reply(state, "Done!")
outputs.notice(state, "end", f"Stopped after {n} steps")
ChatRecord(id="x", role="system", content="Hello")
Ending(step=step, notice="Nothing to do")
ActionOutcome(status="failed", error=f"boom: {exc}")
outputs.reply(state, i18n.text("forget_done", "en", content=c))
"""
    assert sorted(_literal_texts(ast.parse(shown))) == [2, 3, 4, 5, 6]


def test_every_key_an_emitter_names_is_in_the_catalogue() -> None:
    """Each ``i18n.text("key", ...)`` names an entry, and each string an emitter keeps as a
    key for it later (a failure's notice, a status) does too."""
    used: set[str] = set()
    for _, tree in _sources():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _name(node) in KEY_AT:
                first = node.args[KEY_AT[_name(node)]]
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    used.add(first.value)
    assert used, "the walk found no i18n.text call: the emitters moved?"
    assert used - set(i18n.TEXTS) == set()


def test_a_missing_language_would_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check above is no tautology: an entry in English alone is caught."""
    monkeypatch.setitem(i18n.TEXTS, "english_only", {"en": "Only English"})
    with pytest.raises(AssertionError):
        test_every_catalogue_entry_has_both_languages_with_the_same_fields("english_only")

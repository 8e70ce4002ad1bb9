"""What the terminal chat prints: every byte that would drive a terminal or hide itself is
shown as its code point; line feeds and tabs stay."""

from __future__ import annotations

import pytest

from memoria_cli.chat.sanitize import clean, clean_line, shown


@pytest.mark.parametrize(
    ("character", "shown_as"),
    [
        ("\x00", "⟨U+0000⟩"),
        ("\x08", "⟨U+0008⟩"),
        ("\x0b", "⟨U+000B⟩"),
        ("\r", "⟨U+000D⟩"),
        ("\x1b", "⟨U+001B⟩"),
        ("\x1f", "⟨U+001F⟩"),
        ("\x7f", "⟨U+007F⟩"),
        ("\x9b", "⟨U+009B⟩"),  # the 8-bit CSI
        ("\x9f", "⟨U+009F⟩"),
        ("\u061c", "⟨U+061C⟩"),
        ("\u202e", "⟨U+202E⟩"),
    ],
)
def test_a_character_a_terminal_obeys_or_hides_is_shown_as_its_code_point(
    character: str, shown_as: str
) -> None:
    assert clean(f"pin {character}1234") == f"pin {shown_as}1234"


def test_line_feeds_tabs_and_printable_text_stay() -> None:
    text = "line one\n\tindented · ção ½ ÿ"
    assert clean(text) == text


def test_a_line_for_a_table_cell_has_no_breaks_and_single_spaces() -> None:
    assert clean_line("  first\n\nsecond\tthird \x1b ") == "first second third ⟨U+001B⟩"


def test_json_is_shown_compact_with_its_letters_and_marked_controls() -> None:
    assert shown({"city": "São Paulo", "tags": [1, "\x1b[2J"]}) == (
        '{"city": "São Paulo", "tags": [1, "\\u001b[2J"]}'
    )
    assert shown(["\u202e4321"]) == '["⟨U+202E⟩4321"]'
    assert shown("plain \x1b") == "plain ⟨U+001B⟩"
    assert shown(None) == "null"

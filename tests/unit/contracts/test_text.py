"""Text people type and text shown to them: which control characters no field takes, which
invisible characters every surface marks, and the one-line and same-fact forms."""

from __future__ import annotations

import re

import pytest
from pydantic import BaseModel, ValidationError

from memoria_contracts.text import (
    CONTROL_CHARACTER,
    CONTROL_FREE_PATTERN,
    ELLIPSIS,
    INVISIBLE,
    PlainText,
    as_text,
    control_in,
    joins_emoji,
    mark,
    marked,
    one_line,
    saying,
)


class Typed(BaseModel):
    text: PlainText


def test_content_as_text_is_the_string_or_compact_json_with_its_letters() -> None:
    assert as_text("já") == "já"
    assert as_text({"city": "São Paulo", "n": [1, 2]}) == '{"city": "São Paulo", "n": [1, 2]}'


def test_one_line_folds_whitespace_and_cuts_with_an_ellipsis_only_past_the_limit() -> None:
    assert one_line("a  b\n\tc", 5) == "a b c"
    assert one_line("abcdef", 6) == "abcdef"
    assert one_line("abcdefg", 6) == "abcde" + ELLIPSIS
    assert ELLIPSIS == "…"


def test_two_typings_of_one_fact_say_the_same() -> None:
    assert saying("I live in Berlin.") == saying("i  live in\tberlin") == "i live in berlin"
    assert saying("Straße!") == saying("STRASSE") == "strasse"
    assert saying("ﬁne;,") == "fine"  # NFKC: the ligature is two letters
    assert saying("  wait?  ") == "wait?"  # a question mark is part of what is said


@pytest.mark.parametrize("code", [*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20), 0x7F])
def test_c0_controls_and_del_are_refused_naming_the_character(code: int) -> None:
    character = chr(code)
    assert control_in(f"a{character}b") == character
    with pytest.raises(ValidationError) as refused:
        Typed(text=f"pin {character}")
    (error,) = refused.value.errors()
    assert error["type"] == CONTROL_CHARACTER == "control_character"
    assert error["msg"] == (
        f"text may not hold the control character U+{code:04X} (only tab and newline)"
    )


@pytest.mark.parametrize("text", ["tab\there", "line\nnext", "crlf\r\nnext", "é ½ 中 \u0085"])
def test_tab_newline_crlf_and_everything_above_are_taken(text: str) -> None:
    assert control_in(text) is None
    assert Typed(text=text).text == text


def test_a_lone_carriage_return_is_refused() -> None:
    assert control_in("over\rwrite") == "\r"
    assert control_in("end\r") == "\r"


def test_the_schema_pattern_takes_exactly_what_the_check_takes() -> None:
    pattern = re.compile(CONTROL_FREE_PATTERN)
    for code in range(0x00, 0x100):
        for text in (chr(code), f"a{chr(code)}b", f"{chr(code)}\n"):
            assert (pattern.match(text) is not None) == (control_in(text) is None), hex(code)


def test_the_invisible_characters_are_exactly_the_documented_ranges() -> None:
    documented = [(0x200B, 0x200F), (0x202A, 0x202E), (0x2066, 0x2069), (0xFEFF, 0xFEFF)]
    expected = {chr(c) for first, last in documented for c in range(first, last + 1)}
    assert expected == INVISIBLE
    for neighbour in (0x200A, 0x2010, 0x2029, 0x202F, 0x2065, 0x206A, 0xFEFE, 0xFF00):
        assert marked(f"a{chr(neighbour)}b") == f"a{chr(neighbour)}b"


@pytest.mark.parametrize("character", sorted(INVISIBLE))
def test_each_invisible_character_is_shown_as_its_code_point(character: str) -> None:
    assert marked(f"pin {character}1234") == f"pin ⟨U+{ord(character):04X}⟩1234"
    assert mark(character) == f"⟨U+{ord(character):04X}⟩"


def test_text_without_invisible_characters_is_returned_as_it_is() -> None:
    text = "plain text · ção"
    assert marked(text) is text


@pytest.mark.parametrize(
    "emoji",
    [
        "\U0001f468\u200d\U0001f469\u200d\U0001f467",  # a family
        "\U0001f3f3\ufe0f\u200d\U0001f308",  # the rainbow flag: VS16 before the joiner
        "\u2764\u200d\U0001f525",  # a heart on fire: the first one from the BMP
        "\U0001f9d1\u200d\u2695",  # a health worker: the last one from the BMP
    ],
)
def test_a_joiner_inside_an_emoji_is_left_to_draw_it(emoji: str) -> None:
    assert marked(f"{emoji} {emoji}") == f"{emoji} {emoji}"


@pytest.mark.parametrize(
    ("text", "index", "joins"),
    [
        ("\u200d\U0001f469", 0, False),  # nothing before it
        ("\U0001f468\u200d", 1, False),  # nothing after it
        ("a\u200d\U0001f469", 1, False),  # a letter before it
        ("\U0001f468\u200db", 1, False),  # a letter after it
        ("\ufe0f\u200d\U0001f469", 1, False),  # only a variation selector before it
        ("\U0001f468\u200d\U0001f469", 1, True),
        ("\u00a9\u200d\U0001faff", 1, True),  # the ends of the emoji ranges
    ],
)
def test_when_a_joiner_joins_emoji(text: str, index: int, joins: bool) -> None:
    assert joins_emoji(text, index) is joins


def test_a_joiner_outside_an_emoji_is_marked() -> None:
    assert marked("ad\u200dmin") == "ad⟨U+200D⟩min"

"""What a thread list shows: a title made from the first user message, and a preview of the
newest message."""

from __future__ import annotations

import pytest

from memoria_memory.thread_titles import MAX_DEFAULT_TITLE_CHARS, default_title, preview


def test_a_short_message_is_the_title_as_it_is() -> None:
    assert default_title("Plan my trip to Rome") == "Plan my trip to Rome"


def test_a_title_is_one_line_without_extra_blanks() -> None:
    assert default_title("  Plan my\n\ntrip   to Rome \t") == "Plan my trip to Rome"


def test_a_message_of_exactly_sixty_characters_is_not_cut() -> None:
    text = "x" * 50 + " " + "y" * 9
    assert len(text) == MAX_DEFAULT_TITLE_CHARS
    assert default_title(text) == text


def test_a_long_message_is_cut_on_a_word_boundary_with_an_ellipsis() -> None:
    text = "Could you help me plan a ten day trip through the north of Italy in December"
    title = default_title(text)
    assert title == "Could you help me plan a ten day trip through the north of…"
    assert title is not None
    assert len(title) <= MAX_DEFAULT_TITLE_CHARS
    assert text.startswith(title.removesuffix("…"))


def test_a_cut_right_after_a_word_keeps_that_word() -> None:
    text = "a" * 59 + " and more words after the boundary"
    assert default_title(text) == "a" * 59 + "…"


def test_punctuation_before_the_ellipsis_is_dropped() -> None:
    words = "Remember this, " + "w" * 43
    text = words + ", then something else entirely"
    assert default_title(text) == words + "…"  # not "…w,…"


def test_one_endless_word_is_cut_where_it_must_be() -> None:
    url = "https://example.com/" + "a" * 100
    title = default_title(url)
    assert title == url[:59] + "…"


@pytest.mark.parametrize("content", ["", "   \n ", None, {"not": "text"}])
def test_no_text_makes_no_title(content: object) -> None:
    assert default_title(content) is None


def test_a_preview_is_the_text_cut_to_two_hundred_characters() -> None:
    assert preview("text", "All set!") == "All set!"
    long = "word " * 100
    cut = preview("text", long)
    assert cut is not None
    assert len(cut) == 200
    assert cut == long[:199] + "…"


def test_a_memory_previews_as_its_content_and_json_as_json() -> None:
    memory = {"memory_id": "mem_1", "content": "Allergic to peanuts", "bindings": ["food"]}
    assert preview("memory", memory) == "Allergic to peanuts"
    assert preview("text", {"a": 1}) == '{"a": 1}'
    assert preview("text", None) is None

"""Relative date phrases resolved against the time they were said: every phrase of both
languages, reference times around week, month and year ends, and words that look like
dates but are not."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Final

import pytest

from memoria_text.relative_dates import (
    find_relative_dates,
    past_span,
    resolve_in_content,
    resolve_relative_dates,
)

FRIDAY: Final = datetime(2026, 11, 27, 15, 0, tzinfo=UTC)  # a Friday
NEW_YEARS_EVE: Final = datetime(2026, 12, 31, 23, 0, tzinfo=UTC)  # a Thursday
NEW_YEARS_DAY: Final = datetime(2027, 1, 1, 9, 0, tzinfo=UTC)  # a Friday
MONTH_END: Final = datetime(2026, 3, 31, 12, 0, tzinfo=UTC)  # a Tuesday
LEAP_DAY: Final = datetime(2028, 2, 29, 12, 0, tzinfo=UTC)  # a Tuesday
MONDAY: Final = datetime(2026, 11, 23, 8, 0, tzinfo=UTC)
SUNDAY: Final = datetime(2026, 11, 29, 20, 0, tzinfo=UTC)


def _label(text: str, said_at: datetime) -> str:
    found = find_relative_dates(text, said_at)
    assert len(found) == 1, f"{text!r}: {found}"
    return found[0].label


ENGLISH: Final[list[tuple[str, datetime, str]]] = [
    ("today", FRIDAY, "2026-11-27"),
    ("tonight", FRIDAY, "2026-11-27"),
    ("yesterday", FRIDAY, "2026-11-26"),
    ("the day before yesterday", FRIDAY, "2026-11-25"),
    ("tomorrow", FRIDAY, "2026-11-28"),
    ("the day after tomorrow", FRIDAY, "2026-11-29"),
    ("yesterday", NEW_YEARS_DAY, "2026-12-31"),
    ("tomorrow", NEW_YEARS_EVE, "2027-01-01"),
    ("the day before yesterday", NEW_YEARS_DAY, "2026-12-30"),
    ("tomorrow", LEAP_DAY, "2028-03-01"),
    ("yesterday", datetime(2028, 3, 1, tzinfo=UTC), "2028-02-29"),
    ("next Tuesday", FRIDAY, "2026-12-01"),
    ("next Friday", FRIDAY, "2026-12-04"),  # said on a Friday: the one a week on
    ("last Friday", FRIDAY, "2026-11-20"),
    ("last Monday", FRIDAY, "2026-11-23"),
    ("last Sunday", MONDAY, "2026-11-22"),
    ("this Friday", FRIDAY, "2026-11-27"),
    ("this Sunday", FRIDAY, "2026-11-29"),
    ("on Sunday", FRIDAY, "2026-11-29"),
    ("on Monday", SUNDAY, "2026-11-30"),
    ("on Friday", NEW_YEARS_EVE, "2027-01-01"),
    ("last Thursday", NEW_YEARS_DAY, "2026-12-31"),
    ("this week", FRIDAY, "week of 2026-11-23"),
    ("this week", SUNDAY, "week of 2026-11-23"),
    ("next week", FRIDAY, "week of 2026-11-30"),
    ("last week", FRIDAY, "week of 2026-11-16"),
    ("last week", MONDAY, "week of 2026-11-16"),
    ("next week", NEW_YEARS_EVE, "week of 2027-01-04"),
    ("last week", NEW_YEARS_DAY, "week of 2026-12-21"),
    ("this month", FRIDAY, "2026-11"),
    ("last month", FRIDAY, "2026-10"),
    ("next month", FRIDAY, "2026-12"),
    ("next month", NEW_YEARS_EVE, "2027-01"),
    ("last month", NEW_YEARS_DAY, "2026-12"),
    ("last month", MONTH_END, "2026-02"),
    ("this year", FRIDAY, "2026"),
    ("next year", FRIDAY, "2027"),
    ("last year", NEW_YEARS_DAY, "2026"),
    ("3 days ago", FRIDAY, "2026-11-24"),
    ("a day ago", NEW_YEARS_DAY, "2026-12-31"),
    ("2 weeks ago", FRIDAY, "2026-11-13"),
    ("two weeks ago", FRIDAY, "2026-11-13"),
    ("a month ago", MONTH_END, "2026-02"),
    ("3 months ago", NEW_YEARS_DAY, "2026-10"),
    ("ten years ago", FRIDAY, "2016"),
    ("in 5 days", FRIDAY, "2026-12-02"),
    ("in 1 day", NEW_YEARS_EVE, "2027-01-01"),
    ("in three weeks", FRIDAY, "2026-12-18"),
    ("in 2 months", NEW_YEARS_EVE, "2027-02"),
    ("in a year", FRIDAY, "2027"),
]

PORTUGUESE: Final[list[tuple[str, datetime, str]]] = [
    ("hoje", FRIDAY, "2026-11-27"),
    ("ontem", FRIDAY, "2026-11-26"),
    ("ontem", NEW_YEARS_DAY, "2026-12-31"),
    ("anteontem", FRIDAY, "2026-11-25"),
    ("antes de ontem", NEW_YEARS_DAY, "2026-12-30"),
    ("amanhã", FRIDAY, "2026-11-28"),
    ("amanha", NEW_YEARS_EVE, "2027-01-01"),
    ("depois de amanhã", FRIDAY, "2026-11-29"),
    ("sexta que vem", FRIDAY, "2026-12-04"),
    ("sexta-feira que vem", MONDAY, "2026-11-27"),
    ("na próxima sexta", FRIDAY, "2026-12-04"),
    ("próxima segunda", FRIDAY, "2026-11-30"),
    ("no próximo sábado", FRIDAY, "2026-11-28"),
    ("sexta passada", FRIDAY, "2026-11-20"),
    ("na sexta-feira passada", FRIDAY, "2026-11-20"),
    ("no domingo passado", MONDAY, "2026-11-22"),
    ("na última quarta", FRIDAY, "2026-11-25"),
    ("nesta sexta", FRIDAY, "2026-11-27"),
    ("no sábado", FRIDAY, "2026-11-28"),
    ("na terça", FRIDAY, "2026-12-01"),
    ("na segunda-feira", SUNDAY, "2026-11-30"),
    ("quinta passada", NEW_YEARS_DAY, "2026-12-31"),
    ("semana passada", FRIDAY, "semana de 2026-11-16"),
    ("na semana passada", NEW_YEARS_DAY, "semana de 2026-12-21"),
    ("semana que vem", FRIDAY, "semana de 2026-11-30"),
    ("na próxima semana", NEW_YEARS_EVE, "semana de 2027-01-04"),
    ("esta semana", SUNDAY, "semana de 2026-11-23"),
    ("mês passado", FRIDAY, "2026-10"),
    ("no mês passado", NEW_YEARS_DAY, "2026-12"),
    ("mês que vem", NEW_YEARS_EVE, "2027-01"),
    ("próximo mês", FRIDAY, "2026-12"),
    ("este mês", FRIDAY, "2026-11"),
    ("ano passado", NEW_YEARS_DAY, "2026"),
    ("ano que vem", FRIDAY, "2027"),
    ("há 3 dias", FRIDAY, "2026-11-24"),
    ("há dois dias", NEW_YEARS_DAY, "2026-12-30"),
    ("há uma semana", FRIDAY, "2026-11-20"),
    ("há 2 meses", NEW_YEARS_DAY, "2026-11"),
    ("há um ano", FRIDAY, "2025"),
    ("3 dias atrás", FRIDAY, "2026-11-24"),
    ("daqui a 2 semanas", FRIDAY, "2026-12-11"),
    ("daqui a três dias", NEW_YEARS_EVE, "2027-01-03"),
    ("dentro de 1 mês", FRIDAY, "2026-12"),
]


@pytest.mark.parametrize(("phrase", "said_at", "label"), ENGLISH)
def test_english_phrases(phrase: str, said_at: datetime, label: str) -> None:
    assert _label(phrase, said_at) == label


@pytest.mark.parametrize(("phrase", "said_at", "label"), PORTUGUESE)
def test_portuguese_phrases(phrase: str, said_at: datetime, label: str) -> None:
    assert _label(phrase, said_at) == label


def test_the_words_stay_and_the_date_follows_them() -> None:
    said = resolve_relative_dates("I moved to Porto last week", FRIDAY)
    assert said == "I moved to Porto last week (week of 2026-11-16)"
    assert resolve_relative_dates("Mudei-me para o Porto na semana passada.", FRIDAY) == (
        "Mudei-me para o Porto na semana passada (semana de 2026-11-16)."
    )


def test_case_is_kept_and_matched_loosely() -> None:
    assert resolve_relative_dates("Yesterday I ran; NEXT FRIDAY I rest", FRIDAY) == (
        "Yesterday (2026-11-26) I ran; NEXT FRIDAY (2026-12-04) I rest"
    )


def test_several_phrases_in_one_text() -> None:
    text = "I met Ana 2 weeks ago and we see each other again tomorrow"
    assert resolve_relative_dates(text, FRIDAY) == (
        "I met Ana 2 weeks ago (2026-11-13) and we see each other again tomorrow (2026-11-28)"
    )


def test_the_longest_phrase_wins() -> None:
    found = find_relative_dates("the day before yesterday", FRIDAY)
    assert [f.phrase for f in found] == ["the day before yesterday"]
    found = find_relative_dates("depois de amanhã", FRIDAY)
    assert [f.phrase for f in found] == ["depois de amanhã"]


def test_resolving_twice_changes_nothing_more() -> None:
    once = resolve_relative_dates("ontem e semana passada e next year", FRIDAY)
    assert resolve_relative_dates(once, FRIDAY + timedelta(days=40)) == once


def test_a_date_the_model_already_wrote_is_left_alone() -> None:
    text = "I moved to Porto last week (around 2026-11-18)"
    assert resolve_relative_dates(text, FRIDAY) == text


def test_the_day_is_the_day_where_it_was_said() -> None:
    # 23:30 at UTC-3 is already the 28th in UTC: the day counted is the one of the offset given.
    late = datetime(2026, 11, 27, 23, 30, tzinfo=timezone(timedelta(hours=-3)))
    assert resolve_relative_dates("tomorrow", late) == "tomorrow (2026-11-28)"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "My favourite colour is blue",
        "May I ask you something?",
        "I'm free on weekdays",
        "I play football on Sundays",
        "Março is my cat's name",
        "A minha gata chama-se Março",
        "My name is April",
        "I like sat-nav devices",
        "Foi a segunda vez que lá fui",
        "Vivo numa quinta perto de Braga",
        "A quarta parte do bolo",
        "Vou ao ginásio aos domingos",
        "I have 2 kids and 3 days off",
        "today's special is soup",
        "The next weekend is free",
        "Lastly, this weekday matters",
        "I was born on 1990-05-04",
        "We met in the last week of June",
        "It was the last year of school",
    ],
)
def test_text_without_relative_dates_is_unchanged(text: str) -> None:
    assert resolve_relative_dates(text, FRIDAY) == text


def test_json_content_has_each_string_resolved() -> None:
    content = {"event": "moved", "when": "last week", "people": ["Ana since yesterday"], "n": 3}
    assert resolve_in_content(content, FRIDAY) == {
        "event": "moved",
        "when": "last week (week of 2026-11-16)",
        "people": ["Ana since yesterday (2026-11-26)"],
        "n": 3,
    }


@pytest.mark.parametrize(
    ("text", "since", "until"),
    [
        ("what did I tell you last week?", "2026-11-16", "2026-11-23"),
        ("o que eu disse ontem?", "2026-11-26", "2026-11-27"),
        ("today", "2026-11-27", "2026-11-28"),
        ("what did I say last month", "2026-10-01", "2026-11-01"),
        ("this year", "2026-01-01", "2027-01-01"),
        ("há 3 dias", "2026-11-24", "2026-11-25"),
    ],
)
def test_a_phrase_names_a_span_from_midnight_in_the_zone_it_was_said(
    text: str, since: str, until: str
) -> None:
    lisbon_evening = datetime(2026, 11, 27, 23, 30, tzinfo=timezone(timedelta(hours=1)))
    span = past_span(text, lisbon_evening)
    assert span is not None
    assert span.since == datetime.fromisoformat(since).replace(tzinfo=lisbon_evening.tzinfo)
    assert span.until == datetime.fromisoformat(until).replace(tzinfo=lisbon_evening.tzinfo)


@pytest.mark.parametrize("text", ["what did I tell you?", "tomorrow", "next week", "in 2 days"])
def test_no_span_without_a_time_that_has_begun(text: str) -> None:
    assert past_span(text, datetime(2026, 11, 27, 15, tzinfo=UTC)) is None


def test_a_time_without_a_zone_is_utc() -> None:
    span = past_span("yesterday", datetime(2026, 11, 27, 15))
    assert span is not None
    assert span.since == datetime(2026, 11, 26, tzinfo=UTC)

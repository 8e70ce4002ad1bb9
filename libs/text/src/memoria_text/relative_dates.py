"""Relative date phrases ("last week", "ontem", "há 3 dias") resolved against the time the
user said them, so a memory keeps meaning the same a month later.

The user's words stay; the absolute date follows them in parentheses, in ISO form:
"I moved to Porto last week" said on 2026-11-27 becomes "I moved to Porto last week (week
of 2026-11-16)". ISO dates read the same in every language, sort, and are matched as words
by a later lexical search ("2026-11"); the parenthesis shows the user's own phrasing first.

Pure: no clock, no I/O. English and Portuguese, by a table of phrases (see the ADR on
relative dates for why not ``dateparser``). Only phrases that are dates without doubt are
taken: no month names ("May I ask"), no abbreviations ("sat"), no plurals ("on weekdays",
"aos domingos"), and bare Portuguese ordinals that double as weekdays ("na segunda vez")
only with "-feira".
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any, Final, Literal

from memoria_contracts.memory import MAX_BINDING_CHARS, MAX_CONTENT_CHARS, content_size

Unit = Literal["day", "week", "month", "year"]
Language = Literal["en", "pt"]
Direction = Literal[-1, 0, 1]

DAYS_PER_WEEK: Final = 7
MONTHS_PER_YEAR: Final = 12
PAST: Final[Direction] = -1
THIS: Final[Direction] = 0
FUTURE: Final[Direction] = 1

# Word boundaries that also keep "today's", "sexta-feira" and "weekdays" whole.
_START: Final = r"(?<![\w'’-])"
_END: Final = r"(?![\w'’-])"
_NOT_A_PART_OF: Final = r"(?! of\b)"
# Already followed by a date in parentheses (written by the model, or resolved before).
_ALREADY_DATED: Final = re.compile(r"\s*\([^()]{0,40}\d{4}")

WEEKDAYS_EN: Final = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
# Monday first, as date.weekday() counts. After a bare "na"/"no" ("na sexta"), the short
# forms that are also ordinals or nouns ("na segunda vez", "na quinta") need "-feira".
WEEKDAYS_PT_BARE: Final = (
    r"segunda-feira",
    r"ter[çc]a(?:-feira)?",
    r"quarta-feira",
    r"quinta-feira",
    r"sexta(?:-feira)?",
    r"s[áa]bado",
    r"domingo",
)
# With a qualifier ("que vem", "passada", "próxima") the short forms are weekdays too.
WEEKDAYS_PT_QUALIFIED: Final = (
    r"segunda(?:-feira)?",
    r"ter[çc]a(?:-feira)?",
    r"quarta(?:-feira)?",
    r"quinta(?:-feira)?",
    r"sexta(?:-feira)?",
    r"s[áa]bado",
    r"domingo",
)

NUMBER_WORDS: Final = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "um": 1,
    "uma": 1,
    "dois": 2,
    "duas": 2,
    "três": 3,
    "tres": 3,
    "quatro": 4,
    "cinco": 5,
    "seis": 6,
    "sete": 7,
    "oito": 8,
    "nove": 9,
    "dez": 10,
}
_NUMBER: Final = r"(?P<n>\d{1,3}|" + "|".join(sorted(NUMBER_WORDS, key=len, reverse=True)) + ")"
UNITS: Final[dict[str, Unit]] = {
    "day": "day",
    "days": "day",
    "week": "week",
    "weeks": "week",
    "month": "month",
    "months": "month",
    "year": "year",
    "years": "year",
    "dia": "day",
    "dias": "day",
    "semana": "week",
    "semanas": "week",
    "mês": "month",
    "mes": "month",
    "meses": "month",
    "ano": "year",
    "anos": "year",
}
_UNIT_EN: Final = r"(?P<unit>days?|weeks?|months?|years?)"
_UNIT_PT: Final = r"(?P<unit>dias?|semanas?|m[êe]s|meses|anos?)"

# Days away from the day said, for the phrases that name one day.
DAY_PHRASES: Final[tuple[tuple[str, str, int], ...]] = (
    (r"today|tonight", r"hoje", 0),
    (r"yesterday", r"ontem", -1),
    (r"the day before yesterday", r"anteontem|antes de ontem", -2),
    (r"tomorrow", r"amanh[ãa]", 1),
    (r"the day after tomorrow", r"depois de amanh[ãa]", 2),
)
# Phrases naming this, the next or the last week, month or year: (English, Portuguese, ...).
PERIOD_PHRASES: Final[tuple[tuple[str, str, Unit, Direction], ...]] = (
    (r"this week", r"n?esta semana", "week", THIS),
    (r"next week", r"(?:na )?semana que vem|(?:na )?pr[óo]xima semana", "week", FUTURE),
    (r"last week", r"(?:na )?semana passada", "week", PAST),
    (r"this month", r"n?este m[êe]s", "month", THIS),
    (r"next month", r"(?:no )?m[êe]s que vem|(?:no )?pr[óo]ximo m[êe]s", "month", FUTURE),
    (r"last month", r"(?:no )?m[êe]s passado", "month", PAST),
    (r"this year", r"n?este ano", "year", THIS),
    (r"next year", r"(?:no )?ano que vem|(?:no )?pr[óo]ximo ano", "year", FUTURE),
    (r"last year", r"(?:no )?ano passado", "year", PAST),
)
# "N units ago" / "in N units", as (language, pattern with n and unit, direction).
COUNT_PHRASES: Final[tuple[tuple[Language, str, Direction], ...]] = (
    ("en", _NUMBER + r" " + _UNIT_EN + r" ago", PAST),
    ("en", r"in " + _NUMBER + r" " + _UNIT_EN, FUTURE),
    ("pt", r"h[áa] " + _NUMBER + r" " + _UNIT_PT, PAST),
    ("pt", _NUMBER + r" " + _UNIT_PT + r" atr[áa]s", PAST),
    ("pt", r"daqui a " + _NUMBER + r" " + _UNIT_PT, FUTURE),
    ("pt", r"dentro de " + _NUMBER + r" " + _UNIT_PT, FUTURE),
)
# Weekday phrases: (pattern around {wd}, direction, strict). THIS means the nearest one from
# the day said on (that day included); FUTURE/PAST the nearest strictly after/before it.
# A bare "on Friday" is taken as the coming one: plans are what a date most often qualifies.
WEEKDAY_PHRASES_EN: Final[tuple[tuple[str, Direction], ...]] = (
    (r"next {wd}", FUTURE),
    (r"last {wd}", PAST),
    (r"this {wd}", THIS),
    (r"on {wd}", FUTURE),
)
WEEKDAY_PHRASES_PT_QUALIFIED: Final[tuple[tuple[str, Direction], ...]] = (
    (r"(?:n[ao] )?pr[óo]xim[ao] {wd}", FUTURE),
    (r"(?:n[ao] )?{wd} que vem", FUTURE),
    (r"(?:n[ao] )?{wd} passad[ao]", PAST),
    (r"(?:n[ao] )?[úu]ltim[ao] {wd}", PAST),
    (r"n?est[ae] {wd}", THIS),
)
WEEKDAY_PHRASES_PT_BARE: Final[tuple[tuple[str, Direction], ...]] = ((r"n[ao] {wd}", FUTURE),)

WEEK_OF: Final[dict[Language, str]] = {"en": "week of", "pt": "semana de"}


@dataclass(frozen=True)
class ResolvedDate:
    """One relative phrase found in a text, and the absolute date it names."""

    start: int
    end: int
    phrase: str
    unit: Unit
    day: date
    """The day named; for a week its Monday, for a month its first day."""
    language: Language

    @property
    def label(self) -> str:
        if self.unit == "week":
            return f"{WEEK_OF[self.language]} {self.day.isoformat()}"
        if self.unit == "month":
            return f"{self.day.year:04d}-{self.day.month:02d}"
        if self.unit == "year":
            return f"{self.day.year:04d}"
        return self.day.isoformat()


Resolve = Callable[["re.Match[str]", date], tuple[Unit, date]]


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str]
    language: Language
    resolve: Resolve


def _shift_months(day: date, months: int) -> date:
    index = day.year * MONTHS_PER_YEAR + (day.month - 1) + months
    return date(index // MONTHS_PER_YEAR, index % MONTHS_PER_YEAR + 1, 1)


def _monday(day: date) -> date:
    return day - timedelta(days=day.weekday())


def _period(unit: Unit, direction: int, said: date) -> tuple[Unit, date]:
    if unit == "week":
        return unit, _monday(said) + timedelta(weeks=direction)
    if unit == "month":
        return unit, _shift_months(said, direction)
    return unit, date(said.year + direction, 1, 1)


def _count(direction: Direction) -> Resolve:
    def resolve(match: re.Match[str], said: date) -> tuple[Unit, date]:
        raw = match.group("n").lower()
        n = int(raw) if raw.isdigit() else NUMBER_WORDS[raw]
        unit = UNITS[match.group("unit").lower()]
        steps = n * direction
        if unit == "day":
            return "day", said + timedelta(days=steps)
        if unit == "week":
            return "day", said + timedelta(weeks=steps)
        if unit == "month":
            return "month", _shift_months(said, steps)
        return "year", date(said.year + steps, 1, 1)

    return resolve


def _weekday(target: int, direction: Direction) -> Resolve:
    def resolve(_match: re.Match[str], said: date) -> tuple[Unit, date]:
        ahead = (target - said.weekday()) % DAYS_PER_WEEK
        if direction == PAST:
            behind = (said.weekday() - target) % DAYS_PER_WEEK or DAYS_PER_WEEK
            return "day", said - timedelta(days=behind)
        if direction == FUTURE and ahead == 0:
            ahead = DAYS_PER_WEEK
        return "day", said + timedelta(days=ahead)

    return resolve


def _fixed(days: int) -> Resolve:
    return lambda _match, said: ("day", said + timedelta(days=days))


def _periodic(unit: Unit, direction: Direction) -> Resolve:
    return lambda _match, said: _period(unit, direction, said)


def _compile(pattern: str) -> re.Pattern[str]:
    return re.compile(_START + "(?:" + pattern + ")" + _END, re.IGNORECASE)


def _rules() -> list[_Rule]:
    rules: list[_Rule] = []
    for english, portuguese, days in DAY_PHRASES:
        rules.append(_Rule(_compile(english), "en", _fixed(days)))
        rules.append(_Rule(_compile(portuguese), "pt", _fixed(days)))
    for english, portuguese, unit, direction in PERIOD_PHRASES:
        # "the last week of June" names a week of June, not the one before this.
        english_period = english + _NOT_A_PART_OF
        rules.append(_Rule(_compile(english_period), "en", _periodic(unit, direction)))
        rules.append(_Rule(_compile(portuguese), "pt", _periodic(unit, direction)))
    for language, pattern, direction in COUNT_PHRASES:
        rules.append(_Rule(_compile(pattern), language, _count(direction)))
    for index, name in enumerate(WEEKDAYS_EN):
        for pattern, direction in WEEKDAY_PHRASES_EN:
            compiled = _compile(pattern.format(wd=name))
            rules.append(_Rule(compiled, "en", _weekday(index, direction)))
    for index, name in enumerate(WEEKDAYS_PT_QUALIFIED):
        for pattern, direction in WEEKDAY_PHRASES_PT_QUALIFIED:
            compiled = _compile(pattern.format(wd=name))
            rules.append(_Rule(compiled, "pt", _weekday(index, direction)))
    for index, name in enumerate(WEEKDAYS_PT_BARE):
        for pattern, direction in WEEKDAY_PHRASES_PT_BARE:
            compiled = _compile(pattern.format(wd=name))
            rules.append(_Rule(compiled, "pt", _weekday(index, direction)))
    return rules


_RULES: Final = _rules()


def find_relative_dates(text: str, said_at: datetime) -> list[ResolvedDate]:
    """The relative date phrases of ``text`` not already followed by a date, in order, the
    longest where two overlap ("the day before yesterday", not "yesterday")."""
    said = said_at.date()
    found: list[tuple[re.Match[str], _Rule]] = [
        (match, rule) for rule in _RULES for match in rule.pattern.finditer(text)
    ]
    found.sort(key=lambda item: (item[0].start(), -(item[0].end() - item[0].start())))
    resolved: list[ResolvedDate] = []
    taken_until = 0
    for match, rule in found:
        if match.start() < taken_until:
            continue
        taken_until = match.end()
        if _ALREADY_DATED.match(text, match.end()):
            continue
        unit, day = rule.resolve(match, said)
        resolved.append(
            ResolvedDate(match.start(), match.end(), match.group(0), unit, day, rule.language)
        )
    return resolved


def resolve_relative_dates(text: str, said_at: datetime) -> str:
    """``text`` with each relative date phrase followed by the absolute date it names, as
    seen from ``said_at`` (the time the user said it). Text without one comes back as is."""
    parts: list[str] = []
    position = 0
    for found in find_relative_dates(text, said_at):
        parts.append(text[position : found.end])
        parts.append(f" ({found.label})")
        position = found.end
    parts.append(text[position:])
    return "".join(parts)


_DATE_SUFFIX: Final = re.compile(r"\s*\([^()]{0,40}\d{4}[^()]{0,20}\)")


def without_resolved_dates(text: str) -> str:
    """``text`` without the dates in parentheses that resolving added ("last month
    (2026-10)" is "last month"): what a fact says, whatever day it was told on."""
    return _DATE_SUFFIX.sub("", text)


def resolve_in_content(content: Any, said_at: datetime) -> Any:
    """The same for a memory's content: a text, or every string inside a JSON value. Content
    the dates would make longer than a memory may be is kept as it was."""
    resolved = _resolve_strings(content, said_at)
    return resolved if content_size(resolved) <= MAX_CONTENT_CHARS else content


def _resolve_strings(content: Any, said_at: datetime) -> Any:
    if isinstance(content, str):
        return resolve_relative_dates(content, said_at)
    if isinstance(content, list):
        return [_resolve_strings(item, said_at) for item in content]
    if isinstance(content, dict):
        return {key: _resolve_strings(value, said_at) for key, value in content.items()}
    return content


def resolve_in_bindings(bindings: list[str], said_at: datetime) -> list[str]:
    """The same for a memory's search keys, each kept as it was where the dates would make
    it longer than a binding may be; a key that turns into another one is kept once."""
    resolved = [resolve_relative_dates(binding, said_at) for binding in bindings]
    fitting = [
        new if len(new) <= MAX_BINDING_CHARS else old
        for old, new in zip(bindings, resolved, strict=True)
    ]
    return list(dict.fromkeys(fitting))


def said_on(said_at: datetime) -> str:
    """The day of ``said_at`` as a prompt tells it to a model: "Friday 2026-11-27"."""
    return f"{WEEKDAYS_EN[said_at.weekday()].capitalize()} {said_at.date().isoformat()}"


@dataclass(frozen=True)
class TimeSpan:
    """The time a relative date phrase names, as a search window: ``since`` inclusive,
    ``until`` exclusive, from midnight in the zone the phrase was said in."""

    since: datetime
    until: datetime
    found: ResolvedDate


def _span_end(found: ResolvedDate) -> date:
    if found.unit == "week":
        return found.day + timedelta(weeks=1)
    if found.unit == "month":
        return _shift_months(found.day, 1)
    if found.unit == "year":
        return date(found.day.year + 1, 1, 1)
    return found.day + timedelta(days=1)


def past_span(text: str, said_at: datetime) -> TimeSpan | None:
    """The span of the first phrase of ``text`` naming a day, week, month or year that has
    begun by ``said_at`` ("yesterday", "last week", "esta semana", "há 3 dias"): what "what
    did I tell you last week?" asks about. None when the text names no such time (a
    future one is nothing told yet). A time without a zone is UTC."""
    zone = said_at.tzinfo or UTC
    for found in find_relative_dates(text, said_at):
        if found.day > said_at.date():
            continue
        since = datetime.combine(found.day, time(), zone)
        return TimeSpan(since, datetime.combine(_span_end(found), time(), zone), found)
    return None

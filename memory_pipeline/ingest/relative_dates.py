"""Relative times in what someone said ("yesterday", "two months ago", 先週) as the dates they
mean, resolved against when it was said.

Deterministic and conservative: only phrases whose meaning does not depend on anything
but the day they were said are resolved; "on Friday" or "recently" are left alone. The
result is for the index (a turn that says "yesterday" becomes findable by the date), never
shown as if the speaker had said it.

Each phrase means a :class:`Period` (a day, a week, a weekend, a month, a year), written
out in the phrase's language for the index. A question is read with the same vocabulary
plus absolute times ("in May 2023", 2023年5月: :func:`periods_named`), against the
search's reference date, so a search can prefer what was said near the time it names.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
_NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
    "a couple of": 2, "couple of": 2, "a couple": 2,
}  # fmt: skip
_NUMBER = r"(\d{1,3}|" + "|".join(sorted(map(re.escape, _NUMBERS), key=len, reverse=True)) + ")"
_UNITS = r"(day|week|month|year)s?"


class Span(StrEnum):
    DAY = "day"
    WEEK = "week"  # Monday to Sunday
    WEEKEND = "weekend"  # Saturday and Sunday
    MONTH = "month"
    YEAR = "year"


@dataclass(frozen=True)
class Period:
    """A stretch of days a phrase means: its span and its first day."""

    span: Span
    start: dt.date

    @property
    def end(self) -> dt.date:
        """Its last day (inclusive)."""
        if self.span is Span.DAY:
            return self.start
        if self.span is Span.WEEK:
            return self.start + dt.timedelta(days=6)
        if self.span is Span.WEEKEND:
            return self.start + dt.timedelta(days=1)
        if self.span is Span.MONTH:
            year, month = _shift_month(self.start, 1)
            return dt.date(year, month, 1) - dt.timedelta(days=1)
        return dt.date(self.start.year, 12, 31)

    @property
    def days(self) -> int:
        return (self.end - self.start).days + 1

    def text(self, lang: str) -> str:
        """How the index writes it: ``the week of 1 May 2023``, ``2023年5月1日の週``."""
        d = self.start
        if lang == "ja":
            return {
                Span.DAY: _ja_day(d),
                Span.WEEK: f"{_ja_day(d)}の週",
                Span.WEEKEND: f"{_ja_day(d)}の週末",
                Span.MONTH: f"{d.year}年{d.month}月",
                Span.YEAR: f"{d.year}年",
            }[self.span]
        return {
            Span.DAY: day_text(d),
            Span.WEEK: f"the week of {day_text(d)}",
            Span.WEEKEND: f"the weekend of {day_text(d)}",
            Span.MONTH: _month(d.year, d.month),
            Span.YEAR: str(d.year),
        }[self.span]


@dataclass(frozen=True)
class ResolvedDate:
    """A relative time phrase as said, and what it means (in the phrase's language)."""

    phrase: str
    means: str


def day_text(d: dt.date) -> str:
    """``7 May 2023``: how dates read in index texts."""
    return f"{d.day} {MONTHS[d.month - 1]} {d.year}"


def _month(year: int, month: int) -> str:
    return f"{MONTHS[month - 1]} {year}"


def _ja_day(d: dt.date) -> str:
    return f"{d.year}年{d.month}月{d.day}日"


def _shift_month(d: dt.date, months: int) -> tuple[int, int]:
    total = d.year * 12 + (d.month - 1) + months
    return total // 12, total % 12 + 1


def _monday(d: dt.date) -> dt.date:
    return d - dt.timedelta(days=d.weekday())


def _day(d: dt.date) -> Period:
    return Period(Span.DAY, d)


def _week(monday: dt.date) -> Period:
    return Period(Span.WEEK, monday)


def _month_period(year: int, month: int) -> Period:
    return Period(Span.MONTH, dt.date(year, month, 1))


def _year(year: int) -> Period:
    return Period(Span.YEAR, dt.date(year, 1, 1))


def _ago(n: int, unit: str, on: dt.date) -> Period:
    if unit in ("day", "日"):
        return _day(on - dt.timedelta(days=n))
    if unit in ("week", "週間", "週"):
        return _week(_monday(on - dt.timedelta(weeks=n)))
    if unit in ("year", "年"):
        return _year(on.year - n)
    return _month_period(*_shift_month(on, -n))


def _count(word: str) -> int | None:
    word = " ".join(word.lower().split())
    if word.isdigit():
        return int(word)
    return _NUMBERS.get(word)


Meaning = Callable[[re.Match[str], dt.date], Period | None]
Rule = tuple[re.Pattern[str], Meaning, str]  # the pattern, what it means, its language


def _en(pattern: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w-]){pattern}(?![\w-])", re.IGNORECASE)


def _last_weekday(m: re.Match[str], on: dt.date) -> Period:
    wanted = WEEKDAYS.index(m.group(1).lower())
    back = (on.weekday() - wanted) % 7 or 7
    return _day(on - dt.timedelta(days=back))


def _relative_period(m: re.Match[str], on: dt.date) -> Period:
    which, unit = m.group(1).lower(), m.group(2).lower()
    step = {"last": -1, "this": 0, "next": 1}[which]
    if unit == "week":
        return _week(_monday(on) + dt.timedelta(weeks=step))
    if unit == "weekend":
        saturday = _monday(on) + dt.timedelta(days=5, weeks=step)
        if step == -1 and on.weekday() >= 5:  # said on a weekend: "last weekend" is the one before
            saturday = _monday(on) + dt.timedelta(days=5) - dt.timedelta(weeks=1)
        return Period(Span.WEEKEND, saturday)
    if unit == "month":
        return _month_period(*_shift_month(on, step))
    return _year(on.year + step)


def _ago_rule(m: re.Match[str], on: dt.date) -> Period | None:
    n = _count(m.group(1))
    if n is None or n > 400:
        return None
    return _ago(n, m.group(2).lower(), on)


def _ja_count(text: str) -> int:
    return int(text.translate(str.maketrans("０１２３４５６７８９", "0123456789")))


def _ja_ago(m: re.Match[str], on: dt.date) -> Period:
    return _ago(_ja_count(m.group(1)), m.group(2), on)


def _ja_period(m: re.Match[str], on: dt.date) -> Period:
    step = {"先": -1, "今": 0, "来": 1}[m.group(1)]
    if m.group(2) == "週":
        return _week(_monday(on) + dt.timedelta(weeks=step))
    return _month_period(*_shift_month(on, step))


def _days(offset: int) -> Meaning:
    return lambda _m, on: _day(on + dt.timedelta(days=offset))


RULES: tuple[Rule, ...] = (
    (_en(r"the day before yesterday"), _days(-2), "en"),
    (_en(r"the day after tomorrow"), _days(2), "en"),
    (_en(r"yesterday"), _days(-1), "en"),
    (_en(r"last night"), _days(-1), "en"),
    (_en(r"today|tonight|this (?:morning|afternoon|evening)"), _days(0), "en"),
    (_en(r"tomorrow"), _days(1), "en"),
    (_en(r"last (" + "|".join(WEEKDAYS) + r")"), _last_weekday, "en"),
    (_en(r"(last|this|next) (week|weekend|month|year)"), _relative_period, "en"),
    (_en(_NUMBER + r" " + _UNITS + r" ago"), _ago_rule, "en"),
    (re.compile(r"一昨日|おととい"), _days(-2), "ja"),
    (re.compile(r"昨日|昨夜|きのう"), _days(-1), "ja"),
    (re.compile(r"今日|今朝|今夜|きょう"), _days(0), "ja"),
    (re.compile(r"明日|あした"), _days(1), "ja"),
    (re.compile(r"(先|今|来)(週|月)"), _ja_period, "ja"),
    (re.compile(r"去年|昨年"), lambda _m, on: _year(on.year - 1), "ja"),
    (re.compile(r"来年"), lambda _m, on: _year(on.year + 1), "ja"),
    (re.compile(r"([0-9０-９]{1,3})(日|週間|週|か月|ヶ月|カ月|ヵ月|年)前"), _ja_ago, "ja"),
)

_MONTH_NAME = "(" + "|".join(MONTHS) + ")"


def _month_number(name: str) -> int:
    return [m.lower() for m in MONTHS].index(name.lower()) + 1


#: Times a question may name outright. Only for reading questions: in what someone said,
#: "May 2023" already is the date it means and needs nothing added to the index.
ABSOLUTE_RULES: tuple[Rule, ...] = (
    (
        _en(r"(\d{1,2})(?:st|nd|rd|th)? (?:of )?" + _MONTH_NAME + r",? (\d{4})"),
        lambda m, _on: _day(dt.date(int(m[3]), _month_number(m[2]), int(m[1]))),
        "en",
    ),
    (
        _en(_MONTH_NAME + r" (\d{1,2})(?:st|nd|rd|th)?,? (\d{4})"),
        lambda m, _on: _day(dt.date(int(m[3]), _month_number(m[1]), int(m[2]))),
        "en",
    ),
    (
        _en(r"(\d{4})-(\d{2})-(\d{2})"),
        lambda m, _on: _day(dt.date(int(m[1]), int(m[2]), int(m[3]))),
        "en",
    ),
    (
        _en(_MONTH_NAME + r",? (?:of )?(\d{4})"),
        lambda m, _on: _month_period(int(m[2]), _month_number(m[1])),
        "en",
    ),
    (_en(r"(?:in|during) (\d{4})"), lambda m, _on: _year(int(m[1])), "en"),
    (
        re.compile(r"(\d{4})年(\d{1,2})月(\d{1,2})日"),
        lambda m, _on: _day(dt.date(int(m[1]), int(m[2]), int(m[3]))),
        "ja",
    ),
    (
        re.compile(r"(\d{4})年(\d{1,2})月"),
        lambda m, _on: _month_period(int(m[1]), int(m[2])),
        "ja",
    ),
    (re.compile(r"(\d{4})年"), lambda m, _on: _year(int(m[1])), "ja"),
)


@dataclass(frozen=True)
class _Found:
    start: int
    phrase: str
    period: Period
    lang: str


def _find(text: str, on: dt.date, rules: tuple[Rule, ...]) -> list[_Found]:
    """Each phrase the rules know (the longest where they overlap), in order; a phrase
    meaning a day off the calendar or no day at all (31 February) is left alone."""
    found: list[_Found] = []
    taken: list[tuple[int, int]] = []
    for pattern, meaning, lang in rules:
        for m in pattern.finditer(text):
            if any(m.start() < end and start < m.end() for start, end in taken):
                continue  # a longer phrase ("the day before yesterday") already has it
            try:
                period = meaning(m, on)
                if period is not None:
                    _ = period.end  # its last day must be on the calendar too
            except (OverflowError, ValueError):  # before year 1, after 9999, no such day
                continue
            if period is None:
                continue
            taken.append((m.start(), m.end()))
            found.append(_Found(m.start(), m.group(0), period, lang))
    return sorted(found, key=lambda f: f.start)


def resolve_relative_dates(text: str, said_on: dt.date) -> list[ResolvedDate]:
    """Each relative time phrase in ``text`` (first occurrence, in order) with its date."""
    out: list[ResolvedDate] = []
    seen: set[str] = set()
    for f in _find(text, said_on, RULES):
        key = f.phrase.lower()
        if key not in seen:
            seen.add(key)
            out.append(ResolvedDate(f.phrase, f.period.text(f.lang)))
    return out


def periods_named(text: str, now: dt.date) -> list[Period]:
    """The times a question names, each once, in order: relative ones ("last week", 先月)
    resolved against ``now``, absolute ones ("in May 2023", 2023年5月) as written."""
    return list(dict.fromkeys(f.period for f in _find(text, now, RULES + ABSOLUTE_RULES)))

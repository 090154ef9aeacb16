"""Relative times in what someone said ("yesterday", "two months ago", 先週) as the dates they
mean, resolved against when it was said.

Deterministic and conservative: only phrases whose meaning does not depend on anything
but the day they were said are resolved; "on Friday" or "recently" are left alone. The
result is for the index (a turn that says "yesterday" becomes findable by the date), never
shown as if the speaker had said it.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from dataclasses import dataclass

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


def _ago(n: int, unit: str, on: dt.date) -> str:
    if unit == "day":
        return day_text(on - dt.timedelta(days=n))
    if unit == "week":
        return f"the week of {day_text(_monday(on - dt.timedelta(weeks=n)))}"
    if unit == "month":
        return _month(*_shift_month(on, -n))
    return str(on.year - n)


def _count(word: str) -> int | None:
    word = " ".join(word.lower().split())
    if word.isdigit():
        return int(word)
    return _NUMBERS.get(word)


Rule = tuple[re.Pattern[str], Callable[[re.Match[str], dt.date], str | None]]


def _en(pattern: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w-]){pattern}(?![\w-])", re.IGNORECASE)


def _last_weekday(m: re.Match[str], on: dt.date) -> str:
    wanted = WEEKDAYS.index(m.group(1).lower())
    back = (on.weekday() - wanted) % 7 or 7
    return day_text(on - dt.timedelta(days=back))


def _relative_period(m: re.Match[str], on: dt.date) -> str:
    which, unit = m.group(1).lower(), m.group(2).lower()
    step = {"last": -1, "this": 0, "next": 1}[which]
    if unit == "week":
        return f"the week of {day_text(_monday(on) + dt.timedelta(weeks=step))}"
    if unit == "weekend":
        saturday = _monday(on) + dt.timedelta(days=5, weeks=step)
        if step == -1 and on.weekday() >= 5:  # said on a weekend: "last weekend" is the one before
            saturday = _monday(on) + dt.timedelta(days=5) - dt.timedelta(weeks=1)
        return f"the weekend of {day_text(saturday)}"
    if unit == "month":
        return _month(*_shift_month(on, step))
    return str(on.year + step)


def _ago_rule(m: re.Match[str], on: dt.date) -> str | None:
    n = _count(m.group(1))
    if n is None or n > 400:
        return None
    return _ago(n, m.group(2).lower(), on)


def _ja_count(text: str) -> int:
    return int(text.translate(str.maketrans("０１２３４５６７８９", "0123456789")))


def _ja_ago(m: re.Match[str], on: dt.date) -> str | None:
    n = _ja_count(m.group(1))
    unit = m.group(2)
    if unit == "日":
        return _ja_day(on - dt.timedelta(days=n))
    if unit in ("週間", "週"):
        return f"{_ja_day(_monday(on - dt.timedelta(weeks=n)))}の週"
    if unit == "年":
        return f"{on.year - n}年"
    year, month = _shift_month(on, -n)
    return f"{year}年{month}月"


def _ja_period(m: re.Match[str], on: dt.date) -> str:
    step = {"先": -1, "今": 0, "来": 1}[m.group(1)]
    if m.group(2) == "週":
        return f"{_ja_day(_monday(on) + dt.timedelta(weeks=step))}の週"
    year, month = _shift_month(on, step)
    return f"{year}年{month}月"


def _days(offset: int, fmt: Callable[[dt.date], str]) -> Callable[[re.Match[str], dt.date], str]:
    return lambda _m, on: fmt(on + dt.timedelta(days=offset))


RULES: tuple[Rule, ...] = (
    (_en(r"the day before yesterday"), _days(-2, day_text)),
    (_en(r"the day after tomorrow"), _days(2, day_text)),
    (_en(r"yesterday"), _days(-1, day_text)),
    (_en(r"last night"), _days(-1, day_text)),
    (_en(r"today|tonight|this (?:morning|afternoon|evening)"), _days(0, day_text)),
    (_en(r"tomorrow"), _days(1, day_text)),
    (_en(r"last (" + "|".join(WEEKDAYS) + r")"), _last_weekday),
    (_en(r"(last|this|next) (week|weekend|month|year)"), _relative_period),
    (_en(_NUMBER + r" " + _UNITS + r" ago"), _ago_rule),
    (re.compile(r"一昨日|おととい"), _days(-2, _ja_day)),
    (re.compile(r"昨日|昨夜|きのう"), _days(-1, _ja_day)),
    (re.compile(r"今日|今朝|今夜|きょう"), _days(0, _ja_day)),
    (re.compile(r"明日|あした"), _days(1, _ja_day)),
    (re.compile(r"(先|今|来)(週|月)"), _ja_period),
    (re.compile(r"去年|昨年"), lambda _m, on: f"{on.year - 1}年"),
    (re.compile(r"来年"), lambda _m, on: f"{on.year + 1}年"),
    (re.compile(r"([0-9０-９]{1,3})(日|週間|週|か月|ヶ月|カ月|ヵ月|年)前"), _ja_ago),
)


def resolve_relative_dates(text: str, said_on: dt.date) -> list[ResolvedDate]:
    """Each relative time phrase in ``text`` (first occurrence, in order) with its date."""
    found: list[tuple[int, int, ResolvedDate]] = []
    taken: list[tuple[int, int]] = []
    for pattern, rule in RULES:
        for m in pattern.finditer(text):
            if any(m.start() < end and start < m.end() for start, end in taken):
                continue  # a longer phrase ("the day before yesterday") already has it
            try:
                means = rule(m, said_on)
            except OverflowError:  # the date it means is off the calendar (before year 1)
                continue
            if means is None:
                continue
            taken.append((m.start(), m.end()))
            found.append((m.start(), m.end(), ResolvedDate(m.group(0), means)))
    out: list[ResolvedDate] = []
    seen: set[str] = set()
    for _, _, r in sorted(found, key=lambda f: f[0]):
        key = r.phrase.lower()
        if key not in seen:
            seen.add(key)
            out.append(r)
    return out

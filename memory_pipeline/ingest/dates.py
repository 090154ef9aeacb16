"""When a piece of knowledge was written: ``source_date`` and the rule that produced it.

Order (first that applies wins): explicit metadata, front matter ``date:``, a date
in the file name, the file's modification time. Time decay ages knowledge from
this date, so the rule is recorded next to it for audits.
"""

from __future__ import annotations

import datetime as dt
import re
from enum import StrEnum
from pathlib import Path

# 2024-05-01, 2024_05_01, 2024.05.01 or 20240501, not inside a longer number.
_NAME_DATE = re.compile(r"(?<!\d)(\d{4})[-_.]?(\d{2})[-_.]?(\d{2})(?!\d)")


class DateRule(StrEnum):
    METADATA = "metadata"
    FRONT_MATTER = "front_matter"
    FILE_NAME = "file_name"
    MTIME = "mtime"


def date_from_name(name: str) -> dt.date | None:
    """The first plausible calendar date in a file name, if any."""
    for match in _NAME_DATE.finditer(name):
        year, month, day = (int(g) for g in match.groups())
        if not 1900 <= year <= 2200:
            continue
        try:
            return dt.date(year, month, day)
        except ValueError:
            continue
    return None


def derive_source_date(
    *,
    explicit: dt.date | None,
    front_matter: dt.date | None,
    path: Path | None,
    modified_at: dt.datetime | None,
) -> tuple[dt.date | None, DateRule | None]:
    if explicit is not None:
        return explicit, DateRule.METADATA
    if front_matter is not None:
        return front_matter, DateRule.FRONT_MATTER
    if path is not None:
        named = date_from_name(path.name)
        if named is not None:
            return named, DateRule.FILE_NAME
    if modified_at is not None:
        return modified_at.date(), DateRule.MTIME
    return None, None


def date_for_existing(source: str) -> tuple[dt.date | None, DateRule | None]:
    """Re-derive a stored document's date from its source (for backfills)."""
    if source.startswith("text:"):
        return None, None
    path = Path(source)
    named = date_from_name(path.name)
    if named is not None:
        return named, DateRule.FILE_NAME
    if path.exists():
        mtime = dt.datetime.fromtimestamp(path.stat().st_mtime, tz=dt.UTC)
        return mtime.date(), DateRule.MTIME
    return None, None

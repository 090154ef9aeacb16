"""Time named in a question: how near a chunk's date is to it, and the boost that buys.

A question that names a time ("yesterday", "in May 2023", 先月; read by
``ingest.relative_dates.periods_named`` against the search's reference date) prefers
chunks dated near it. A chunk's date is when it was said (its first turn's time) or else
when it was written (``source_date``); a chunk with neither is not preferred, nor left out.

``closeness = 1`` within a period the question names; outside it, ``0.5 ** (d / n)`` for a
chunk ``d`` days from the period's nearest end, ``n`` the period's length in days (a day
off for "yesterday" halves it, a month off for "in May 2023" does). With several periods,
the nearest counts.

``score = r̂ · (1 + TIME_BOOST · closeness)``, ``r̂`` the relevance on [0, 1] as the memory
axis takes it (``scoring.normalise_relevance``; ``scoring.boosted``). Bounded (at most ``1 + TIME_BOOST`` times
the relevance), multiplicative (a chunk that does not match the words gains nothing) and
never a filter: it re-orders near-ties.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from memory_pipeline.ingest.relative_dates import Period
from memory_pipeline.types import Turn

#: The most a time named in the question multiplies a chunk's relevance by, less one.
#: Chosen before measuring (a quarter: below the 0.7 the memory axis leaves relevance).
TIME_BOOST = 0.25


def chunk_day(turns: Sequence[Turn], source_date: dt.date | None) -> dt.date | None:
    """A chunk's date: its first turn's, else its source's, else none."""
    for turn in turns:
        if turn.said_at is not None:
            return turn.said_at.date()
    return source_date


def time_closeness(day: dt.date | None, periods: Sequence[Period]) -> float:
    """How near ``day`` is to the nearest of ``periods``, on [0, 1] (module docstring)."""
    if day is None:
        return 0.0
    best = 0.0
    for p in periods:
        if p.start <= day <= p.end:
            return 1.0
        off = (p.start - day).days if day < p.start else (day - p.end).days
        best = max(best, 0.5 ** (off / p.days))
    return best

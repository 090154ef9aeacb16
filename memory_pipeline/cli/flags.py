"""Flags more than one command shares."""

from __future__ import annotations

import argparse
import datetime as dt
import math


def add_all_spaces(p: argparse.ArgumentParser, what: str) -> None:
    """``--all-spaces``: an operator's explicit choice to act beyond the bound space."""
    p.add_argument(
        "--all-spaces",
        action="store_true",
        help=f"{what} every memory space, not only the bound one (HYBRID_RAG_SPACE / --space)",
    )


def positive_int(text: str) -> int:
    """An argparse ``type``: an integer of at least 1, refused with what was given."""
    try:
        value = int(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from exc
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def iso_day(text: str) -> dt.date:
    """An argparse ``type``: a calendar day written YYYY-MM-DD, refused with what was given."""
    try:
        return dt.date.fromisoformat(text.strip())
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected a date as YYYY-MM-DD, got {text!r}") from exc


def non_negative_float(text: str) -> float:
    """An argparse ``type``: a finite number of at least 0, refused with what was given."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"expected a number of at least 0, got {text!r}")
    return value

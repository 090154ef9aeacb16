"""Flags more than one command shares."""

from __future__ import annotations

import argparse
import datetime as dt
import math
from collections.abc import Mapping
from pathlib import Path

from memory_pipeline.config import ENV_VARS, Settings, variable
from memory_pipeline.index.backends.names import BACKENDS
from memory_pipeline.locations import shown


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


def unset(value: object) -> str:
    """A setting's value as help states it: a path as ``shown``, a switch on or off, no
    names as none."""
    if isinstance(value, Path):
        return shown(value)
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, tuple):
        return ",".join(map(str, value)) or "none"
    return f"{value:g}" if isinstance(value, float) else str(value)


def setting(field: str, quoted: bool = False) -> str:
    """A setting's default as help states it: its variable, else the value the settings
    have with it unset (``Settings()``, as the environment is now: the data folder)."""
    var = variable(field)
    section, name = ENV_VARS[var]
    defaults = Settings()
    value = getattr(getattr(defaults, section) if section else defaults, name)
    text = unset(value)
    return f"{var}, else {text!r}" if quoted else f"{var}, else {text}"


def _also(others: Mapping[str, str] | None) -> str:
    return "".join(f"; {command}: {default}" for command, default in (others or {}).items())


def storage_flags(
    space_also: Mapping[str, str] | None = None, read_spaces_also: Mapping[str, str] | None = None
) -> argparse.ArgumentParser:
    """The flags every command over a memory takes (argparse's ``parents``): where the
    memory is, the model, the spaces. ``space_also`` and ``read_spaces_also`` name the
    commands whose default space or read spaces come from elsewhere, with that default
    (one help for all, so that the reference lists these flags once)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--db", help=f"SQLite file (default: {setting('db_path')})")
    common.add_argument("--index", help=f"index folder (default: {setting('index_path')})")
    common.add_argument(
        "--database-url",
        help="SQLAlchemy URL, e.g. postgresql://… "
        f"(default: {variable('database_url')}, else the SQLite file)",
    )
    common.add_argument(
        "--backend",
        choices=BACKENDS,
        help=f"where the index lives (default: {setting('backend')}); "
        "rebuild-index --backend pgvector fills a new backend from the stored vectors",
    )
    common.add_argument(
        "--model",
        help=f"embedding model name or path (default: {setting('model')}; "
        "'hashing' for a fast non-semantic test embedder)",
    )
    common.add_argument(
        "--space",
        help="memory space to write to and search "
        f"(default: {setting('space', quoted=True)}{_also(space_also)})",
    )
    common.add_argument(
        "--read-space",
        action="append",
        metavar="SPACE",
        help="another space to read as well, e.g. shared "
        f"(repeatable; default: {setting('read_spaces')}{_also(read_spaces_also)})",
    )
    return common


def given_storage(args: argparse.Namespace) -> dict[str, tuple[str, object]]:
    """What ``storage_flags`` were given, as ``Settings.with_flags`` takes them:
    ``{field: (flag, value)}``, None for a flag not given."""
    return {
        "db_path": ("--db", Path(args.db) if args.db else None),
        "index_path": ("--index", Path(args.index) if args.index else None),
        "database_url": ("--database-url", args.database_url),
        "backend": ("--backend", args.backend),
        "model": ("--model", args.model),
        "space": ("--space", args.space),
        "read_spaces": ("--read-space", tuple(args.read_space) if args.read_space else None),
    }

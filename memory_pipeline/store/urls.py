"""Database URLs and the files they name, without the database toolkit."""

from __future__ import annotations

from pathlib import Path


def sqlite_url(path: Path) -> str:
    return f"sqlite:///{path}"


def sqlite_file(url: str) -> Path | None:
    """The file of a SQLite URL (None for another database or an in-memory one)."""
    if not url.startswith("sqlite"):
        return None
    db_path = url.split("///", 1)[-1]
    return Path(db_path) if db_path and db_path != ":memory:" else None

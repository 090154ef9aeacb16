"""Where a memory lives when no setting says: one memory per user, in its data folder.

The database, the local index and the forgetting archive default to
``$XDG_DATA_HOME/memory-pipeline`` (an absolute ``XDG_DATA_HOME``; the XDG Base
Directory spec ignores a relative one), else ``~/.local/share/memory-pipeline``; the
models are cached under the XDG cache folder the same way. The defaults used to be
relative (``hybrid_rag.db`` and ``indices/`` in the folder a client started in), which
gave every project its own memory without saying so: ``settle`` finds such a memory and
keeps using it, with a one-line notice that names both places and the move. Nothing is
ever moved for the user, and no second memory is made beside the old one.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from memory_pipeline.errors import InvalidInputError

APP = "memory-pipeline"
#: The old defaults, relative to the folder a command starts in.
OLD_DB, OLD_INDEX, OLD_ARCHIVE = "hybrid_rag.db", "indices", "archive"
_SQLITE_COMPANIONS = ("-wal", "-shm")
PLACEHOLDER_HELP = (
    "an unexpanded ${…}: Claude Code expands ${VAR:-default} in .mcp.json, but other "
    "clients (MCP Inspector, Codex) pass the text as written; write an absolute path instead"
)


def _xdg(variable: str, fallback: str) -> Path:
    base = os.environ.get(variable, "")
    return Path(base) if os.path.isabs(base) else Path.home() / fallback


def data_dir() -> Path:
    """The user's memory folder (database, index, archive)."""
    return _xdg("XDG_DATA_HOME", ".local/share") / APP


#: The variable that names the database file (``Settings.db_path``'s).
DB_PATH_VARIABLE = "HYBRID_RAG_DB_PATH"
#: The folder beside the database that holds captures not yet stored.
CAPTURE_DIR = "capture"


def capture_dir(db: Path) -> Path:
    """Where the pending captures of the memory whose database is ``db`` wait: the one
    place the hook, the worker and ``Settings.capture_dir`` all take it from."""
    return Path(os.path.abspath(Path(db).expanduser())).parent / CAPTURE_DIR


def import_state(db: Path) -> Path:
    """The ledger of ``memory-pipeline import`` for the memory whose database is ``db``."""
    return capture_dir(db).parent / "import-state.json"


def db_from_env(env: Mapping[str, str]) -> Path:
    """The database file the environment configures, as ``Settings.db_path`` reads it,
    without loading the settings (the hook must start in milliseconds)."""
    raw = env.get(DB_PATH_VARIABLE, "")
    if unexpanded(raw):
        raise InvalidInputError(f"{DB_PATH_VARIABLE} is {raw!r}, {PLACEHOLDER_HELP}")
    return Path(raw).expanduser() if raw else Layout.default().db


def cache_dir() -> Path:
    """The user's cache folder (models, evaluation data sets)."""
    return _xdg("XDG_CACHE_HOME", ".cache") / APP


def unexpanded(value: object) -> bool:
    """A ``${…}`` left in a setting: a shell-style default that nobody expanded."""
    return "${" in str(value)


@dataclass(frozen=True)
class Layout:
    """Where one memory's parts are."""

    db: Path
    index: Path
    archive: Path

    @classmethod
    def default(cls) -> Layout:
        folder = data_dir()
        return cls(folder / "memory.db", folder / "indices", folder / "archive")

    @classmethod
    def old(cls, cwd: Path) -> Layout:
        return cls(cwd / OLD_DB, cwd / OLD_INDEX, cwd / OLD_ARCHIVE)


@dataclass(frozen=True)
class Settled:
    """Where the memory is: ``layout``, and the notice to print on stderr (or None)."""

    layout: Layout
    notice: str | None = None


def settle(configured: Layout, cwd: Path) -> Settled:
    """``configured`` when a setting chose the database; else the memory the old defaults
    left in ``cwd`` if there is one (with a notice), else the default folder, made here."""
    default = Layout.default()
    if configured.db != default.db:
        return Settled(configured)
    old = Layout.old(cwd)
    if not old.db.is_file():
        _make(default.db.parent)
        return Settled(configured)
    layout = Layout(
        old.db,
        old.index if configured.index == default.index else configured.index,
        old.archive if configured.archive == default.archive else configured.archive,
    )
    return Settled(layout, _notice(layout, old, default))


def _make(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InvalidInputError(
            f"cannot make the memory folder {folder} ({exc.strerror or exc}); set "
            "HYBRID_RAG_DB_PATH and HYBRID_RAG_INDEX_PATH to a folder that can be written"
        ) from exc


def _notice(used: Layout, old: Layout, new: Layout) -> str:
    where = f"memory-pipeline: using the memory the old defaults left in {old.db.parent}"
    if new.db.exists():
        return (
            f"{where} ({old.db.name}); another one is in {new.db}: set HYBRID_RAG_DB_PATH "
            "and HYBRID_RAG_INDEX_PATH to the one to keep (nothing was moved)"
        )
    moves = [(old.db, new.db)]
    moves += [(Path(f"{old.db}{s}"), Path(f"{new.db}{s}")) for s in _SQLITE_COMPANIONS]
    moves += [(old.index, new.index)] if used.index == old.index else []
    moves += [(old.archive, new.archive)] if used.archive == old.archive else []
    command = " && ".join(
        [f"mkdir -p {shlex.quote(str(new.db.parent))}"]
        + [f"mv {shlex.quote(str(a))} {shlex.quote(str(b))}" for a, b in moves if a.exists()]
    )
    return (
        f"{where}; the default is now {new.db.parent}: with no client running, move it "
        f"there with `{command}`, or set HYBRID_RAG_DB_PATH to keep it here"
    )

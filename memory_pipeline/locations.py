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
    left in ``cwd`` if there is one (with a notice), else the default folder, made here
    (with a notice when ``cwd`` is in a checkout whose ``make`` targets keep another)."""
    default = Layout.default()
    if configured.db != default.db:
        return Settled(configured)
    old = Layout.old(cwd)
    if not old.db.is_file():
        _make(default.db.parent)
        return Settled(configured, checkout_notice(cwd, default.db.parent))
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


#: The memories a checkout's ``make`` targets keep, by target, relative to the checkout.
CHECKOUT_MEMORIES = (("make run", Path("data")), ("make demo", Path("data/demo")))


@dataclass(frozen=True)
class CheckoutMemory:
    """A memory a checkout's ``make`` target keeps: ``folder`` under ``root``."""

    target: str
    root: Path
    folder: Path


def checkout_memories(cwd: Path) -> list[CheckoutMemory]:
    """The memories ``make run`` and ``make demo`` keep in the checkout that holds ``cwd``
    (the nearest folder up with the repository's ``Makefile``, ``workspace.yaml`` and
    ``memory_pipeline/``), each that holds a database."""
    for root in (cwd, *cwd.parents):
        marks = (root / "Makefile", root / "workspace.yaml", root / "memory_pipeline")
        if marks[0].is_file() and marks[1].is_file() and marks[2].is_dir():
            return [
                CheckoutMemory(target, root, root / sub)
                for target, sub in CHECKOUT_MEMORIES
                if (root / sub / "memory.db").is_file()
            ]
    return []


def checkout_notice(cwd: Path, used: Path) -> str | None:
    """The line that says which memory a command in a checkout uses, when the checkout's
    ``make`` targets keep others, and how to reach them; None outside such a checkout.

    The command keeps the user's one memory (a memory that changed with the folder a
    command starts in is what the per-user default ended); the line names the others:
    the ``make`` target that searches each, and the variables that point any command
    there."""
    ways = []
    for memory in checkout_memories(cwd):
        data = memory.folder.relative_to(memory.root)
        data_arg = "" if data == Path("data") else f" DATA={data}"
        db, index = _shown(memory.folder / "memory.db", cwd), _shown(memory.folder / "indices", cwd)
        ways.append(
            f"`{memory.target}` keeps one in {_shown(memory.folder, cwd)} "
            f"(`{_make_command(memory, cwd)} search{data_arg} Q='…'`, or any command with "
            f"HYBRID_RAG_DB_PATH={db} HYBRID_RAG_INDEX_PATH={index})"
        )
    if not ways:
        return None
    return f"memory-pipeline: this memory is your own in {used}, not this checkout's: " + (
        "; ".join(ways)
    )


def checkout_alerts_notice(cwd: Path, used: Path) -> str | None:
    """As ``checkout_notice``, for the alert log: the one ``make run``'s pipeline writes."""
    for memory in checkout_memories(cwd):
        log = memory.folder / "alerts.jsonl"
        if memory.target == "make run" and log.is_file():
            return (
                f"memory-pipeline: these are your own alerts ({used}), not those of this "
                f"checkout's `make run` pipeline: `{_make_command(memory, cwd)} alerts`, or "
                f"--log {_shown(log, cwd)}"
            )
    return None


def _make_command(memory: CheckoutMemory, cwd: Path) -> str:
    return "make" if memory.root == cwd else f"make -C {shlex.quote(str(memory.root))}"


def _shown(path: Path, cwd: Path) -> str:
    """``path`` relative to ``cwd`` when it is under it, else as it is (quoted for a shell)."""
    try:
        return shlex.quote(str(path.relative_to(cwd)))
    except ValueError:
        return shlex.quote(str(path))


def shown(path: Path) -> str:
    """A path as the user reads it: under the home folder as ``~/…`` (help, the viewer)."""
    home = Path.home()
    return f"~/{path.relative_to(home)}" if path.is_relative_to(home) else str(path)

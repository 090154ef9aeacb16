"""Memory spaces: which part of one memory a process writes to and may read.

Every document belongs to exactly one space (``default`` unless said otherwise). A
process is bound, at its entry point, to the space it writes to and the spaces it
may also read (``project-a`` reading ``shared``); the store applies the binding to
every query, so no code above it can forget it. A space the binding does not read
does not exist for that process: its ids behave like ids that were never stored.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from memory_pipeline.errors import InvalidInputError

DEFAULT_SPACE = "default"
MAX_SPACE_CHARS = 64
_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]*")
_NOT_IN_NAME = re.compile(r"[^a-z0-9_.-]+")
#: The variable that names the space a process writes to (``Settings.space``'s).
SPACE_VARIABLE = "HYBRID_RAG_SPACE"


def check_space(name: object) -> str:
    """A space name as stored: lowercase letters, digits, ``_ . -``; at most 64 characters."""
    if not isinstance(name, str) or not _NAME.fullmatch(name) or len(name) > MAX_SPACE_CHARS:
        raise InvalidInputError(
            f"space name {name!r} is not valid: use lowercase letters, digits and _ . - "
            f"(starting with a letter or digit, at most {MAX_SPACE_CHARS} characters), "
            "e.g. project-a"
        )
    return name


@dataclass(frozen=True)
class Spaces:
    """The binding of one process: where it writes, what it reads (``None``: every space,
    for an operator's explicit ``--all-spaces`` report)."""

    write: str = DEFAULT_SPACE
    read: frozenset[str] | None = frozenset({DEFAULT_SPACE})

    @classmethod
    def bound(cls, write: str = DEFAULT_SPACE, also_read: Iterable[str] = ()) -> Spaces:
        """Write to ``write``; read it and ``also_read``."""
        write = check_space(write)
        return cls(write, frozenset({write, *(check_space(s) for s in also_read)}))

    @classmethod
    def everything(cls) -> Spaces:
        """Read every space (reports across spaces); writes still go to ``default``."""
        return cls(DEFAULT_SPACE, None)

    def reads(self, space: str) -> bool:
        return self.read is None or space in self.read

    def may_write(self, space: str) -> bool:
        """Changes (forgetting, restoring) may touch ``space``: the one written to, or any
        for an all-spaces binding."""
        return self.read is None or space == self.write

    def describe(self) -> str:
        if self.read is None:
            return "every space"
        others = sorted(self.read - {self.write})
        return f"space {self.write!r}" + (f" (also reading {', '.join(others)})" if others else "")


def doc_id_in_space(content_sha256: str, space: str) -> str:
    """A document's id from the SHA-256 (hex) of its bytes and its space.

    In ``default`` it is the hash itself (so every id stored before spaces stays the
    same); elsewhere the space is hashed in, so the same file stored in two spaces is
    two documents, and deleting one never touches the other.
    """
    if space == DEFAULT_SPACE:
        return content_sha256[:32]
    return hashlib.sha256(f"{space}\x00{content_sha256}".encode()).hexdigest()[:32]


def derived_space(folder: Path) -> str:
    """A space name from a project folder's name: lowercased, other characters as ``-``.

    The space ``setup claude-code`` gives a project, and the one its captured sessions go to.
    """
    name = _NOT_IN_NAME.sub("-", folder.name.lower()).strip("-_.")[:MAX_SPACE_CHARS]
    name = name.rstrip("-_.")
    if not name:
        raise InvalidInputError(
            f"no space name can be made from the folder name {folder.name!r}; pass --space NAME"
        )
    return check_space(name)


#: The characters of a root's mark (``project_space``): hex of the SHA-256 of its path.
MARK_CHARS = 6
#: The server's name in a project's ``.mcp.json``, whose entry names the project's space:
#: the shipped subagents call its tools as ``mcp__hybrid-rag__<tool>``, so they work only
#: under this name (``setup`` writes it).
SERVER_NAME = "hybrid-rag"
MCP_FILE = ".mcp.json"
#: A repository's own settings for its spaces, at its root (``split_patterns``).
PROJECT_SETTINGS = ".memory-pipeline.toml"


@dataclass(frozen=True)
class ProjectSpace:
    """The space of the project a folder belongs to, its root, and how it was decided."""

    name: str
    root: Path
    how: str


def repository_root(folder: Path) -> Path:
    """The root of the project ``folder`` is in: the top of its git repository (for a
    linked worktree, its main repository's; a submodule is a repository of its own), or
    ``folder`` itself outside any repository. Symbolic links are resolved first, so every
    path to the same folder has the same root; a folder that no longer exists is taken
    as written."""
    start = _resolved(folder)
    found = _repository(start)
    return start if found is None else found[1]


def _repository(start: Path) -> tuple[Path, Path] | None:
    """The folder holding the ``.git`` above ``start`` (a worktree's own top) and the
    repository's root (its main repository's, for a linked worktree); None outside any."""
    for candidate in (start, *start.parents):
        dot_git = candidate / ".git"
        try:
            if dot_git.is_dir():
                return candidate, candidate
            if dot_git.is_file():
                return candidate, _main_worktree(candidate, dot_git)
        except OSError:  # a folder the user may not enter: not a repository's top
            continue
    return None


def _resolved(folder: Path) -> Path:
    try:
        return folder.expanduser().resolve()
    except (OSError, RuntimeError):  # a loop of links, a name the system refuses
        return Path(os.path.abspath(folder))


def _main_worktree(top: Path, dot_git: Path) -> Path:
    """The root for a ``.git`` file (``gitdir: …``): a linked worktree's git folder
    names its repository's common folder in ``commondir``; a submodule's does not."""
    try:
        text = dot_git.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return top
    if not text.startswith("gitdir:"):
        return top
    gitdir = (top / text.removeprefix("gitdir:").strip()).resolve()
    try:
        common = (gitdir / (gitdir / "commondir").read_text(encoding="utf-8").strip()).resolve()
    except (OSError, UnicodeDecodeError):
        return top  # a submodule, or a worktree whose repository is gone
    return common.parent if common.name == ".git" else common  # a bare repository: itself


def marked_space(root: Path) -> str:
    """``<folder name>-<mark>``: the root folder's name as ``derived_space`` makes it, and
    the first hex digits of the SHA-256 of its whole path, so ``~/work/api`` and
    ``~/oss/api`` are ``api-…`` with different marks and each name still says which
    project it is."""
    mark = hashlib.sha256(str(root).encode("utf-8", "surrogateescape")).hexdigest()
    mark = mark[:MARK_CHARS]
    try:
        name = derived_space(root)[: MAX_SPACE_CHARS - MARK_CHARS - 1].rstrip("-_.")
    except InvalidInputError:
        name = "project"
    return f"{name or 'project'}-{mark}"


def named_space(mcp_file: Path) -> str | None:
    """The space a project's ``.mcp.json`` gives this memory's server, if it names a
    valid one; anything unreadable is no name (it is the user's file, read only)."""
    import json

    try:
        data = json.loads(mcp_file.read_text(encoding="utf-8"))
        name = data["mcpServers"][SERVER_NAME]["env"][SPACE_VARIABLE]
        return check_space(name)
    except (OSError, UnicodeDecodeError, ValueError, LookupError, TypeError, InvalidInputError):
        return None


def split_patterns(root: Path) -> tuple[str, ...]:
    """The subfolder patterns the repository's ``.memory-pipeline.toml`` gives under
    ``[spaces] split`` (``["services/*", "web"]``: each folder they match, relative to
    the root, is a project of its own); none without the file. A file that cannot be
    used is refused, naming it and what to fix, rather than guessed around."""
    path = root / PROJECT_SETTINGS
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ()
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInputError(f"{path} cannot be read ({exc}); fix it or remove it") from exc
    import tomllib

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InvalidInputError(f"{path} is not valid TOML ({exc}); fix it or remove it") from exc
    split = data.get("spaces", {}).get("split", []) if isinstance(data.get("spaces"), dict) else []
    if not isinstance(split, list) or not all(
        isinstance(p, str) and p.strip("/") and ".." not in p.split("/") for p in split
    ):
        raise InvalidInputError(
            f"{path}: [spaces] split must be a list of subfolder patterns relative to the "
            'repository root, e.g. split = ["services/*", "web"]'
        )
    return tuple(p.strip("/") for p in split)


def _split_here(root: Path, folder: Path, patterns: tuple[str, ...]) -> bool:
    """Whether ``folder`` (under ``root``) is one a split pattern names, part by part."""
    if not patterns or folder == root:
        return False
    parts = folder.relative_to(root).parts
    return any(
        len(q := pattern.split("/")) == len(parts)
        and all(fnmatch.fnmatchcase(a, b) for a, b in zip(parts, q, strict=True))
        for pattern in patterns
    )


def project_space(folder: Path) -> ProjectSpace:
    """The space of the project ``folder`` is in. Walking up from ``folder`` to the top
    of its repository (``repository_root``; outside any repository, as far as a
    ``.mcp.json`` is found), the first of:

    * a ``.mcp.json`` that names a space for this memory's server (what the server Claude
      Code starts there writes to: a setup made before this rule keeps its space);
    * a subfolder the repository's ``.memory-pipeline.toml`` splits off
      (``split_patterns``): ``marked_space`` of that subfolder in the main repository, a
      project of its own;

    else ``marked_space`` of the root (the folder itself outside any repository)."""
    start = _resolved(folder)
    found = _repository(start)
    between = [start, *start.parents]
    if found is None:
        for candidate in between:
            name = named_space(candidate / MCP_FILE)
            if name is not None:
                return ProjectSpace(name, candidate, f"named in {candidate / MCP_FILE}")
        return ProjectSpace(marked_space(start), start, "the project's root")
    top, root = found
    patterns = split_patterns(top)
    for candidate in between[: between.index(top) + 1]:
        name = named_space(candidate / MCP_FILE)
        if name is not None:
            return ProjectSpace(name, root, f"named in {candidate / MCP_FILE}")
        if _split_here(top, candidate, patterns):
            split = root / candidate.relative_to(top)
            return ProjectSpace(
                marked_space(split), split, f"split off by {top / PROJECT_SETTINGS}"
            )
    return ProjectSpace(marked_space(root), root, "the project's root")

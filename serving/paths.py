"""Which files ``ingest`` may read: only those under the allowed roots.

Pure functions over paths (no I/O beyond resolving symlinks). A path is judged by
where it *really* is — symlinks resolved, ``..`` collapsed — so neither a
``../`` escape nor a link pointing out of a root gets through. The library then
opens the resolved path, not the one given, so the links are not walked a second
time. A hard link cannot be told apart from the file it links to, so a regular
file with more than one name is refused unless the operator allows hard links:
``ln outside/secret.md root/x.md`` would otherwise bring an outside file in.
Not covered: someone who can write under a root replacing a checked file by a
link between the check and the read (they could put any content there anyway).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Sequence
from pathlib import Path

from memory_pipeline.config import variable
from memory_pipeline.errors import InvalidInputError

ROOTS_ENV_VAR = variable("allowed_roots")
HARD_LINKS_ENV_VAR = variable("allow_hard_links")


class PathNotAllowedError(InvalidInputError):
    """A path resolves to somewhere outside every allowed root."""


def parse_roots(raw: str | None, cwd: Path) -> tuple[Path, ...]:
    """Allowed roots from ``HYBRID_RAG_ALLOWED_ROOTS`` (``os.pathsep``-separated).

    Unset or blank means the working directory alone. Relative entries resolve
    against ``cwd``; every root is resolved so comparisons see real locations.
    """
    entries = [e.strip() for e in (raw or "").split(os.pathsep) if e.strip()]
    if not entries:
        return (cwd.resolve(),)
    roots: list[Path] = []
    for entry in entries:
        root = Path(entry).expanduser()
        root = (root if root.is_absolute() else cwd / root).resolve()
        if not root.is_dir():
            raise InvalidInputError(
                f"{ROOTS_ENV_VAR} names {entry!r}, which is not a folder ({root}); "
                "fix the variable or create the folder"
            )
        roots.append(root)
    return tuple(dict.fromkeys(roots))


def resolve_allowed(
    raw: str, roots: Sequence[Path], cwd: Path, *, allow_hard_links: bool = False
) -> Path:
    """The real location of ``raw`` if it lies under a root; PathNotAllowedError otherwise.

    Relative paths resolve against ``cwd`` (the server's working directory).
    """
    if not raw.strip():
        raise InvalidInputError("file_paths: an entry is empty; pass a file path")
    if "\x00" in raw:
        raise InvalidInputError(f"file_paths: {raw!r} contains a NUL character")
    given = Path(raw).expanduser()
    absolute = given if given.is_absolute() else cwd / given
    real = _resolve(raw, absolute)
    listed = ", ".join(str(r) for r in roots)
    if any(real.is_relative_to(root) for root in roots):
        if not allow_hard_links and _links(real) > 1:
            raise PathNotAllowedError(
                f"file_paths: {raw!r} is a file with {_links(real)} hard links, and a hard link "
                f"may be a link to a file outside the allowed roots ({listed}), which cannot be "
                "told from here. Copy the file under an allowed root and ingest the copy, or, "
                f"if every hard link there is trusted, set {HARD_LINKS_ENV_VAR}=1 in the "
                "server's environment and restart the server"
            )
        return real
    lexical = Path(os.path.normpath(absolute))
    if any(lexical.is_relative_to(root) for root in roots):
        why = f"goes through a symlink to {real}, which is outside the allowed roots ({listed})"
    else:
        why = f"resolves to {real}, outside the allowed roots ({listed})"
    raise PathNotAllowedError(
        f"file_paths: {raw!r} {why}. Copy the file under an allowed root, or add its "
        f"folder to {ROOTS_ENV_VAR} in the server's environment and restart the server"
    )


def _resolve(raw: str, absolute: Path) -> Path:
    """``absolute`` with symlinks resolved; a loop or an unreadable path is InvalidInputError."""
    try:
        return absolute.resolve()
    except RuntimeError as exc:  # Python 3.11-3.12 report a symlink loop so
        raise _loop(raw) from exc
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # ... and 3.13 so
            raise _loop(raw) from exc
        raise InvalidInputError(
            f"file_paths: {raw!r} cannot be resolved ({exc.strerror or exc}); pass another path"
        ) from exc


def _loop(raw: str) -> InvalidInputError:
    return InvalidInputError(
        f"file_paths: {raw!r} is a symlink loop (its links lead back to themselves, never to a "
        "file); remove or fix the link, or pass the path of the file itself"
    )


def _links(path: Path) -> int:
    """How many names a regular file has; 1 for anything else or what cannot be read.

    A folder always has several (``.`` and its subfolders' ``..``); a missing or
    unreadable file is the loader's to report.
    """
    try:
        st = path.stat()
    except (OSError, ValueError):
        return 1
    return st.st_nlink if stat.S_ISREG(st.st_mode) else 1


def resolve_all(
    raws: Sequence[str], roots: Sequence[Path], cwd: Path, *, allow_hard_links: bool = False
) -> list[Path]:
    """Every path checked before any is used: one refusal refuses the whole call."""
    return [resolve_allowed(raw, roots, cwd, allow_hard_links=allow_hard_links) for raw in raws]

"""Which files ``ingest`` may read: only those under the allowed roots.

Pure functions over paths (no I/O beyond resolving symlinks). A path is judged by
where it *really* is — symlinks resolved, ``..`` collapsed — so neither a
``../`` escape nor a link pointing out of a root gets through. The library then
opens the resolved path, not the one given, so the links are not walked a second
time. Not covered: someone who can write under a root replacing a checked file
by a link between the check and the read (they could put any content there anyway).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from memory_pipeline.errors import InvalidInputError

ROOTS_ENV_VAR = "HYBRID_RAG_ALLOWED_ROOTS"


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


def resolve_allowed(raw: str, roots: Sequence[Path], cwd: Path) -> Path:
    """The real location of ``raw`` if it lies under a root; PathNotAllowedError otherwise.

    Relative paths resolve against ``cwd`` (the server's working directory).
    """
    if not raw.strip():
        raise InvalidInputError("file_paths: an entry is empty; pass a file path")
    if "\x00" in raw:
        raise InvalidInputError(f"file_paths: {raw!r} contains a NUL character")
    given = Path(raw).expanduser()
    absolute = given if given.is_absolute() else cwd / given
    real = absolute.resolve()
    if any(real.is_relative_to(root) for root in roots):
        return real
    listed = ", ".join(str(r) for r in roots)
    lexical = Path(os.path.normpath(absolute))
    if any(lexical.is_relative_to(root) for root in roots):
        why = f"goes through a symlink to {real}, which is outside the allowed roots ({listed})"
    else:
        why = f"resolves to {real}, outside the allowed roots ({listed})"
    raise PathNotAllowedError(
        f"file_paths: {raw!r} {why}. Copy the file under an allowed root, or add its "
        f"folder to {ROOTS_ENV_VAR} in the server's environment and restart the server"
    )


def resolve_all(raws: Sequence[str], roots: Sequence[Path], cwd: Path) -> list[Path]:
    """Every path checked before any is used: one refusal refuses the whole call."""
    return [resolve_allowed(raw, roots, cwd) for raw in raws]

"""Memory spaces: which part of one memory a process writes to and may read.

Every document belongs to exactly one space (``default`` unless said otherwise). A
process is bound, at its entry point, to the space it writes to and the spaces it
may also read (``project-a`` reading ``shared``); the store applies the binding to
every query, so no code above it can forget it. A space the binding does not read
does not exist for that process: its ids behave like ids that were never stored.
"""

from __future__ import annotations

import hashlib
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

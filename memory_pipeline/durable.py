"""Durable file writes: data and directory entries on disk before anything depends on them.

The one place the index versions, the BM25 index copies and the forgetting archive
get their fsyncs from, and small files rewritten whole (the sources ledger, Dagster's
instance file, the dev server's state) their atomic replacement. A rename or a new
file is durable only once its folder is fsynced too.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


def fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: Path) -> None:
    """Make a folder's entries (new files, renames, deletions) durable."""
    fsync_file(path)


def fsync_tree(path: Path) -> None:
    """Every file under ``path``, then every folder."""
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            fsync_file(Path(dirpath) / name)
        fsync_dir(Path(dirpath))


def write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` and fsync it (not its folder)."""
    with open(path, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def replace_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole: a reader sees the old file or the new one, never
    half of either, and a crash leaves one of the two. The part file is the writer's own
    (its pid), so two writers at once each replace the file with a whole one."""
    part = path.with_name(f"{path.name}.{os.getpid()}.part")
    try:
        write_bytes(part, text.encode("utf-8"))
        os.replace(part, path)
    finally:
        part.unlink(missing_ok=True)
    fsync_dir(path.parent)


def save_npy(path: Path, array: np.ndarray) -> None:
    """``np.save`` to ``path``, fsynced."""
    import numpy as np  # only here: the text writers above are imported by light modules

    with open(path, "wb") as fh:
        np.save(fh, array)
        fh.flush()
        os.fsync(fh.fileno())

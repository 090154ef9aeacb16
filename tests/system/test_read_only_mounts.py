"""Reading needs no write access (issue: capture that never stalls, item 5): search, recall,
health and stats work on a memory whose file system is mounted read-only (a backup, a
shared mount) and on a full disk, and say plainly what cannot be done (counting
accesses). Each command runs as a process in a mount namespace the test makes
(``unshare -m``): the memory's folder bound read-only, or copied onto a small tmpfs
that is then filled. Skipped with the reason where namespaces cannot be made.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from memory_pipeline.embedding.base import HashingEmbedder
from memory_pipeline.system import MemorySystem
from tests.conftest import CONSOLE_SCRIPT, make_settings

NOTES = {
    "fusion.md": "# Fusion\n\nReciprocal rank fusion adds one over k plus rank.",
    "bm25.md": "# BM25\n\nOkapi BM25 ranks documents by term frequency.",
}


def _namespaces() -> str | None:
    """Why mount namespaces cannot be made here, or None when they can."""
    if not shutil.which("unshare"):
        return "no unshare command"
    done = subprocess.run(
        ["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"],
        capture_output=True,
        text=True,
    )
    return None if done.returncode == 0 else f"unshare -m cannot mount: {done.stderr.strip()}"


pytestmark = pytest.mark.skipif(
    (why := _namespaces()) is not None, reason=f"{why} (a namespace with its own mounts)"
)


@pytest.fixture
def stored(tmp_path: Path) -> Path:
    """A memory with two notes stored and indexed, every connection closed."""
    memory = tmp_path / "memory"
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in NOTES.items():
        (docs / name).write_text(text, encoding="utf-8")
    memory.mkdir()
    settings = make_settings(memory, model="hashing")
    system = MemorySystem(settings, embedder=HashingEmbedder())
    system.ingest(sorted(docs.iterdir()))
    system.close()
    assert not (memory / "memory.db-wal").exists()
    return memory


def env_for(memory: Path, tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HYBRID_RAG_", "XDG_"))}
    return {
        **env,
        "XDG_DATA_HOME": str(tmp_path / "xdg"),
        "HYBRID_RAG_DB_PATH": str(memory / "memory.db"),
        "HYBRID_RAG_INDEX_PATH": str(memory / "indices"),
        "HYBRID_RAG_ARCHIVE_PATH": str(memory / "archive"),
        "HYBRID_RAG_EMBEDDING_MODEL": "hashing",
        "HYBRID_RAG_SPACE": "default",
    }


def tree_digest(folder: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        h.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


COMMANDS = {
    "search": (("search", "rank fusion"), "fusion"),
    "search --no-access": (("search", "rank fusion", "--no-access"), "fusion"),
    "health": (("health",), "healthy"),
    "stats": (("stats", "--json"), '"chunks": 2'),
    "recall": (("recall",), ""),
}


def in_namespace(
    setup: str, args: tuple[str, ...], env: dict[str, str], cwd: Path
) -> subprocess.CompletedProcess[str]:
    command = shlex.join([sys.executable, "-c", CONSOLE_SCRIPT, *args])
    return subprocess.run(
        ["unshare", "-m", "sh", "-c", f"{setup} && exec {command}"],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize(("args", "expect"), COMMANDS.values(), ids=list(COMMANDS))
def test_reading_works_on_a_memory_mounted_read_only(
    args: tuple[str, ...], expect: str, stored: Path, tmp_path: Path
) -> None:
    before = tree_digest(stored)
    bind = shlex.quote(str(stored))
    setup = f"mount --bind {bind} {bind} && mount -o remount,bind,ro {bind}"
    done = in_namespace(setup, args, env_for(stored, tmp_path), tmp_path)
    assert done.returncode == 0, done.stderr
    assert expect in done.stdout.lower()
    assert "Traceback" not in done.stderr and "corrupt" not in done.stderr, done.stderr
    counted = args == ("search", "rank fusion")
    assert done.stderr.count("not counted as an access") == int(counted), done.stderr
    assert tree_digest(stored) == before


@pytest.mark.parametrize(("args", "expect"), COMMANDS.values(), ids=list(COMMANDS))
def test_reading_works_on_a_full_disk(
    args: tuple[str, ...], expect: str, stored: Path, tmp_path: Path
) -> None:
    disk = tmp_path / "disk"
    disk.mkdir()
    there = shlex.quote(str(disk))
    setup = (
        f"mount -t tmpfs -o size=2m tmpfs {there} && cp -a {shlex.quote(str(stored))}/. {there}/"
        f" && {{ dd if=/dev/zero of={there}/fill bs=4k 2>/dev/null; true; }}"
        f" && test \"$(df --output=avail {there} | tail -1 | tr -d ' ')\" = 0"
    )
    done = in_namespace(setup, args, env_for(disk, tmp_path), tmp_path)
    assert done.returncode == 0, done.stderr
    assert expect in done.stdout.lower()
    assert "Traceback" not in done.stderr and "disk I/O error" not in done.stderr, done.stderr
    counted = args == ("search", "rank fusion")
    assert done.stderr.count("not counted as an access") == int(counted), done.stderr


def test_stats_on_a_read_only_mount_counts_what_the_memory_holds(
    stored: Path, tmp_path: Path
) -> None:
    bind = shlex.quote(str(stored))
    setup = f"mount --bind {bind} {bind} && mount -o remount,bind,ro {bind}"
    done = in_namespace(setup, ("stats", "--json"), env_for(stored, tmp_path), tmp_path)
    assert done.returncode == 0, done.stderr
    stats = json.loads(done.stdout)
    assert (stats["documents"], stats["index"]["n_sparse"]) == (2, 2)

"""Bad input: a clear error naming the problem, and nothing on disk changes."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memory_pipeline.errors import InvalidInputError
from memory_pipeline.system import MemorySystem


def snapshot(system: MemorySystem) -> dict[str, str]:
    """Bytes of the database (and its WAL) and every index file, hashed."""
    db = system.settings.db_path
    files = [p for p in (db, db.with_name(db.name + "-wal")) if p.exists()]
    files += [p for p in sorted(system.settings.index_path.rglob("*")) if p.is_file()]
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def _big(tmp: Path) -> Path:
    path = tmp / "huge.md"
    with open(path, "wb") as fh:
        fh.truncate(50 * 1024 * 1024)  # sparse file: 50 MB without writing 50 MB
    return path


def _file(name: str, data: bytes) -> Callable[[Path], Path]:
    def make(tmp: Path) -> Path:
        path = tmp / name
        path.write_bytes(data)
        return path

    return make


CASES: list[tuple[str, Callable[[Path], Any], dict[str, Any] | None, str]] = [
    ("missing path", lambda t: t / "nope.md", None, "no such file"),
    ("directory", lambda t: t, None, "directory"),
    ("binary", _file("bin.md", b"\x00\x01\x02PNG\x00" * 50), None, "binary"),
    (
        "invalid utf-8",
        _file("bad.txt", "caf\u00e9 ok ".encode() + b"\xff\xfe broken"),
        None,
        "UTF-8",
    ),
    ("empty", _file("empty.md", b"   \n"), None, "empty"),
    ("50 MB", _big, None, "MB"),
    ("importance 1.5", _file("ok.md", b"# ok\n\nfine text"), {"importance": 1.5}, "importance"),
    (
        "unknown type",
        _file("ok.md", b"# ok\n\nfine text"),
        {"knowledge_type": "blog"},
        "knowledge_type",
    ),
    ("tags a string", _file("ok.md", b"# ok\n\nfine text"), {"tags": "design"}, "tags"),
    ("tags not strings", _file("ok.md", b"# ok\n\nfine text"), {"tags": ["a", 3]}, "tag"),
]


@pytest.mark.parametrize(("case", "make", "metadata", "needle"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_changes_nothing(
    system: MemorySystem,
    tmp_path: Path,
    case: str,
    make: Callable[[Path], Path],
    metadata: dict[str, Any] | None,
    needle: str,
) -> None:
    good = tmp_path / "good.md"
    good.write_text("# Good\n\nA perfectly good document about memory.", encoding="utf-8")
    system.ingest([good])
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    bad = make(inputs)
    before = snapshot(system)
    with pytest.raises(InvalidInputError, match=needle) as err:
        # a good file beside the bad one must not be half-ingested either
        other = tmp_path / "other.md"
        other.write_text("# Other\n\nanother fine document", encoding="utf-8")
        system.ingest([other, bad], metadata)
    assert str(bad.name) in str(err.value) or metadata is not None
    assert snapshot(system) == before
    assert system.store.counts()["documents"] == 1

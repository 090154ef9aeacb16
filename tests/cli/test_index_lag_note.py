"""What ``search`` says about chunks the published index lacks: run ``update-index``, or,
while a pipeline's sensor watches the memory, that the pipeline takes them in."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from memory_pipeline.index import watcher
from tests.cli.test_memory_location import cli


def notes(cwd: Path, home: Path) -> list[str]:
    done = cli(cwd, home, "search", "fusion", "--db", "m/memory.db", "--index", "m/indices")
    assert done.returncode == 0, done.stderr
    return [line for line in done.stderr.splitlines() if line.startswith("note:")]


def test_the_advice_fits_who_indexes_the_chunks(tmp_path: Path) -> None:
    home, cwd = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    cwd.mkdir()
    flags = ("--db", "m/memory.db", "--index", "m/indices")
    for n, text in enumerate(("Rank fusion merges lists.", "Fusion of two rankings.")):
        (cwd / f"{n}.md").write_text(f"# Note {n}\n\n{text}\n")
        done = cli(cwd, home, "ingest", f"{n}.md", "--no-index", *flags)
        assert done.returncode == 0, done.stderr
        assert done.stderr.strip().endswith("run `memory-pipeline update-index`"), done.stderr
        [note] = notes(cwd, home)
        chunks = "1 chunk is" if n == 0 else "2 chunks are"
        assert note == (
            f"note: {chunks} not in the published index yet (scored directly); "
            "run `memory-pipeline update-index`"
        )

    index = cwd / "m" / "indices"
    # as the sensor's tick does (this process is alive); a long interval keeps the mark
    # fresh however slowly the commands below start
    watcher.mark(index, 600, 30)
    (cwd / "2.md").write_text("# Note 2\n\nA third note on fusion.\n")
    done = cli(cwd, home, "ingest", "2.md", "--no-index", *flags)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().endswith(
        "the pipeline watching this memory indexes them shortly "
        "(it looks every 600 s, once changes have been still for 30 s)"
    ), done.stderr
    [note] = notes(cwd, home)
    assert "run `memory-pipeline update-index`" not in note
    assert "the pipeline watching this memory indexes them shortly" in note
    assert "every 600 s" in note and "still for 30 s" in note

    mark = watcher.mark_path(index)
    seen = json.loads(mark.read_text())
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    for stale in ({"pid": int(gone.stdout)}, {"at": time.time() - 3 * 600 - 1}):  # stopped
        mark.write_text(json.dumps({**seen, **stale}))
        [note] = notes(cwd, home)
        assert note.endswith("run `memory-pipeline update-index`"), (stale, note)
    mark.write_text("{not json")
    [note] = notes(cwd, home)
    assert note.endswith("run `memory-pipeline update-index`")

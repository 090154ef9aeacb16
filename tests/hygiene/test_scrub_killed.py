"""``scrub --apply`` killed (SIGKILL) at many points, then run again: nothing lost, nothing
doubled, no secret left, ``health`` clean.

The points are taken from the scrub's own progress (each stage it names on stderr, then
a few moments into it), on copies of one memory filled with redaction off
(``test_scrub.fill``). What is checked holds wherever the kill lands: each file is whole
(the database opens with every chunk and document, every archive line parses and none is
missing or doubled, the waiting capture is there), and the next run finishes the work.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import time
from contextlib import closing
from pathlib import Path

import pytest

from memory_pipeline.locations import capture_dir
from serving.harness import StoreLayout
from tests.capture.helpers import command
from tests.hygiene.corpus import build
from tests.hygiene.test_no_secret_stored import leaks_in_files, leaks_in_terms
from tests.hygiene.test_scrub import fill, run_ok, scrub_json

#: (progress lines seen before the kill, then seconds): every stage, at its start and into it
STAGES = 10  # scan: chunks, documents, handed records, history, archive, capture spool;
#              apply: archive, chunks, index, database files
POINTS = [(0, 0.0), (0, 0.5)] + [(k, d) for k in range(1, STAGES + 1) for d in (0.0, 0.05, 0.3)]


def shape(layout: StoreLayout) -> tuple[list[int], list[str], list[str], list[str]]:
    """What must never be lost or doubled: chunk ids, document ids, archive keys (one per
    line, each line whole JSON), the captures waiting."""
    with closing(sqlite3.connect(layout.db)) as db:
        chunks = [r[0] for r in db.execute("SELECT id FROM chunks ORDER BY id")]
        docs = [r[0] for r in db.execute("SELECT doc_id FROM documents ORDER BY doc_id")]
    lines = (layout.archive / "chunks_archive.jsonl").read_text(encoding="utf-8").splitlines()
    keys = [f"{r['run_id']}:{r['chunk_id']}" for r in map(json.loads, filter(None, lines))]
    waiting = sorted(p.name for p in capture_dir(layout.db).glob("*.capture"))
    return chunks, docs, keys, waiting


def killed_at(env: dict[str, str], seen: int, delay: float) -> bool:
    """``scrub --apply --all-spaces`` killed once ``seen`` progress lines were printed and
    ``delay`` seconds passed; whether it was still running when killed."""
    process = subprocess.Popen(
        command("scrub", "--apply", "--all-spaces"),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    for _ in range(seen):
        if not process.stderr.readline():
            break
    time.sleep(delay)
    alive = process.poll() is None
    if alive:  # not reaped yet: the signal reaches it, or the zombie it just became
        os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=60)
    process.stderr.close()
    return alive


@pytest.mark.slow
def test_killed_at_any_point_it_loses_nothing_and_finishes_when_run_again(
    tmp_path: Path,
) -> None:
    corpus = build(tmp_path / "in")
    filled = StoreLayout(tmp_path / "filled")
    fill(filled, corpus)
    before = shape(filled)
    assert before[2] and before[3], "the test means an archive and a waiting capture"
    interrupted = 0
    for n, (seen, delay) in enumerate(POINTS):
        layout = StoreLayout(tmp_path / f"point-{n}")
        shutil.copytree(filled.root, layout.root)
        env = layout.env(HYBRID_RAG_REDACT="off")
        interrupted += killed_at(env, seen, delay)
        assert shape(layout) == before, (seen, delay)
        run_ok("scrub", "--apply", "--all-spaces", env=env)
        assert shape(layout) == before, (seen, delay)
        assert leaks_in_files(layout.root, corpus) == [], (seen, delay)
        assert leaks_in_terms(layout.index, corpus) == [], (seen, delay)
        assert scrub_json("--all-spaces", env=env)["found"] == 0
        health = json.loads(run_ok("health", "--json", env=env))
        assert health["healthy"], (seen, delay, health["findings"])
        shutil.rmtree(layout.root)
    assert len(POINTS) >= 20
    assert interrupted >= 20, f"only {interrupted} of {len(POINTS)} kills landed mid-run"

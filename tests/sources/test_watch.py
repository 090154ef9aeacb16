"""What the source roots still need brought in (``sources.watch``), without Dagster.

A real memory on a temporary SQLite file and real source roots; a "run" is a real
``plan_sync``/``apply_sync`` of the files a decision named, and the clock is passed in.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from memory_pipeline.embedding.base import HashingEmbedder
from memory_pipeline.sources import watch
from memory_pipeline.sources.ledger import open_ledger
from memory_pipeline.sources.sources_file import SourcesConfig, load_sources
from memory_pipeline.sources.status import scan
from memory_pipeline.sources.sync import apply_sync, plan_sync
from memory_pipeline.sources.watch import (
    FAILING_AFTER,
    RETRY_BASE_SECONDS,
    RETRY_MAX_SECONDS,
    Attempt,
    Decision,
    IngestRequest,
    SourceCursor,
    WatchedStore,
    backoff_seconds,
    decide,
)
from memory_pipeline.system import MemorySystem
from tests.conftest import make_settings
from tests.test_pipeline_support import Corpus, make_corpus

T0 = 1_000_000.0  # the clock of the first tick


@pytest.fixture
def corpus(tmp_path: Path) -> Corpus:
    return make_corpus(tmp_path)


@pytest.fixture
def cfg(corpus: Corpus) -> SourcesConfig:
    return load_sources(corpus.sources_file)


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[MemorySystem]:
    mem = MemorySystem(make_settings(tmp_path), embedder=HashingEmbedder())
    yield mem
    mem.close()


def tick(memory: MemorySystem, cfg: SourcesConfig, cursor: str | None, clock: float) -> Decision:
    store: WatchedStore = memory.store  # the Store satisfies the sensors' narrow view
    return decide(store, cfg, scan(cfg), cursor, clock)


def asked(decision: Decision) -> IngestRequest:
    assert decision.request is not None, decision.message
    return decision.request


def run(memory: MemorySystem, cfg: SourcesConfig, request: IngestRequest) -> None:
    """What the requested ingest run does."""
    with open_ledger(cfg.state_path) as ledger:
        plan = plan_sync(memory.store, cfg, ledger, paths=request.paths, deleted=request.removals)
        apply_sync(memory, cfg, plan, ledger)


def cursor_of(decision: Decision) -> dict[str, object]:
    data = json.loads(decision.cursor)
    assert isinstance(data, dict)
    return data


@pytest.mark.parametrize(
    ("attempts", "seconds"),
    [
        (0, 0.0),
        (1, RETRY_BASE_SECONDS),
        (2, 2 * RETRY_BASE_SECONDS),
        (3, 4 * RETRY_BASE_SECONDS),
        (6, 32 * RETRY_BASE_SECONDS),
        (7, RETRY_MAX_SECONDS),  # 64 × 30 s is past the cap
        (40, RETRY_MAX_SECONDS),
    ],
)
def test_the_backoff_doubles_up_to_its_cap(attempts: int, seconds: float) -> None:
    assert backoff_seconds(attempts) == seconds


@pytest.mark.parametrize(
    ("raw", "settled", "asked"),
    [
        (None, {}, {}),
        ("", {}, {}),
        ("{not json", {}, {}),
        ("[1, 2]", {}, {}),
        # The edge-triggered sensor's cursor (no version) said "requested": re-check all.
        (json.dumps({"files": {"/a": "1:2"}}), {}, {}),
        (
            json.dumps(
                {
                    "v": 2,
                    "files": {"/a": "1:2"},
                    "asked": {
                        "/b": {"sig": "3:4", "attempts": 2, "at": 5.0},
                        "/c": {"sig": "3:4"},  # unreadable: dropped, not fatal
                        "/d": {"sig": "3:4", "attempts": "many", "at": 5.0},
                    },
                }
            ),
            {"/a": "1:2"},
            {"/b": Attempt("3:4", 2, 5.0)},
        ),
    ],
)
def test_a_cursor_loads_what_it_can_read(
    raw: str | None, settled: dict[str, str], asked: dict[str, Attempt]
) -> None:
    cursor = SourceCursor.load(raw)
    assert (cursor.settled, cursor.asked) == (settled, asked)
    again = SourceCursor.load(cursor.dump())
    assert (again.settled, again.asked) == (settled, asked)


def test_new_files_are_asked_for_and_a_repeated_tick_asks_with_the_same_key(
    memory: MemorySystem, cfg: SourcesConfig, corpus: Corpus
) -> None:
    first = tick(memory, cfg, None, T0)
    request = asked(first)
    assert request.paths == sorted(str(f.path) for f in scan(cfg))
    assert request.removals == [] and not request.full_scan
    assert (request.changed, request.deleted, request.asked_again) == (5, 0, 0)
    assert first.message == "requesting ingest of 5 files, removal of 0" and not first.warning
    data = cursor_of(first)
    assert data["files"] == {}  # nothing is settled until the store holds it
    assert data["asked"] == {
        p: {"sig": f.signature, "attempts": 1, "at": T0}
        for p, f in ((str(f.path), f) for f in scan(cfg))
    }
    # The same tick again (e.g. repeated by the daemon) makes the same run key.
    assert asked(tick(memory, cfg, None, T0)).run_key == request.run_key


def test_files_in_the_store_are_settled_and_nothing_is_asked(
    memory: MemorySystem, cfg: SourcesConfig
) -> None:
    first = tick(memory, cfg, None, T0)
    run(memory, cfg, asked(first))
    after = tick(memory, cfg, first.cursor, T0 + 1)
    assert after.request is None
    assert after.message == "every one of 5 files under 4 roots is in the store"
    assert len(cursor_of(after)["files"]) == 5  # type: ignore[arg-type]
    assert cursor_of(after)["asked"] == {}


def test_changed_new_and_removed_files_make_one_request(
    memory: MemorySystem, cfg: SourcesConfig, corpus: Corpus
) -> None:
    first = tick(memory, cfg, None, T0)
    run(memory, cfg, asked(first))
    settled = tick(memory, cfg, first.cursor, T0 + 1)
    changed, removed, new = (
        corpus.notes / "decay.md",
        corpus.papers / "bm25.md",
        corpus.notes / "n.md",
    )
    changed.write_text(changed.read_text() + "\nmore and longer")
    removed.unlink()
    new.write_text("# New\n\nnew knowledge")
    result = tick(memory, cfg, settled.cursor, T0 + 2)
    request = asked(result)
    assert request.paths == sorted([str(changed), str(new)])
    assert request.removals == [str(removed)]
    assert (request.changed, request.deleted) == (2, 1)
    run(memory, cfg, request)
    done = tick(memory, cfg, result.cursor, T0 + 3)
    assert done.request is None
    files = cursor_of(done)["files"]
    assert isinstance(files, dict) and str(removed) not in files and str(new) in files


def test_a_run_that_did_not_bring_its_files_in_is_asked_again_after_the_backoff(
    memory: MemorySystem, cfg: SourcesConfig
) -> None:
    first = tick(memory, cfg, None, T0)  # the run is asked for and never happens
    cursor, clock = first.cursor, T0
    keys = {asked(first).run_key}
    for attempt in range(1, FAILING_AFTER + 1):
        wait = backoff_seconds(attempt)
        early = tick(memory, cfg, cursor, clock + wait - 1)
        assert early.request is None
        assert early.message.startswith("5 files not in the store after a run")
        assert "asking again in 1s" in early.message
        again = tick(memory, cfg, early.cursor, clock + wait)
        request = asked(again)
        assert request.asked_again == 5 and request.run_key not in keys
        keys.add(request.run_key)
        cursor, clock = again.cursor, clock + wait
        failing = attempt >= FAILING_AFTER
        assert bool(again.warning) == failing
    assert again.warning.startswith(f"5 files still not in after {FAILING_AFTER} or more runs: ")
    assert again.message.endswith("; " + again.warning)
    run(memory, cfg, request)  # at last it goes through
    done = tick(memory, cfg, cursor, clock)
    assert done.request is None and cursor_of(done)["asked"] == {} and not done.warning


def test_a_file_changed_during_its_backoff_is_asked_for_at_once(
    memory: MemorySystem, cfg: SourcesConfig, corpus: Corpus
) -> None:
    first = tick(memory, cfg, None, T0)
    note = corpus.notes / "fusion.md"
    note.write_text(note.read_text() + "\nedited")
    result = tick(memory, cfg, first.cursor, T0 + 1)
    assert asked(result).paths == [str(note)] and asked(result).asked_again == 0


def test_past_the_listed_limit_the_request_is_a_full_scan(
    memory: MemorySystem, cfg: SourcesConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(watch, "MAX_LISTED_PATHS", 4)
    request = asked(tick(memory, cfg, None, T0))
    assert request.full_scan and request.removals is None and request.changed == 5


def test_the_watch_logic_runs_without_dagster() -> None:
    code = (
        "import sys, memory_pipeline.sources.watch, memory_pipeline.sources.sync\n"
        "sys.exit('dagster' in sys.modules)\n"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0

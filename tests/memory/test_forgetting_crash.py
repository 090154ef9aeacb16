"""SIGKILL a real forgetting run at random points: every chunk stays live XOR archived."""

from __future__ import annotations

import random
import signal
import subprocess
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from memory_pipeline.memory.archive import archived_records
from memory_pipeline.memory.forgetting import archived_keys, restore_archived
from memory_pipeline.store import now_utc
from memory_pipeline.store.schema import Chunk, ForgettingRun
from memory_pipeline.system import MemorySystem
from tests.workers import go, spawn_ready

WORKER = Path(__file__).with_name("forget_worker.py")
KILLS = 10  # kills that land inside a run (a run that printed "done" is a finish)
MAX_ROUNDS = 30
Position = tuple[str, int]


def archive_file(system: MemorySystem) -> Path:
    return system.settings.archive_path / "chunks_archive.jsonl"


def add_docs(system: MemorySystem, tmp: Path, kind: str, n: int) -> None:
    paths = []
    for i in range(n):
        path = tmp / f"{kind}_{i}.md"
        sentences = " ".join(
            f"{kind}{i} point {k}: w{(i * 31 + k * 7) % 997} w{(i * 17 + k) % 991}."
            for k in range(24)
        )
        path.write_text(f"# {kind} {i}\n\n{sentences}", encoding="utf-8")
        paths.append(path)
    meta = {"knowledge_type": kind, "source_date": "2020-01-01"}
    system.ingest(paths, meta, update_index=False)


def spawn(system: MemorySystem, now: str) -> subprocess.Popen[str]:
    s = system.settings
    return spawn_ready(WORKER, str(s.db_path), str(s.index_path), str(archive_file(system)), now)


def live_positions(system: MemorySystem) -> dict[Position, int]:
    with system.store.conn() as c:
        rows = c.execute(sa.select(Chunk.doc_id, Chunk.chunk_index, Chunk.id))
        return {(d, int(i)): int(cid) for d, i, cid in rows}


def check_live_xor_archived(system: MemorySystem, seen: set[Position]) -> tuple[int, int]:
    live = live_positions(system)
    records = list(archived_records(system.store, archive_file(system)))
    archived = [(r["doc_id"], int(r["chunk_index"])) for r in records]
    assert len(archived) == len(set(archived)), "a chunk is archived twice"
    both = set(live) & set(archived)
    assert not both, f"{len(both)} chunks are live AND archived, e.g. {sorted(both)[:3]}"
    seen |= set(live) | set(archived)
    neither = seen - set(live) - set(archived)
    assert not neither, (
        f"{len(neither)} chunks are neither live nor archived: {sorted(neither)[:3]}"
    )
    assert not {int(r["chunk_id"]) for r in records} & set(live.values())
    assert len(archived_keys(system.store, archive_file(system))) == len(records)
    return len(live), len(archived)


def run_status(system: MemorySystem) -> dict[str, str]:
    with system.store.conn() as c:
        return dict(c.execute(sa.select(ForgettingRun.run_id, ForgettingRun.status)).all())


def restore_everything(system: MemorySystem) -> None:
    runs = {r["run_id"] for r in archived_records(system.store, archive_file(system))}
    for run_id in sorted(runs):
        restore_archived(
            system.store, system.writer, archive_file(system), system.embedder, run_id=run_id
        )


@pytest.mark.slow
def test_sigkill_during_forgetting_keeps_every_chunk_live_xor_archived(
    system: MemorySystem, tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    add_docs(system, docs, "news", 160)  # old news: every chunk a candidate
    add_docs(system, docs, "principle", 160)  # never decays
    system.rebuild_index()
    now = now_utc().isoformat()
    seen: set[Position] = set()
    total, _ = check_live_xor_archived(system, seen)

    proc = spawn(system, now)  # how long a full run takes in a child (not its teardown)
    go(proc)
    assert proc.stdout is not None
    done = proc.stdout.readline().split()
    assert done[0] == "done" and proc.wait(timeout=120) == 0
    duration = float(done[-1])
    n_live, n_archived = check_live_xor_archived(system, seen)
    assert n_archived > 0 and n_live + n_archived == total
    restore_everything(system)

    rng = random.Random(20261130)
    outcomes = {"killed": 0, "finished": 0}
    phases: dict[str, int] = {}
    for _ in range(MAX_ROUNDS):
        if outcomes["killed"] >= KILLS:
            break
        runs_before = set(run_status(system))
        proc = spawn(system, now)
        go(proc)
        time.sleep(rng.uniform(0.0, duration))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert proc.stdout is not None
        done = proc.stdout.read().split()
        if done and done[0] == "done":
            outcomes["finished"] += 1
            duration = min(duration, float(done[-1]))  # aim the next kills inside the run
        else:
            outcomes["killed"] += 1
            new = {r: s for r, s in run_status(system).items() if r not in runs_before}
            phase = next(iter(new.values()), "before the run row")
            phases[phase] = phases.get(phase, 0) + 1
        n_live, n_archived = check_live_xor_archived(system, seen)
        assert n_live + n_archived == total
        # serving never returns a chunk that is no longer live, even before the next update
        live_ids = set(live_positions(system).values())
        for record in list(archived_records(system.store, archive_file(system)))[:3]:
            hits = system.query(
                record["content"], system.settings.search_request(top_k=5, record_access=False)
            ).hits
            assert {h.chunk_id for h in hits} <= live_ids
        restore_everything(system)
        assert check_live_xor_archived(system, seen) == (total, 0)
    assert outcomes["killed"] >= KILLS, (outcomes, phases)
    print(f"forgetting crash test: {outcomes}, killed in phase {phases}")

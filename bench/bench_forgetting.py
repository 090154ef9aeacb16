"""Forgetting benchmark: dry run over 100k chunks, a real run archiving ~10k, their restore.

Run by hand: ``.venv/bin/python bench/bench_forgetting.py``. Chunks are inserted
directly (``bench_core.fill``: synthetic text, random vectors, no model), then
their knowledge types, ages and importance are varied so about a tenth of them
are forgetting candidates under the default memory parameters.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_core import RandomEmbedder, fill

from memory_pipeline.config import Settings
from memory_pipeline.memory.forgetting import restore_archived, run_forgetting_batch
from memory_pipeline.memory.scoring import DEFAULT_HALF_LIVES, MemoryParams
from memory_pipeline.store import now_utc
from memory_pipeline.store.schema import Chunk
from memory_pipeline.system import MemorySystem

KINDS = ["principle", "paper", "news", "experiment"]
KIND_P = [0.25, 0.35, 0.25, 0.15]


def vary(system: MemorySystem, now: dt.datetime, old_share: float, cut_share: float) -> None:
    """Knowledge types, source dates and a few low importances, chunk by chunk."""
    ids = system.store.all_ids()
    rng = np.random.default_rng(7)
    kinds = rng.choice(len(KINDS), size=len(ids), p=KIND_P)
    old = rng.random(len(ids)) < old_share
    cut = rng.random(len(ids)) < cut_share
    rows = []
    for cid, k, is_old, is_cut in zip(ids.tolist(), kinds, old, cut, strict=True):
        kind = KINDS[k]
        half_life = DEFAULT_HALF_LIVES[kind] or 365.0
        # old: 3–6 half-lives (memory value ≤ 0.2·0.125 < 0.05); young: under 1.5
        lives = rng.uniform(3, 6) if is_old else rng.uniform(0, 1.5)
        born = (now - dt.timedelta(days=lives * half_life)).date()
        rows.append({"cid": cid, "kt": kind, "sd": born, "imp": 0.05 if is_cut else None})
    stmt = (
        sa.update(Chunk.__table__)  # type: ignore[arg-type]
        .where(Chunk.__table__.c.id == sa.bindparam("cid"))
        .values(
            knowledge_type=sa.bindparam("kt"),
            source_date=sa.bindparam("sd"),
            importance=sa.bindparam("imp"),
        )
    )
    with system.store.write() as s:
        for start in range(0, len(rows), 20_000):
            s.connection().execute(stmt, rows[start : start + 20_000])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--old-share", type=float, default=0.12)
    parser.add_argument("--cut-share", type=float, default=0.01)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mp-bench-forget-") as tmp:
        root = Path(tmp)
        settings = Settings(
            db_path=root / "m.db", index_path=root / "idx", archive_path=root / "archive",
            model_cache=root,
        )  # fmt: skip
        system = MemorySystem(settings, embedder=RandomEmbedder())
        now = now_utc()
        started = time.perf_counter()
        fill(system, args.chunks, seed=1, prefix="doc")
        vary(system, now, args.old_share, args.cut_share)
        print(
            f"setup: {args.chunks} chunks inserted and varied in {time.perf_counter() - started:.1f}s"
        )
        started = time.perf_counter()
        system.rebuild_index()
        print(f"setup: index built in {time.perf_counter() - started:.1f}s")

        params = MemoryParams(importance_threshold=0.1)
        path = settings.archive_path / "chunks_archive.jsonl"
        call = (system.store, system.writer, path, system.embedder, params)
        started = time.perf_counter()
        dry = run_forgetting_batch(*call, dry_run=True, now=now)
        dry_s = time.perf_counter() - started
        print(dry.render())
        print(
            f"\nforgetting dry run over {dry.live_chunks} chunks: {dry_s:.2f}s "
            f"({dry.candidates} candidates)"
        )

        started = time.perf_counter()
        real = run_forgetting_batch(*call, dry_run=False, force=dry.refused, now=now)
        real_s = time.perf_counter() - started
        size_mb = path.stat().st_size / 2**20
        phases = ", ".join(f"{k} {v:.2f}s" for k, v in real.timings_s.items())
        print(
            f"forgetting real run archiving {real.archived} of {real.live_chunks}: {real_s:.2f}s "
            f"[{phases}]; archive {size_mb:.1f} MB"
        )

        started = time.perf_counter()
        back = restore_archived(*call[:4], run_id=real.run_id)
        restore_s = time.perf_counter() - started
        print(
            f"restore of {back.restored} chunks (run {real.run_id}): {restore_s:.2f}s "
            f"({back.reused_vectors} vectors reused, {back.reembedded} re-embedded, "
            f"index version {back.index_version})"
        )
        assert system.store.counts()["chunks"] == args.chunks
        system.close()


if __name__ == "__main__":
    main()

"""Child process for the forgetting crash test: one real forgetting run, killable at any point."""

from __future__ import annotations

import datetime as dt
import sys
import time
from pathlib import Path

from memory_pipeline.config import Settings
from memory_pipeline.embedding.base import HashingEmbedder
from memory_pipeline.memory.forgetting import run_forgetting_batch
from memory_pipeline.memory.scoring import MemoryParams
from memory_pipeline.system import MemorySystem


def main() -> None:
    db, index, archive, now = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4]
    settings = Settings(db_path=db, index_path=index, archive_path=archive.parent)
    system = MemorySystem(settings, embedder=HashingEmbedder())
    print("ready", flush=True)
    sys.stdin.readline()  # the parent starts its clock when it releases us
    started = time.perf_counter()
    report = run_forgetting_batch(
        system.store,
        system.writer,
        archive,
        system.embedder,
        MemoryParams(),
        dry_run=False,
        force=True,
        now=dt.datetime.fromisoformat(now),
        grace_days=0,
    )
    print(f"done {report.run_id} {report.archived} {time.perf_counter() - started:.4f}", flush=True)


if __name__ == "__main__":
    main()

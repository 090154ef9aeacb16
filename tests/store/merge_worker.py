"""Child process for the space-merge crash test: one real merge, killable at any point."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from memory_pipeline.config import Settings
from memory_pipeline.embedding.base import HashingEmbedder
from memory_pipeline.system import MemorySystem


def main() -> None:
    db, index, archive, old, new = sys.argv[1:6]
    settings = Settings(db_path=Path(db), index_path=Path(index), archive_path=Path(archive))
    system = MemorySystem(settings, embedder=HashingEmbedder())
    print("ready", flush=True)
    sys.stdin.readline()  # the parent starts its clock when it releases us
    started = time.perf_counter()
    report = system.merge_spaces(old, new, apply=True)
    if not (report.documents or report.archived or report.redactions):
        print("nothing", flush=True)  # an earlier run had finished it
        return
    print(f"done {time.perf_counter() - started:.4f}", flush=True)


if __name__ == "__main__":
    main()

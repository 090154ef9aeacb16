"""Child process for the crash-safety test: one index update, killable at any point."""

from __future__ import annotations

import sys
from pathlib import Path

from memory_pipeline.config import Settings
from memory_pipeline.embedding.base import HashingEmbedder
from memory_pipeline.system import MemorySystem


def main() -> None:
    db, index, action = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    system = MemorySystem(Settings(db_path=db, index_path=index), embedder=HashingEmbedder())
    print("ready", flush=True)
    sys.stdin.readline()  # the parent starts its clock when it releases us
    if action == "update":
        system.update_index()
    else:
        system.rebuild_index()
    print("done", flush=True)


if __name__ == "__main__":
    main()

"""This project storing a LoCoMo file, as ``memory-pipeline import transcript`` does:
each session through ``MemorySystem.ingest_loaded`` (one chunk per turn, indexed with
its context), then one index update. Model and runtime come from the environment
(``HYBRID_RAG_EMBEDDING_MODEL``, ``HYBRID_RAG_EMBEDDING_RUNTIME``), the memory from
``HYBRID_RAG_DB_PATH`` / ``HYBRID_RAG_INDEX_PATH``.

    python bench/peers/this_project.py LOCOMO_FILE
"""

from __future__ import annotations

import sys
from pathlib import Path

from _timing import report, timed


def load() -> object:
    from memory_pipeline.config import Settings
    from memory_pipeline.embedding.registry import embedder_for

    embedder = embedder_for(Settings.from_env().embedding, progress=False)
    embedder.embed_documents(["warm up the model"])
    return embedder


def main(path: Path) -> None:
    embedder, *load_times = timed(load)
    from memory_pipeline.config import Settings
    from memory_pipeline.sources.transcripts import parse_transcript
    from memory_pipeline.system import MemorySystem

    system = MemorySystem(Settings.from_env(), embedder=embedder, progress=False)  # type: ignore[arg-type]

    def ingest() -> float:
        for conv in parse_transcript(path):
            system.ingest_loaded([conv.to_loaded()], conv.metadata(), update_index=False)
        _, index_s, _ = timed(system.update_index)
        return index_s

    index_s, *ingest_times = timed(ingest)
    counts = system.counts()
    system.close()
    report(tuple(load_times), tuple(ingest_times), stored=counts["chunks"], index_s=index_s)  # type: ignore[arg-type]


if __name__ == "__main__":
    main(Path(sys.argv[1]))

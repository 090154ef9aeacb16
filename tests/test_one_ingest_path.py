"""One ingestion path: files, texts and the source sync go through ``MemorySystem.ingest_loaded``."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from memory_pipeline.embedding.base import HashingEmbedder
from memory_pipeline.ingest import loaders
from memory_pipeline.sources import status, sync
from memory_pipeline.sources.config import load_sources
from memory_pipeline.sources.ledger import open_ledger
from memory_pipeline.system import MemorySystem
from tests.conftest import make_settings
from tests.test_pipeline_support import make_corpus


def test_a_synced_file_is_read_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    corpus = make_corpus(tmp_path, conversations=False)
    memory = MemorySystem(make_settings(tmp_path), embedder=HashingEmbedder())
    reads: Counter[str] = Counter()
    real_read, real_sha = loaders._read_at_most, status.file_sha256

    def counted_read(path: Path, max_bytes: int) -> bytes:
        reads[Path(path).name] += 1
        return real_read(path, max_bytes)

    def counted_sha(path: Path) -> str:
        reads[Path(path).name] += 1
        return real_sha(path)

    monkeypatch.setattr(loaders, "_read_at_most", counted_read)
    monkeypatch.setattr(sync, "file_sha256", counted_sha)
    cfg = load_sources(corpus.sources_file)
    files = sorted(str(p) for p in [*corpus.notes.glob("*.md"), *corpus.papers.glob("*.md")])
    with open_ledger(cfg.state_path) as ledger:
        plan = sync.plan_sync(memory.store, cfg, ledger, paths=files)
        report = sync.apply_sync(memory, cfg, plan, ledger)
    assert len(report.files_done) == len(files) and not report.failed
    assert reads == Counter({Path(f).name: 1 for f in files})
    memory.close()


def test_files_and_texts_share_the_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    memory = MemorySystem(make_settings(tmp_path), embedder=HashingEmbedder())
    seen: list[str] = []
    real = MemorySystem.ingest_loaded

    def spy(self: MemorySystem, documents: Any, *args: Any, **kwargs: Any) -> Any:
        seen.extend(d.source for d in documents)
        return real(self, documents, *args, **kwargs)

    monkeypatch.setattr(MemorySystem, "ingest_loaded", spy)
    note = tmp_path / "n.md"
    note.write_text("# N\n\nlanterns", encoding="utf-8")
    memory.ingest([note])
    memory.ingest_text("harbour lights", "Harbour")
    assert seen == [str(note.resolve()), "text:Harbour"]
    memory.close()

"""One ingestion path: files, texts and the source sync go through ``Ingestor.ingest_loaded``
(``memory_pipeline/ingest/pipeline.py``), which ``MemorySystem.ingest_loaded`` delegates to."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from memory_pipeline.embedding.base import HashingEmbedder
from memory_pipeline.ingest import loaders
from memory_pipeline.ingest.pipeline import Ingestor
from memory_pipeline.sources import status, sync
from memory_pipeline.sources.ledger import open_ledger
from memory_pipeline.sources.sources_file import load_sources
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
    real = Ingestor.ingest_loaded

    def spy(self: Ingestor, documents: Any, *args: Any, **kwargs: Any) -> Any:
        seen.extend(d.source for d in documents)
        return real(self, documents, *args, **kwargs)

    monkeypatch.setattr(Ingestor, "ingest_loaded", spy)
    note = tmp_path / "n.md"
    note.write_text("# N\n\nlanterns", encoding="utf-8")
    memory.ingest([note])
    memory.ingest_text("harbour lights", "Harbour")
    assert seen == [str(note.resolve()), "text:Harbour"]
    memory.close()


class _Counting(HashingEmbedder):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[list[str]] = []

    def embed_documents(self, texts, *, progress=False):  # type: ignore[no-untyped-def]
        self.calls.append(list(texts))
        return super().embed_documents(texts, progress=progress)


def test_documents_are_embedded_together_each_text_once(tmp_path: Path) -> None:
    emb = _Counting()
    memory = MemorySystem(make_settings(tmp_path), embedder=emb)
    docs = [loaders.load_text(f"note {i} about lanterns", f"N{i}") for i in range(20)]
    docs.append(loaders.load_text("note 3 about lanterns\n", "N3 again"))  # other bytes, same chunk
    docs.append(loaders.load_text("note 4 about lanterns", "N4 again"))  # the very same bytes
    results = memory.ingest_loaded(docs, update_index=False)
    assert [r.status for r in results] == ["ingested"] * 21 + ["unchanged"]
    assert results[-1].doc_id == results[4].doc_id  # stored once
    assert len(emb.calls) == 1 and len(emb.calls[0]) == 20  # one call, each text once
    memory.close()


def test_a_document_that_cannot_be_chunked_stops_the_batch_before_any_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memory_pipeline.ingest import pipeline as ingest_pipeline

    memory = MemorySystem(make_settings(tmp_path), embedder=HashingEmbedder())
    real = ingest_pipeline.chunk_document

    def no_chunks_for_the_last(text: str, **kwargs: Any) -> Any:
        return [] if "last" in text else real(text, **kwargs)

    monkeypatch.setattr(ingest_pipeline, "chunk_document", no_chunks_for_the_last)
    docs = [loaders.load_text("first note", "A"), loaders.load_text("last note", "B")]
    with pytest.raises(Exception, match="no text to index"):
        memory.ingest_loaded(docs)
    assert memory.store.counts()["documents"] == 0
    memory.close()

"""Reports and restores that need no embedding model do not wait for one to load.

A cold model load costs seconds to tens of seconds; ``index_health`` only compares
ids, model ids and dimensions, and a restore of chunks archived with their vectors
re-uses those vectors.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_pipeline.embedding.st import MINILM_PACKAGE, SentenceTransformerEmbedder
from memory_pipeline.system import MemorySystem
from tests.conftest import make_settings


def _memory(tmp_path: Path) -> tuple[MemorySystem, SentenceTransformerEmbedder]:
    embedder = SentenceTransformerEmbedder(MINILM_PACKAGE, cache_dir=tmp_path / "models")
    return MemorySystem(make_settings(tmp_path), embedder=embedder), embedder


def test_dimension_is_read_from_the_model_folder_without_loading(tmp_path: Path) -> None:
    _, embedder = _memory(tmp_path)
    assert embedder.dim == 384
    assert embedder._model is None


def test_health_does_not_load_the_model(tmp_path: Path) -> None:
    system, embedder = _memory(tmp_path)
    report = system.index_health()
    assert report.healthy, report.render()
    assert embedder._model is None


@pytest.mark.slow
def test_restore_with_archived_vectors_does_not_load_the_model(tmp_path: Path) -> None:
    first, _ = _memory(tmp_path)
    first.ingest_text("Keep the store as the single source of truth.", "truth", {"importance": 0.1})
    first.ingest_text("Publish index versions by one atomic rename.", "rename", {"importance": 0.9})
    first.update_index()
    report = first.run_forgetting_batch(
        memory=first.settings.memory_params(importance_threshold=0.5),
        dry_run=False,
        max_fraction=1.0,
    )
    assert report.archived == 1 and report.run_id
    first.close()

    second, embedder = _memory(tmp_path)
    restored = second.restore_archived(run_id=report.run_id)
    assert restored.restored == 1 and restored.reused_vectors == 1 and restored.reembedded == 0
    assert second.index_health().healthy
    assert embedder._model is None

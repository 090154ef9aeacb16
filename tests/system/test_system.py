"""MemorySystem end to end on a real SQLite file and real index files."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import numpy as np
import pytest

from memory_pipeline.config import Settings
from memory_pipeline.embedding.base import HashingEmbedder
from memory_pipeline.errors import InvalidInputError, ModelMismatchError, NotFoundError
from memory_pipeline.index.backends.local.reader import IndexReader
from memory_pipeline.search.params import SearchRequest
from memory_pipeline.system import MemorySystem
from memory_pipeline.types import SearchFilters
from tests.conftest import make_settings

TOPICS = {
    "faiss.md": "# FAISS\n\nFAISS inner product search over normalised vectors is exact in flat mode.",
    "bm25.md": "# BM25\n\nOkapi BM25 ranks documents by term frequency and inverse document frequency.",
    "decay.md": "# Decay\n\nNews knowledge decays with a half-life of weeks while principles never decay.",
    "jp.md": "# 日本語\n\n検索エンジンは文書を索引して高速に検索する。形態素解析は不要で文字バイグラムを使う。",
}


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / "docs" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def corpus(tmp_path: Path) -> list[Path]:
    return [write(tmp_path, name, text) for name, text in TOPICS.items()]


def top_doc(system: MemorySystem, query: str) -> str:
    hits = system.query(query, system.settings.search_request(top_k=1, record_access=False)).hits
    return hits[0].content if hits else ""


def test_ingest_search_and_reingest_noop(system: MemorySystem, corpus: list[Path]) -> None:
    results = system.ingest(corpus, {"knowledge_type": "paper", "tags": ["demo"]})
    assert {r.status for r in results} == {"ingested"}
    assert "BM25" in top_doc(system, "inverse document frequency")
    assert "文字バイグラム" in top_doc(system, "文字バイグラム")
    again = system.ingest(corpus[:1])
    assert again[0].status == "unchanged" and "nothing to do" in again[0].message
    hit = system.query("half-life of news", system.settings.search_request(top_k=1)).hits[0]
    assert hit.knowledge_type == "paper" and hit.tags == ["demo"]
    assert set(hit.stage_scores) >= {"dense", "sparse", "fused"}


def test_unindexed_chunks_are_searchable_and_deleted_never_returned(
    system: MemorySystem, corpus: list[Path], tmp_path: Path
) -> None:
    system.ingest(corpus)
    version = system.reader.current()
    assert version is not None
    fresh = write(tmp_path, "fresh.md", "# Zebra\n\nZebra stripes confuse biting flies.")
    system.ingest([fresh], update_index=False)
    result = system.query("zebra stripes flies", system.settings.search_request(top_k=3))
    assert "Zebra" in result.hits[0].content
    assert result.stats.unindexed_searched >= 1
    assert system.reader.current().manifest.version == version.manifest.version  # type: ignore[union-attr]

    doc_id = result.hits[0].doc_id
    bm25_doc = system.query("Okapi BM25", system.settings.search_request(top_k=1)).hits[0].doc_id
    system.delete_document(bm25_doc)  # deleted but still in the published index
    res = system.query(
        "Okapi BM25 term frequency", system.settings.search_request(top_k=5, record_access=False)
    )
    assert all(h.doc_id != bm25_doc for h in res.hits)
    assert res.stats.orphan_index_entries >= 1
    system.delete_document(doc_id)
    assert all(
        h.doc_id != doc_id
        for h in system.query("zebra", system.settings.search_request(top_k=5)).hits
    )

    upd = system.update_index()
    assert upd.kind == "update" and upd.removed >= 1
    res = system.query(
        "Okapi BM25 term frequency", system.settings.search_request(top_k=5, record_access=False)
    )
    assert res.stats.orphan_index_entries == 0


def test_update_is_incremental_and_rebuild_reuses_vectors(
    system: MemorySystem, corpus: list[Path], tmp_path: Path
) -> None:
    system.ingest(corpus[:2])
    first = system.reader.current()
    assert first is not None and len(first.segments) == 1
    system.ingest(corpus[2:])
    second = system.reader.current()
    assert second is not None and second.manifest.version == first.manifest.version + 1
    assert len(second.segments) == 2
    # the old segment is shared (same inode), not copied
    a = first.path / "dense" / f"{first.segments[0].name}.vecs.npy"
    b = second.path / "dense" / f"{first.segments[0].name}.vecs.npy"
    assert a.stat().st_ino == b.stat().st_ino

    calls = []
    original = system.embedder.embed_documents
    system.embedder.embed_documents = lambda texts, **kw: (
        calls.append(len(texts)) or original(texts, **kw)
    )  # type: ignore[method-assign]
    before = system.query(
        "inverse document frequency", system.settings.search_request(top_k=3, record_access=False)
    )
    rebuilt = system.rebuild_index()
    assert rebuilt.kind == "rebuild" and calls == []
    after = system.query(
        "inverse document frequency", system.settings.search_request(top_k=3, record_access=False)
    )
    assert [h.chunk_id for h in after.hits] == [h.chunk_id for h in before.hits]
    assert len(system.reader.current().segments) == 1  # type: ignore[union-attr]
    manifest = json.loads((system.reader.current().path / "manifest.json").read_text())  # type: ignore[union-attr]
    assert manifest["model_id"] == system.embedder.model_id and manifest["dim"] == 384


def test_filters_apply_before_the_top_n_cut(tmp_path: Path) -> None:
    system = MemorySystem(make_settings(tmp_path, top_n=5), embedder=HashingEmbedder())
    for i in range(30):
        write(
            tmp_path,
            f"crowd{i}.md",
            f"# Crowd {i}\n\nmemory retrieval ranking memory retrieval {i}",
        )
    crowd = sorted((tmp_path / "docs").glob("crowd*.md"))
    system.ingest(crowd, {"knowledge_type": "paper"})
    rare = write(tmp_path, "rare.md", "# Rare\n\nA note on memory with other words entirely.")
    system.ingest([rare], {"knowledge_type": "principle", "tags": ["rare"]})
    unfiltered = system.query(
        "memory retrieval ranking", system.settings.search_request(top_k=5, record_access=False)
    )
    assert all(h.knowledge_type == "paper" for h in unfiltered.hits)
    for flt in (SearchFilters(knowledge_types=("principle",)), SearchFilters(tags=("rare",))):
        res = system.query(
            "memory retrieval ranking",
            system.settings.search_request(top_k=5, record_access=False),
            filters=flt,
        )
        assert [h.knowledge_type for h in res.hits] == ["principle"]
    system.close()


def test_tags_change_without_touching_the_index(system: MemorySystem, corpus: list[Path]) -> None:
    system.ingest(corpus)
    version_dir = system.reader.current().path  # type: ignore[union-attr]
    before = {p: p.stat().st_mtime_ns for p in version_dir.rglob("*") if p.is_file()}
    hit = system.query("FAISS flat", system.settings.search_request(top_k=1)).hits[0]
    system.set_chunk_tags(
        hit.doc_id, hit.chunk_index, importance=0.9, knowledge_type="principle", tags=["core"]
    )
    res = system.query(
        "FAISS flat", system.settings.search_request(top_k=1), filters=SearchFilters(tags=("core",))
    )
    assert res.hits[0].chunk_id == hit.chunk_id and res.hits[0].importance == 0.9
    assert res.hits[0].knowledge_type == "principle"
    assert [c.chunk_id if hasattr(c, "chunk_id") else c.id for c in system.find_by_tag("core")] == [
        hit.chunk_id
    ]
    after = {p: p.stat().st_mtime_ns for p in version_dir.rglob("*") if p.is_file()}
    assert before == after
    with pytest.raises(InvalidInputError, match="importance"):
        system.set_chunk_tags(hit.doc_id, hit.chunk_index, importance=1.5)
    with pytest.raises(InvalidInputError, match="knowledge_type"):
        system.set_chunk_tags(hit.doc_id, hit.chunk_index, knowledge_type="blog")


def test_access_counts_document_chunks_and_context(
    system: MemorySystem, corpus: list[Path]
) -> None:
    system.ingest(corpus)
    res = system.query("BM25 ranks documents", system.settings.search_request(top_k=2))
    first = res.hits[0]
    again = system.query(
        "BM25 ranks documents", system.settings.search_request(top_k=2, record_access=False)
    ).hits[0]
    assert again.access_count == first.access_count + 1
    chunks = system.get_document_chunks(first.doc_id)
    assert [c.chunk_index for c in chunks] == list(range(len(chunks)))
    window = system.get_document_chunks(first.doc_id, chunk_index=0, window=0)
    assert len(window) == 1
    with pytest.raises(NotFoundError):
        system.get_document_chunks("nope")
    ctx = res.context(max_chars=120)
    assert ctx.startswith("[1]") and len(ctx) <= 130
    assert np.isclose(np.linalg.norm(system.embed("hello")), 1.0)


def test_a_second_reader_sees_new_versions_without_restart(
    system: MemorySystem, corpus: list[Path]
) -> None:
    reader = IndexReader(system.settings.index_path)
    assert reader.current() is None
    system.ingest(corpus[:1])
    v1 = reader.current()
    assert v1 is not None and v1.manifest.n_dense >= 1
    system.ingest(corpus[1:])
    v2 = reader.current()
    assert v2 is not None and v2.manifest.version > v1.manifest.version
    assert v2.segments[0] is v1.segments[0]  # shared segment not reloaded


def test_model_mismatch_is_refused(
    system: MemorySystem, corpus: list[Path], tmp_path: Path
) -> None:
    system.ingest(corpus)
    other = MemorySystem(system.settings, embedder=HashingEmbedder(dim=64))
    with pytest.raises(ModelMismatchError, match="hashing-bow-384"):
        other.query("faiss")
    with pytest.raises(ModelMismatchError):
        other.ingest([write(tmp_path, "new.md", "# New\n\nsomething new")])
    other.close()


def test_search_arguments_are_checked(system: MemorySystem) -> None:
    with pytest.raises(InvalidInputError, match="query"):
        system.query("   ")
    with pytest.raises(InvalidInputError, match="top_k"):
        system.query("x", system.settings.search_request(top_k=0))
    assert system.query("nothing stored yet").hits == []


@pytest.mark.parametrize("fusion", ["convex", "rrf"])
def test_both_fusions_find_the_documents(tmp_path: Path, corpus: list[Path], fusion: str) -> None:
    system = MemorySystem(make_settings(tmp_path, fusion=fusion), embedder=HashingEmbedder())
    system.ingest(corpus)
    system.update_index()
    assert "Okapi BM25" in top_doc(system, "okapi term frequency")
    assert "文字バイグラム" in top_doc(system, "形態素解析")
    hit = system.query("okapi term frequency", system.settings.search_request(top_k=1)).hits[0]
    fused = hit.stage_scores["fused"]
    assert isinstance(fused, float)
    if fusion == "convex":
        assert 0.0 <= fused <= 1.0
    else:
        assert fused <= 2 / 61
    system.close()


@pytest.mark.parametrize("published", [True, False])
def test_convex_fusion_scores_every_candidate_with_both_retrievers(
    tmp_path: Path, corpus: list[Path], published: bool
) -> None:
    # top_n=1: each retriever contributes one candidate, the other must score it,
    # from the published index or, for chunks not indexed yet, from the store.
    system = MemorySystem(make_settings(tmp_path, top_n=1), embedder=HashingEmbedder())
    system.ingest(corpus, update_index=published)
    assert (system.reader.current() is not None) == published
    query = "faiss okapi ranks"  # dense prefers the FAISS note, BM25 the BM25 one
    hits = system.query(query, system.settings.search_request(top_k=5, record_access=False)).hits
    ranks = [(h.stage_scores["dense_rank"], h.stage_scores["sparse_rank"]) for h in hits]
    assert len(hits) == 2 and (1, None) in ranks and (None, 1) in ranks
    qvec = system.embedder.embed_query(query)
    ids, vecs = system.store.vectors_for([h.chunk_id for h in hits], system.embedder.model_id)
    true_dense = dict(zip(ids.tolist(), (vecs @ qvec).tolist(), strict=True))
    for h in hits:
        assert h.stage_scores["dense"] == pytest.approx(true_dense[h.chunk_id], abs=1e-5)
        assert h.stage_scores["sparse"] is not None
    sparse_only = next(h for h in hits if h.stage_scores["dense_rank"] is None)
    dense_only = next(h for h in hits if h.stage_scores["sparse_rank"] is None)
    assert sparse_only.stage_scores["sparse"] > dense_only.stage_scores["sparse"]  # type: ignore[operator]
    system.close()


def test_fusion_setting_is_checked() -> None:
    assert Settings.from_env({}).search.fusion == "convex"
    assert Settings.from_env({"HYBRID_RAG_FUSION": "RRF"}).search.fusion == "rrf"
    with pytest.raises(InvalidInputError, match="HYBRID_RAG_FUSION must be 'convex' or 'rrf'"):
        Settings.from_env({"HYBRID_RAG_FUSION": "borda"})
    with pytest.raises(InvalidInputError, match="fusion must be 'convex' or 'rrf', got 'borda'"):
        SearchRequest(fusion="borda").validate()


def test_changed_file_replaces_its_document(system: MemorySystem, tmp_path: Path) -> None:
    path = write(tmp_path, "note.md", "# Note\n\nfirst version about apples")
    first = system.ingest([path])[0]
    path.write_text("# Note\n\nsecond version about pears", encoding="utf-8")
    second = system.ingest([path])[0]
    assert second.status == "replaced" and second.replaced_doc_id == first.doc_id
    assert "pears" in top_doc(system, "pears apples")
    assert all(
        "apples" not in h.content
        for h in system.query("apples", system.settings.search_request(top_k=5)).hits
    )


def test_front_matter_metadata(system: MemorySystem, tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "fm.md",
        "---\ntitle: Rules\nknowledge_type: principle\nimportance: 0.8\ntags: [core]\ndate: 2024-05-01\n---\n# Rules\n\nAlways measure.",
    )
    system.ingest([path])
    hit = system.query("always measure", system.settings.search_request(top_k=1)).hits[0]
    assert (hit.knowledge_type, hit.importance, hit.tags) == ("principle", 0.8, ["core"])
    assert hit.source_date == dt.date(2024, 5, 1)
    bad = write(tmp_path, "bad.md", "---\nknowledge_type: blog\n---\n# x\n\ny")
    with pytest.raises(InvalidInputError, match="front matter"):
        system.ingest([bad])


def test_hits_carry_their_documents_title_and_source(system: MemorySystem, tmp_path: Path) -> None:
    path = write(
        tmp_path, "titled.md", "---\ntitle: Release rules\n---\n# Heading\n\nShip on Tuesdays."
    )
    system.ingest([path])
    system.ingest_text("Rollbacks need a named owner.", "Rollback note")
    by_text = {
        h.content: h
        for h in system.query(
            "ship rollbacks owner tuesdays", system.settings.search_request(top_k=5)
        ).hits
    }
    file_hit = next(h for c, h in by_text.items() if "Tuesdays" in c)
    note_hit = next(h for c, h in by_text.items() if "Rollbacks" in c)
    assert (file_hit.title, file_hit.source) == ("Release rules", str(path.resolve()))
    assert (note_hit.title, note_hit.source) == ("Rollback note", "text:Rollback note")


def test_front_matter_tags_merge_with_given_tags(system: MemorySystem, tmp_path: Path) -> None:
    path = write(
        tmp_path, "tagged.md", "---\ntags: [core, design]\n---\n# T\n\nKeep the store the truth."
    )
    system.ingest([path], {"tags": ["imported", "core"], "importance": 0.4})
    hit = system.query("store truth", system.settings.search_request(top_k=1)).hits[0]
    assert sorted(hit.tags) == ["core", "design", "imported"]
    assert hit.importance == 0.4


def test_ingest_again_after_a_lost_index_update_brings_the_index_up(
    system: MemorySystem, corpus: list[Path]
) -> None:
    # As if the first ingest was killed after storing, before its index update.
    system.ingest(corpus, update_index=False)
    assert system.reader.current() is None
    again = system.ingest(corpus)
    assert {r.status for r in again} == {"unchanged"}
    version = system.reader.current()
    assert version is not None and version.manifest.n_dense == len(system.store.all_ids())
    assert not system.store.pending_changes()

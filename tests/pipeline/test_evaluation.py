"""Evaluation: the demo golden set, the retrieval_eval asset, its regression gate, its schedule."""

from __future__ import annotations

import shutil
from pathlib import Path

import dagster as dg
import pytest

from memory_pipeline.evaluation.golden import load_golden
from memory_pipeline.pipeline.definitions import build_definitions
from memory_pipeline.pipeline.evaluation.schedules import nightly_evaluation
from memory_pipeline.pipeline.resources import MemoryResource

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "demo" / "golden.yaml"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """The demo as `make run` sets it up, with the fast test embedder."""
    shutil.copytree(REPO / "demo" / "corpus", tmp_path / "sources")
    shutil.copy(REPO / "demo" / "sources.yaml", tmp_path / "sources.yaml")
    return {
        "HYBRID_RAG_DB_PATH": str(tmp_path / "memory.db"),
        "HYBRID_RAG_INDEX_PATH": str(tmp_path / "indices"),
        "HYBRID_RAG_ARCHIVE_PATH": str(tmp_path / "archive"),
        "HYBRID_RAG_EMBEDDING_MODEL": "hashing",
        "MEMORY_PIPELINE_SOURCES": str(tmp_path / "sources.yaml"),
        "MEMORY_PIPELINE_GOLDEN": str(GOLDEN),
        "MEMORY_PIPELINE_EVAL_DIR": str(tmp_path / "eval"),
    }


def run(env: dict[str, str], job: str) -> dg.ExecuteInProcessResult:
    defs = build_definitions(env)
    return defs.resolve_job_def(job).execute_in_process(
        instance=dg.DagsterInstance.ephemeral(), raise_on_error=False
    )


def test_the_demo_golden_set_names_documents_the_demo_ingests(env: dict[str, str]) -> None:
    assert run(env, "ingest_sources").success
    memory: MemoryResource = build_definitions(env).resources["memory"]  # type: ignore[assignment]
    store = memory.store()
    judged = {d for q in load_golden(GOLDEN).queries for d in q.relevant}
    missing = [d for d in sorted(judged) if store.get_document(d) is None]
    assert not missing, f"demo/golden.yaml names documents the demo does not hold: {missing}"
    assert store.counts()["documents"] == len(judged)  # every demo document is judged somewhere


def test_retrieval_eval_records_metrics_and_gates_regressions(
    env: dict[str, str], tmp_path: Path
) -> None:
    assert run(env, "ingest_sources").success
    first = run(env, "evaluate_retrieval")
    assert first.success
    [event] = first.get_asset_materialization_events()
    meta = {k: v.value for k, v in event.materialization.metadata.items()}
    assert meta["queries"] == 8 and meta["variant"] == "hybrid"
    assert isinstance(meta["ndcg_at_10"], float) and meta["ndcg_at_10"] > 0.3
    assert Path(str(meta["report"])).exists()
    [check] = first.get_asset_check_evaluations()
    assert check.check_name == "eval_regression" and check.passed
    assert (tmp_path / "eval" / "baseline.json").exists()  # the first run is the baseline

    assert run(env, "evaluate_retrieval").get_asset_check_evaluations()[0].passed  # unchanged

    # Defect: the paper and the principle several queries depend on are gone.
    memory: MemoryResource = build_definitions(env).resources["memory"]  # type: ignore[assignment]
    system = memory.system()
    for doc_id in ("f5f3ec17ec8bc2e91dcda06a718d562c", "afa116cda9e79ce1b093545ba8f930af"):
        system.delete_document(doc_id, update_index=True)
    system.close()
    worse = run(env, "evaluate_retrieval")
    [check] = worse.get_asset_check_evaluations()
    assert not check.passed and check.severity is dg.AssetCheckSeverity.ERROR
    assert "ndcg@10 dropped" in (check.description or "")
    baseline = (tmp_path / "eval" / "baseline.json").read_text()
    assert '"n_documents": 8' in baseline  # a failing run never becomes the baseline


def test_nightly_evaluation_skips_without_a_golden_set(env: dict[str, str]) -> None:
    defs = build_definitions(env)
    schedule = defs.resolve_schedule_def("nightly_evaluation")
    assert schedule.cron_schedule == "30 2 * * *"
    assert schedule.default_status is dg.DefaultScheduleStatus.RUNNING
    with dg.build_schedule_context(resources=dict(defs.resources)) as context:
        [request] = nightly_evaluation.evaluate_tick(context).run_requests or []
    assert request.tags["memory_pipeline/golden"] == "golden.yaml"

    del env["MEMORY_PIPELINE_GOLDEN"]
    defs = build_definitions(env)
    with dg.build_schedule_context(resources=dict(defs.resources)) as context:
        tick = nightly_evaluation.evaluate_tick(context)
    assert not tick.run_requests and "MEMORY_PIPELINE_GOLDEN" in (tick.skip_message or "")

"""Every asset materialized in-process with the real resources on a temporary memory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import sqlalchemy as sa

from memory_pipeline.pipeline.definitions import build_definitions
from memory_pipeline.pipeline.evaluation.assets import retrieval_eval
from memory_pipeline.pipeline.ingestion.assets import (
    documents_and_chunks,
    embeddings,
    search_index,
    source_files,
)
from memory_pipeline.pipeline.maintenance.assets import forgetting_candidates, scrub_report
from memory_pipeline.pipeline.maintenance.checks import no_stored_secret
from memory_pipeline.pipeline.resources import MemoryResource, SourcesResource
from memory_pipeline.system import doc_id_for
from tests.test_pipeline_support import ASSET_KEYS, Corpus, make_corpus

ALL = [
    source_files,
    documents_and_chunks,
    embeddings,
    search_index,
    forgetting_candidates,
    scrub_report,
    retrieval_eval,
]


@pytest.fixture
def corpus(tmp_path: Path) -> Corpus:
    return make_corpus(tmp_path)


def resources(corpus: Corpus) -> dict[str, Any]:
    """The resources exactly as the composition root builds them from the environment."""
    return dict(build_definitions(corpus.env()).resources)


def meta(result: dg.ExecuteInProcessResult, key: str) -> dict[str, Any]:
    [event] = [
        e.materialization
        for e in result.get_asset_materialization_events()
        if e.asset_key.to_user_string() == key
    ]
    return {k: v.value for k, v in event.metadata.items()}


def memory_chunks(corpus: Corpus, root: str) -> int:
    """Chunks stored from the files of one source root (``notes`` or ``papers``)."""
    memory: MemoryResource = resources(corpus)["memory"]
    store = memory.store()
    try:
        docs = [
            store.get_document(doc_id_for(p.read_bytes())) for p in getattr(corpus, root).iterdir()
        ]
        return sum(d.n_chunks for d in docs if d is not None)
    finally:
        memory.teardown_after_execution(None)


def materialize(
    corpus: Corpus, run_config: dict[str, Any] | None = None
) -> dg.ExecuteInProcessResult:
    return dg.materialize(
        ALL,
        resources=resources(corpus),
        run_config=run_config,
        instance=dg.DagsterInstance.ephemeral(),
    )


def test_resources_come_from_the_environment(corpus: Corpus) -> None:
    res = resources(corpus)
    memory, sources = res["memory"], res["sources"]
    assert isinstance(memory, MemoryResource) and isinstance(sources, SourcesResource)
    settings = memory.settings()
    assert settings.db_path == corpus.base / "memory.db" and settings.embedding.model == "hashing"
    assert settings.ingest.max_chunk_size == 64
    assert settings.search.fusion == "convex"
    assert sources.sources_file == str(corpus.sources_file)
    rrf = build_definitions(corpus.env(HYBRID_RAG_FUSION="rrf", HYBRID_RAG_TOP_N="20"))
    configured = rrf.resources["memory"]
    assert isinstance(configured, MemoryResource)
    assert (configured.settings().search.fusion, configured.settings().search.top_n) == ("rrf", 20)


def test_every_asset_materializes_and_records_chartable_metadata(corpus: Corpus) -> None:
    # The notes root gives importance 0.8: a threshold of 0.9 makes both notes
    # forgetting candidates, and one of them is the golden answer to "rrf".
    forgetting = {"importance_threshold": 0.9}
    result = materialize(corpus, {"ops": {"forgetting_candidates": {"config": forgetting}}})
    assert result.success
    keys = {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()}
    assert keys == ASSET_KEYS

    files = meta(result, "source_files")
    assert files["mode"] == "full" and files["files_under_roots"] == 5
    assert files["files_to_ingest"] == 5 and files["files_new"] == 5

    docs = meta(result, "documents")
    assert docs["documents_added"] == 5 and docs["documents_total"] == 5
    assert docs["documents_removed"] == 0 and docs["files_failed"] == 0

    chunks = meta(result, "chunks")
    assert chunks["chunks_added"] == chunks["chunks_total"] > 0
    assert chunks["vectors_embedded"] == chunks["chunks_added"]
    assert (chunks["redacted_total"], chunks["redacted_by_kind"]) == (0, {})

    emb = meta(result, "embeddings")
    assert emb["model_id"] == "hashing-bow-384" and emb["dim"] == 384
    assert emb["vectors_total"] == chunks["chunks_total"]

    index = meta(result, "search_index")
    assert index["index_version"] == 1 and index["vectors_indexed"] == chunks["chunks_total"]
    assert index["bm25_documents"] == chunks["chunks_total"] and index["index_size_bytes"] > 0
    assert index["model_id"] == "hashing-bow-384" and isinstance(index["seconds"], float)

    scrubbed = meta(result, "scrub_report")  # redaction kept every secret out: none found
    assert (scrubbed["dry_run"], scrubbed["found"], scrubbed["places"]) == (True, 0, 0)

    forget = meta(result, "forgetting_candidates")
    assert forget["dry_run"] is True and forget["archived"] == 0
    assert forget["live_chunks"] == chunks["chunks_total"]
    notes = memory_chunks(corpus, "notes")
    assert forget["candidates"] == forget["candidates_importance_below_threshold"] == notes > 0
    # the report states what forgetting would cost on the golden set: "rrf" loses its answer
    assert "golden_cost" in forget
    for metric in ("ndcg_at_10", "recall_at_10"):
        with_candidates = forget[f"golden_{metric}_with_candidates"]
        without = forget[f"golden_{metric}_without_candidates"]
        assert with_candidates == 1.0 and without < with_candidates, metric

    evaluation = meta(result, "retrieval_eval")
    assert evaluation["queries"] == 2 and evaluation["documents"] == 5
    assert evaluation["hit_rate_at_10"] == 1.0  # both judged notes are found

    # The memory is searchable from the published index.
    memory: MemoryResource = resources(corpus)["memory"]
    system = memory.system()
    hits = system.query(
        "reciprocal rank fusion", system.settings.search_request(top_k=1, record_access=False)
    )
    assert hits.hits and "fusion" in hits.hits[0].content.lower()
    assert hits.stats.unindexed_searched == 0


def test_a_run_with_changed_and_deleted_paths_records_the_change(corpus: Corpus) -> None:
    assert materialize(corpus).success
    note, gone = corpus.notes / "decay.md", corpus.notes / "fusion.md"
    note.write_text(
        note.read_text() + "\n\nA new paragraph on access frequency boosts.\n\n"
        "DB_PASSWORD=Xq7rT2vLp9Wk <private>not for the memory</private>\n\n"
        "Mark a span with `<private>`, or with <private> alone: that tag is never closed."
    )
    text = note.read_text()
    line = text[: text.index("<private> alone")].count("\n") + 1
    gone.unlink()
    config = {"ops": {"source_files": {"config": {"paths": [str(note)], "deleted": [str(gone)]}}}}
    result = materialize(corpus, config)
    assert result.success
    files = meta(result, "source_files")
    assert files["mode"] == "paths" and files["files_to_ingest"] == 1
    assert files["files_to_delete"] == 1
    docs = meta(result, "documents")
    assert docs["documents_changed"] == 1 and docs["documents_removed"] == 1
    assert docs["documents_total"] == 4
    memory: MemoryResource = resources(corpus)["memory"]
    [deleted] = memory.system().history()  # the file's removal, recorded as the pipeline's
    assert (deleted.field, deleted.actor, deleted.before["title"]) == (
        "document",
        "pipeline",
        "Fusion",
    )
    chunks = meta(result, "chunks")
    assert chunks["chunks_removed"] > 0 and chunks["chunks_added"] > 0
    # what the redaction step took out of the changed note, by kind (docs/hygiene.md)
    assert chunks["redacted_total"] == 2
    assert chunks["redacted_by_kind"] == {"password": 1, "private": 1}
    # the note is stored whole after the tag it never closes, and the run says where
    assert chunks["unclosed_tags"] == 1
    assert f"{note.resolve()}:{line}: <private> is never closed" in chunks["unclosed_tag_warnings"]
    index = meta(result, "search_index")
    assert index["index_version"] == 2 and index["update_kind"] == "update"
    assert index["chunks_removed"] == chunks["chunks_removed"]


def test_forgetting_runs_for_real_only_when_asked(corpus: Corpus, tmp_path: Path) -> None:
    assert materialize(corpus).success
    res = resources(corpus)
    memory: MemoryResource = res["memory"]
    memory.system().set_chunk_tags(
        memory.system()
        .store.documents_by_source(str((corpus.papers / "bm25.md").resolve()))[0]
        .doc_id,
        0,
        importance=0.01,
    )
    fusion = memory.system().store.documents_by_source(str((corpus.notes / "fusion.md").resolve()))
    memory.system().set_chunk_tags(fusion[0].doc_id, 0, tags=["agent-pick"], actor="mcp")
    config = {
        "ops": {
            "forgetting_candidates": {
                "config": {"dry_run": False, "importance_threshold": 0.1, "max_fraction": 1.0}
            }
        }
    }
    result = dg.materialize(
        [forgetting_candidates],
        resources=res,
        run_config=config,
        instance=dg.DagsterInstance.ephemeral(),
        selection=[forgetting_candidates],
    )
    forget = meta(result, "forgetting_candidates")
    assert forget["dry_run"] is False and forget["archived"] == forget["candidates"] == 1
    # the report shows the week's edits: they are what moved its candidate
    assert forget["edits_last_7_days"] == 2
    assert forget["edits_by_actor"] == {"api": 1, "mcp": 1}
    assert "importance unset → 0.01" in forget["recent_edits"]
    assert "→ [agent-pick]" in forget["recent_edits"]
    assert forget["agent_changes_awaiting_review"] == 1
    archive = list((corpus.base / "archive").glob("*.jsonl"))
    assert archive and "BM25" in json.dumps(archive[0].read_text())


def test_the_scrub_job_reports_then_takes_out_and_its_check_says_so(corpus: Corpus) -> None:
    """A token stored before redaction: the dry run counts it by kind and the check fails;
    launched with dry_run: false it is taken out, and the check passes."""
    import random
    import string

    res = resources(corpus)
    assert dg.materialize(ALL[:4], resources=res, instance=dg.DagsterInstance.ephemeral()).success
    token = "ghp_" + "".join(random.Random(3).choices(string.ascii_letters + string.digits, k=36))
    memory: MemoryResource = res["memory"]
    with memory.system().store.write() as s:
        s.execute(sa.text(f"UPDATE chunks SET content = content || ' {token}' WHERE id = 1"))

    def scrub(dry_run: bool) -> tuple[dict[str, Any], dg.AssetCheckEvaluation]:
        result = dg.materialize(
            [scrub_report, no_stored_secret],
            resources=res,
            run_config={"ops": {"scrub_report": {"config": {"dry_run": dry_run}}}},
            instance=dg.DagsterInstance.ephemeral(),
            raise_on_error=False,
        )
        [check] = result.get_asset_check_evaluations()
        return meta(result, "scrub_report"), check

    report, check = scrub(dry_run=True)
    assert (report["dry_run"], report["found"], report["found_github_token"]) == (True, 1, 1)
    assert token[4:] not in json.dumps(report) and "github-token" in report["where"]
    assert not check.passed and "memory-pipeline scrub --apply" in (check.description or "")
    report, check = scrub(dry_run=False)
    assert (report["dry_run"], report["found"]) == (False, 1) and check.passed
    assert token not in memory.system().store.get_chunks([1])[1].content


def test_no_sources_file_is_an_empty_plan_not_a_failure(corpus: Corpus) -> None:
    env = corpus.env()
    del env["MEMORY_PIPELINE_SOURCES"]
    res = dict(build_definitions(env).resources)
    result = dg.materialize(
        [source_files, documents_and_chunks, embeddings, search_index],
        resources=res,
        instance=dg.DagsterInstance.ephemeral(),
    )
    assert result.success
    assert meta(result, "source_files")["sources_file"] == "not configured"
    assert meta(result, "documents")["documents_total"] == 0

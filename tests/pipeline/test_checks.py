"""Each asset check fails on an injected defect and passes on a clean memory."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import dagster as dg
import numpy as np
import pytest
import sqlalchemy as sa

from memory_pipeline.pipeline.definitions import build_definitions
from memory_pipeline.pipeline.resources import MemoryResource
from memory_pipeline.store import Store
from memory_pipeline.store.schema import Chunk, Embedding, IndexChange
from tests.test_pipeline_support import Corpus, make_corpus


@pytest.fixture
def corpus(tmp_path: Path) -> Corpus:
    return make_corpus(tmp_path)


def run(corpus: Corpus, job: str, **env: str) -> dg.ExecuteInProcessResult:
    defs = build_definitions(corpus.env(**env))
    return defs.resolve_job_def(job).execute_in_process(
        instance=dg.DagsterInstance.ephemeral(), raise_on_error=False
    )


def checks(result: dg.ExecuteInProcessResult) -> dict[str, dg.AssetCheckEvaluation]:
    return {e.check_name: e for e in result.get_asset_check_evaluations()}


def memory(corpus: Corpus) -> MemoryResource:
    return build_definitions(corpus.env()).resources["memory"]  # type: ignore[return-value]


def store(corpus: Corpus) -> Store:
    return memory(corpus).store()


def test_every_check_passes_on_a_clean_memory(corpus: Corpus) -> None:
    ingest = run(corpus, "ingest_sources")
    assert ingest.success
    found = checks(ingest)
    assert set(found) == {
        "sources_parse",
        "sources_ingested",
        "tagging_coverage",
        "vectors_valid",
        "index_consistency",
    }
    assert all(e.passed for e in found.values())
    health = checks(run(corpus, "health_checks"))
    assert all(e.passed for e in health.values()) and len(health) == 6
    assert health["no_stored_secret"].metadata["found"].value == 0
    meta = health["index_consistency"].metadata
    assert meta["debris"].value == 0 and meta["gaps"].value == 0
    assert meta["problems_in_index"].value == 0 and "index" not in meta
    assert meta["index_version"].value == 1
    assert meta["failing_items"].value == []
    vectors = health["vectors_valid"].metadata
    assert vectors["vectors_not_finite"].value == 0 and "vectors_finite" not in vectors


def test_check_descriptions_say_what_is_checked_not_the_severity(corpus: Corpus) -> None:
    defs = build_definitions(corpus.env())
    specs = [
        spec
        for checks_def in defs.get_repository_def().asset_checks_defs_by_key.values()
        for spec in checks_def.check_specs
    ]
    assert {s.name for s in specs} >= {"sources_parse", "sources_ingested", "index_consistency"}
    for spec in specs:
        assert not any(word in (spec.description or "") for word in ("ERROR", "WARN")), spec


def test_one_unparseable_file_is_owned_by_sources_parse_alone(corpus: Corpus) -> None:
    assert run(corpus, "ingest_sources").success
    (corpus.notes / "empty.md").write_text("")
    found = checks(run(corpus, "ingest_sources"))
    assert not found["sources_parse"].passed
    assert found["sources_parse"].metadata["failing_items"].value == [
        str(corpus.notes / "empty.md")
    ]
    ingested = found["sources_ingested"]
    assert ingested.passed, ingested.description
    assert ingested.metadata["files_refused"].value == 1


def test_unsupported_files_are_counted_by_extension_not_failed(corpus: Corpus) -> None:
    (corpus.notes / "photo.png").write_bytes(b"\x89PNG")
    (corpus.papers / "blob.bin").write_bytes(b"\x00\x01")
    (corpus.papers / "more.bin").write_bytes(b"\x00\x02")
    result = run(corpus, "ingest_sources")
    assert result.success
    [plan] = [
        e.materialization.metadata
        for e in result.get_asset_materialization_events()
        if e.materialization.asset_key == dg.AssetKey("source_files")
    ]
    assert plan["files_unsupported"].value == 3
    assert plan["files_unsupported_by_extension"].value == {".bin": 2, ".png": 1}
    assert "photo.png" in str(plan["unsupported"].value)
    check = checks(result)["sources_ingested"]
    assert check.passed
    assert check.metadata["files_unsupported"].value == 3
    assert check.metadata["files_unsupported_by_extension"].value == {".bin": 2, ".png": 1}
    # every file accounted for: the corpus's five ingested, the three unsupported
    assert check.metadata["files_ingested"].value == 5
    assert check.metadata["files_under_roots"].value == 5 + 3
    assert check.description == (
        "every file under the roots is accounted for: 5 files in the store, "
        "3 unsupported (listed, not ingested)"
    )


def test_sources_parse_warns_with_the_failed_file_names(corpus: Corpus) -> None:
    (corpus.notes / "empty.md").write_text("")
    corpus.export_file.write_text("[{broken")
    result = run(corpus, "ingest_sources")
    assert result.success  # a bad source is a warning, not a failed run
    check = checks(result)["sources_parse"]
    assert not check.passed and check.severity is dg.AssetCheckSeverity.WARN
    assert check.metadata["failed_files"].value == 2
    assert "empty.md" in (check.description or "") and "conversations.json" in (
        check.description or ""
    )
    assert "not valid JSON" in str(check.metadata["files"].value)
    (corpus.notes / "empty.md").unlink()
    corpus.export_file.unlink()
    assert checks(run(corpus, "health_checks"))["sources_parse"].passed  # removed files: fixed


def test_sources_ingested_fails_on_a_file_the_store_lacks_and_passes_after(
    corpus: Corpus,
) -> None:
    """As after a killed ingest run: a file is under a root, the store does not hold it."""
    assert run(corpus, "ingest_sources").success
    (corpus.notes / "late.md").write_text("# Late\n\nA note added while nothing ran.")
    (corpus.papers / "bm25.md").write_text("# BM25\n\nRewritten since it was ingested.")
    check = checks(run(corpus, "health_checks"))["sources_ingested"]
    assert not check.passed and check.severity is dg.AssetCheckSeverity.ERROR
    assert check.metadata["not_ingested"].value == 2
    assert (check.metadata["files_new"].value, check.metadata["files_changed"].value) == (1, 1)
    assert "late.md" in (check.description or "") and "bm25.md" in (check.description or "")
    assert checks(run(corpus, "ingest_sources"))["sources_ingested"].passed


def test_health_on_the_command_line_names_the_same_files(
    corpus: Corpus, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    from memory_pipeline.cli.main import main

    assert run(corpus, "ingest_sources").success
    for name, value in corpus.env().items():
        monkeypatch.setenv(name, value)
    assert main(["health", "--model", "hashing"]) == 0
    assert "every file under the roots is in the store" in capsys.readouterr().out
    (corpus.notes / "late.md").write_text("# Late\n\nA note added while nothing ran.")
    assert main(["health", "--model", "hashing", "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert [line.split(" (")[0].endswith("late.md") for line in out["sources"]["not_ingested"]] == [
        True
    ]
    assert "(new)" in out["sources"]["not_ingested"][0]


def test_tagging_coverage_warns_below_the_floor(corpus: Corpus) -> None:
    # bm25.md (papers root, no tags anywhere) leaves some chunks untagged.
    result = run(corpus, "ingest_sources", MEMORY_PIPELINE_TAG_COVERAGE_FLOOR="1.0")
    check = checks(result)["tagging_coverage"]
    assert not check.passed and check.severity is dg.AssetCheckSeverity.WARN
    coverage = check.metadata["tag_coverage"].value
    assert isinstance(coverage, float) and 0 < coverage < 1
    assert check.metadata["floor"].value == 1.0
    assert checks(run(corpus, "health_checks"))["tagging_coverage"].passed  # default floor 0.5


def _nan_vector(s: Store, chunk_id: int) -> None:
    with s.write() as session:
        bad = np.full(384, np.nan, dtype=np.float32).tobytes()
        session.execute(
            sa.update(Embedding).where(Embedding.chunk_id == chunk_id).values(vector=bad)
        )


def _short_vector(s: Store, chunk_id: int) -> None:
    with s.write() as session:
        short = np.ones(8, dtype=np.float32).tobytes()
        session.execute(
            sa.update(Embedding).where(Embedding.chunk_id == chunk_id).values(vector=short, dim=8)
        )


def _foreign_model(s: Store, chunk_id: int) -> None:
    with s.write() as session:
        vec = np.ones(384, dtype=np.float32) / np.sqrt(384)
        session.execute(
            sa.insert(Embedding).values(
                chunk_id=chunk_id, model_id="another-model", dim=384, vector=vec.tobytes()
            )
        )


@pytest.mark.parametrize(
    ("inject", "finding"),
    [
        (_nan_vector, "vectors_not_finite"),
        (_short_vector, "vectors_of_wrong_dim"),
        (_foreign_model, "vectors_of_other_models"),
    ],
)
def test_vectors_valid_fails_and_blocks_the_index_publication(
    corpus: Corpus, inject: Callable[[Store, int], None], finding: str
) -> None:
    assert run(corpus, "ingest_sources").success
    system = memory(corpus).system()
    new = corpus.notes / "late.md"
    new.write_text("# Late\n\nA note written after the first index about IVF lists.")
    [late] = system.ingest([new], update_index=False)
    chunk_id = system.store.document_chunks(late.doc_id)[0].id
    inject(system.store, chunk_id)
    system.close()

    update = run(corpus, "update_index")
    assert not update.success  # a failed blocking check fails the run …
    check = checks(update)["vectors_valid"]
    assert not check.passed and check.severity is dg.AssetCheckSeverity.ERROR
    assert check.metadata[finding].value >= 1
    materialized = {e.asset_key.to_user_string() for e in update.get_asset_materialization_events()}
    assert "search_index" not in materialized  # … before the index is published
    assert memory(corpus).system().reader.current().manifest.version == 1  # type: ignore[union-attr]


def _debris(s: Store) -> None:
    """A chunk row removed behind the store's back: the index serves a dead id, unqueued."""
    with s.write() as session:
        victim = session.scalar(sa.select(sa.func.min(Chunk.id)))
        session.execute(sa.delete(Chunk).where(Chunk.id == victim))


def _gap(s: Store) -> None:
    """A new chunk whose queue entry is lost: live, yet neither indexed nor queued."""
    with s.write() as session:
        session.execute(sa.delete(IndexChange))


@pytest.mark.parametrize(("inject", "finding"), [(_debris, "debris"), (_gap, "gaps")])
def test_index_consistency_fails_on_debris_and_gaps(
    corpus: Corpus, inject: Callable[[Store], None], finding: str
) -> None:
    assert run(corpus, "ingest_sources").success
    system = memory(corpus).system()
    system.ingest_text("An agent's note about tantivy segments.", "agent note")
    inject(system.store)
    system.close()
    check = checks(run(corpus, "health_checks"))["index_consistency"]
    assert not check.passed and check.severity is dg.AssetCheckSeverity.ERROR
    assert check.metadata[finding].value >= 1
    assert finding in str(check.metadata["problems"].value)
    assert check.metadata["failing_items"].value == [finding]

"""Index health on a real SQLite file and real index folders, with injected damage."""

from __future__ import annotations

import argparse
import datetime as dt
import json
from pathlib import Path

import numpy as np
import pytest
import sqlalchemy as sa

from memory_pipeline.cli.reports import register
from memory_pipeline.index.backends.local.reader import IndexReader
from memory_pipeline.index.backends.local.sparse import SparseIndex
from memory_pipeline.index.tokenizer import TOKENIZER_ID
from memory_pipeline.memory.health import HealthFinding, HealthReport, index_health
from memory_pipeline.store.schema import Chunk, Embedding
from memory_pipeline.system import MemorySystem

DOCS = {
    "alpha": "# Alpha\n\nFAISS inner product search over normalised vectors is exact in flat mode.",
    "beta": "# Beta\n\nOkapi BM25 ranks documents by term frequency and inverse document frequency.",
    "gamma": "# Gamma\n\nNews knowledge decays with a half-life of weeks while principles never decay.",
}


def archive_file(system: MemorySystem) -> Path:
    return system.settings.archive_path / "chunks_archive.jsonl"


def health(system: MemorySystem, *, model_id: str | None = None) -> HealthReport:
    """The system's own report, or one checked against another model id."""
    if model_id is None:
        return system.index_health()
    return index_health(
        system.store, system.reader, archive_file(system), model_id, system.embedder.dim
    )


def findings(report: HealthReport, check: str) -> list[HealthFinding]:
    return [f for f in report.findings if f.check == check]


def one(report: HealthReport, check: str) -> HealthFinding:
    (found,) = findings(report, check)
    return found


def fill(system: MemorySystem, *, update: bool = True) -> list[int]:
    for title, text in DOCS.items():
        system.ingest_text(text, title)
    if update:
        system.update_index()
    return [int(i) for i in system.store.all_ids()]


def sql(system: MemorySystem, statement: str, **params: object) -> None:
    """Damage the store behind its API's back (no index change is queued)."""
    with system.store.engine.begin() as c:
        c.execute(sa.text(statement), params)


def test_empty_and_clean_memory_is_healthy(system: MemorySystem) -> None:
    empty = health(system)
    assert empty.healthy and {f.severity for f in empty.findings} == {"ok"}
    assert empty.index_version is None

    fill(system)
    report = health(system)
    assert report.healthy, report.render()
    assert {f.severity for f in report.findings} == {"ok"}
    assert {f.check for f in report.findings} >= {
        "index", "debris", "gaps", "pending", "pending_removal", "missing_vectors",
        "vectors_finite", "vector_dim", "vector_norm", "model_ids", "dense_sparse", "archive",
    }  # fmt: skip
    assert report.index_version == system.reader.current().manifest.version  # type: ignore[union-attr]
    assert set(report.timings) >= {"membership", "vectors", "archive"}
    assert json.loads(json.dumps(report.to_dict()))["healthy"] is True
    assert "healthy" in report.render() and "dense_sparse" in report.render()


def test_injected_debris_and_gaps_are_reported_exactly(system: MemorySystem) -> None:
    ids = fill(system)
    debris = [ids[0], ids[-1]]
    for cid in debris:
        sql(system, "DELETE FROM chunks WHERE id = :i", i=cid)

    # Gap 1: a fresh ingest whose queue rows vanish before any update.
    doc = system.ingest_text("# Delta\n\nZebra stripes confuse biting flies.", "delta").doc_id
    fresh = [c.id for c in system.store.document_chunks(doc)]
    sql(system, "DELETE FROM index_changes")
    # Gap 2: a chunk and its vector written straight into the tables.
    with system.store.engine.begin() as c:
        new_id = c.execute(
            sa.insert(Chunk).returning(Chunk.id),
            {
                "doc_id": doc,
                "chunk_index": 99,
                "content": "stray chunk",
                "content_sha": "x" * 64,
                "token_count": 2,
                "access_count": 0,
                "created_at": dt.datetime.now(dt.UTC),
            },
        ).scalar_one()
        vector = np.zeros(system.embedder.dim, np.float32)
        vector[0] = 1.0
        c.execute(
            sa.insert(Embedding),
            {
                "chunk_id": new_id,
                "model_id": system.embedder.model_id,
                "dim": system.embedder.dim,
                "vector": vector.tobytes(),
            },
        )
    gaps = sorted([*fresh, int(new_id)])

    report = health(system)
    assert not report.healthy
    assert (one(report, "debris").severity, one(report, "debris").count) == ("error", 2)
    assert one(report, "debris").examples == debris
    assert (one(report, "gaps").severity, one(report, "gaps").count) == ("error", len(gaps))
    assert one(report, "gaps").examples == gaps[:5]
    assert one(report, "pending").count == 0 and one(report, "pending_removal").count == 0
    assert "debris" in report.render() and "UNHEALTHY" in report.render()

    system.rebuild_index()
    assert health(system).healthy


def test_queued_changes_are_info_not_errors(system: MemorySystem) -> None:
    fill(system)
    doc = system.ingest_text("# Delta\n\nZebra stripes confuse biting flies.", "delta").doc_id
    added = [c.id for c in system.store.document_chunks(doc)]
    beta = system.store.documents_by_source("text:beta")[0].doc_id
    removed = [c.id for c in system.store.document_chunks(beta)]
    system.delete_document(beta)

    report = health(system)
    assert report.healthy, report.render()
    assert (one(report, "pending").severity, one(report, "pending").examples) == ("info", added)
    assert one(report, "pending_removal").severity == "info"
    assert one(report, "pending_removal").examples == removed
    assert one(report, "gaps").count == 0 and one(report, "debris").count == 0

    system.update_index()
    assert {f.severity for f in health(system).findings} == {"ok"}


def test_no_published_index_says_run_update_index(system: MemorySystem) -> None:
    ids = fill(system, update=False)
    queued = one(health(system), "index")
    assert (queued.severity, queued.count) == ("warning", len(ids))
    assert "update-index" in queued.message
    sql(system, "DELETE FROM index_changes")
    report = health(system)
    assert one(report, "index").severity == "error" and not report.healthy


def _vector(dim: int, kind: str) -> tuple[bytes, int]:
    base = np.full(dim, 1 / np.sqrt(dim), dtype=np.float32)
    if kind == "nan":
        base[3] = np.nan
    elif kind == "inf":
        base[0] = np.inf
    elif kind == "short":
        return base[:-1].tobytes(), dim  # blob shorter than its recorded dimension
    elif kind == "other_dim":
        return base[:-1].tobytes(), dim - 1
    elif kind == "long":
        base = base * 2
    return base.tobytes(), dim


@pytest.mark.parametrize(
    ("kind", "check", "severity"),
    [
        ("nan", "vectors_finite", "error"),
        ("inf", "vectors_finite", "error"),
        ("short", "vector_dim", "error"),
        ("other_dim", "vector_dim", "error"),
        ("long", "vector_norm", "warning"),
    ],
)
def test_bad_vectors(system: MemorySystem, kind: str, check: str, severity: str) -> None:
    ids = fill(system)
    blob, dim = _vector(system.embedder.dim, kind)
    sql(
        system,
        "UPDATE embeddings SET vector = :v, dim = :d WHERE chunk_id = :i",
        v=blob,
        d=dim,
        i=ids[1],
    )
    report = health(system)
    found = one(report, check)
    assert (found.severity, found.count, found.examples) == (severity, 1, [ids[1]])
    assert report.healthy is (severity != "error")


def test_mixed_model_ids_are_errors(system: MemorySystem) -> None:
    ids = fill(system)
    blob, dim = _vector(system.embedder.dim, "ok")
    sql(
        system,
        "INSERT INTO embeddings (chunk_id, model_id, dim, vector) VALUES (:i, 'other-model', :d, :v)",
        i=ids[0],
        d=dim,
        v=blob,
    )
    found = one(health(system), "model_ids")
    assert (found.severity, found.count, found.examples) == ("error", 1, ["other-model"])

    # An embedder of another model than the published index (and the stored vectors).
    report = health(system, model_id="new-model")
    assert not report.healthy
    assert any("published index" in f.message for f in findings(report, "model_ids"))
    assert one(report, "missing_vectors").count == len(ids)


def test_dense_sparse_disagreement(system: MemorySystem) -> None:
    ids = fill(system)
    version = system.reader.current()
    assert version is not None
    # A test may mutate the published folder; nothing else ever does.
    with SparseIndex.open(version.path / "sparse", writable=True) as sparse:
        sparse.delete([ids[1]])
        sparse.commit()
    found = one(health(system), "dense_sparse")
    assert (found.severity, found.count, found.examples) == ("error", 1, [ids[1]])
    assert "1 only dense" in found.message
    # A reader opened afterwards sees the same thing.
    fresh = index_health(
        system.store,
        IndexReader(system.settings.index_path),
        archive_file(system),
        system.embedder.model_id,
        system.embedder.dim,
    )
    assert one(fresh, "dense_sparse").examples == [ids[1]]


def test_archive_lines_that_do_not_parse(system: MemorySystem) -> None:
    fill(system)
    good = {"type": "chunk", "run_id": "r1", "chunk_id": 1, "doc_id": "d", "content": "x"}
    path = archive_file(system)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        json.dumps(good),
        '{"type": "chunk", "run_id": "r1", "chunk_id": 2,',  # torn
        json.dumps([good]),  # not an object
        json.dumps({k: v for k, v in good.items() if k != "content"}),
        "",
        json.dumps(good),
    ]
    path.write_bytes(("\n".join(lines) + "\n").encode() + b"\xff\xfe\n")
    found = one(health(system), "archive")
    assert found.severity == "warning"
    assert (found.count, found.examples) == (4, [2, 3, 4, 7])
    assert "line numbers" in found.message


def _parser(system: MemorySystem) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    register(sub, [], lambda _args: system)
    return parser


def test_health_cli_exit_codes(system: MemorySystem, capsys: pytest.CaptureFixture[str]) -> None:
    ids = fill(system)
    parser = _parser(system)
    args = parser.parse_args(["health"])
    assert args.func(args) == 0
    assert "healthy" in capsys.readouterr().out

    sql(system, "DELETE FROM chunks WHERE id = :i", i=ids[0])
    args = parser.parse_args(["health", "--json"])
    assert args.func(args) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["healthy"] is False
    debris = [f for f in data["findings"] if f["check"] == "debris"]
    assert debris[0]["examples"] == [ids[0]]


def test_stats_and_duplicates_commands_run_the_systems_reports(
    system: MemorySystem, capsys: pytest.CaptureFixture[str]
) -> None:
    fill(system)
    system.ingest_text(DOCS["alpha"] + "\n", "alpha copy", update_index=True)  # same text
    parser = _parser(system)
    args = parser.parse_args(["stats", "--json"])
    assert args.func(args) == 0
    stats = json.loads(capsys.readouterr().out)
    direct = system.system_stats().to_dict()
    same = ("documents", "chunks", "vectors_by_model", "embedder", "reranker_status", "index")
    assert {k: stats[k] for k in same} == {k: direct[k] for k in same}
    assert (stats["documents"], stats["chunks"], stats["embedder"]) == (4, 4, "hashing-bow-384")

    args = parser.parse_args(["duplicates", "--json", "--max-pairs", "5"])
    assert args.func(args) == 0
    audit = json.loads(capsys.readouterr().out)
    direct = system.duplicate_audit(threshold=0.95, max_pairs=5).to_dict()
    assert audit["model_id"] == direct["model_id"] == system.embedder.model_id
    assert audit["chunk_pairs"] == direct["chunk_pairs"] and len(audit["chunk_pairs"]) == 1
    assert audit["document_groups"] == direct["document_groups"]


def test_debris_and_gaps_on_each_backend(db_url: str, tmp_path: Path) -> None:
    from memory_pipeline.embedding.base import HashingEmbedder
    from tests.conftest import make_settings

    system = MemorySystem(make_settings(tmp_path, database_url=db_url), embedder=HashingEmbedder())
    try:
        ids = fill(system)
        sql(system, "DELETE FROM chunks WHERE id = :i", i=ids[0])
        doc = system.ingest_text("Zebra stripes confuse biting flies.", "delta").doc_id
        sql(system, "DELETE FROM index_changes")
        report = health(system)
        assert one(report, "debris").examples == [ids[0]]
        assert one(report, "gaps").examples == chunk_ids(system, doc)
    finally:
        system.close()


def chunk_ids(system: MemorySystem, doc_id: str) -> list[int]:
    return [c.id for c in system.store.document_chunks(doc_id)]


def test_unreadable_index_is_an_error_and_the_rest_still_runs(system: MemorySystem) -> None:
    fill(system)
    (system.settings.index_path / "CURRENT").write_text("not json")
    report = health(system)
    assert not report.healthy and report.index_version is None
    assert "rebuild-index" in one(report, "index").message
    assert one(report, "vectors_finite").severity == "ok" and one(report, "archive").count == 0


def test_an_index_built_with_older_token_rules_is_reported_and_rebuilt(
    system: MemorySystem,
) -> None:
    system.ingest_text("# 魚\n\nこの魚は春に卵を産む。", "fish")
    fill(system)
    version = system.reader.current()
    assert version is not None and version.manifest.tokenizer == TOKENIZER_ID
    assert not findings(health(system), "tokenizer")
    # As written before the token rules were recorded: no "tokenizer" in the manifest.
    manifest = version.path / "manifest.json"
    data = json.loads(manifest.read_text())
    del data["tokenizer"]
    manifest.write_text(json.dumps(data))
    stale = IndexReader(system.settings.index_path).current()
    assert stale is not None and stale.manifest.tokenizer == "mp-cjk-bigram-v1"
    warned = one(
        index_health(
            system.store,
            IndexReader(system.settings.index_path),
            archive_file(system),
            system.embedder.model_id,
            system.embedder.dim,
        ),
        "tokenizer",
    )
    assert warned.severity == "warning" and "run update-index" in warned.message
    # Nothing is queued, yet the update rebuilds: the old terms would miss new queries.
    result = system.update_index()
    assert result.kind == "rebuild" and result.n_sparse == len(system.store.all_ids())
    assert not findings(health(system), "tokenizer")
    hits = system.query(
        "卵は何色ですか", system.settings.search_request(top_k=1, use_reranker=False)
    )
    assert hits.hits[0].content.endswith("この魚は春に卵を産む。")
    assert hits.hits[0].stage_scores["sparse_rank"] == 1

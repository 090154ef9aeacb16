"""The forgetting batch and its restorable archive, on a real SQLite file and real index files."""

from __future__ import annotations

import argparse
import datetime as dt
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import sqlalchemy as sa

from memory_pipeline.cli.forgetting import register
from memory_pipeline.errors import InvalidInputError, NotFoundError
from memory_pipeline.memory import forgetting
from memory_pipeline.memory.archive import decode_vector
from memory_pipeline.memory.forgetting import (
    ForgettingRefusedError,
    ForgettingReport,
    RestoreReport,
    archived_keys,
    iter_archive,
    restore_archived,
    run_forgetting_batch,
)
from memory_pipeline.memory.scoring import CutReason, MemoryFields, MemoryParams, memory_score
from memory_pipeline.store import now_utc
from memory_pipeline.store.schema import ForgettingRun
from memory_pipeline.system import MemorySystem
from tests.system.test_bad_input import snapshot

OLD_NEWS = {"knowledge_type": "news", "source_date": "2020-01-01"}
PRINCIPLE = {"knowledge_type": "principle"}

CORPUS: list[tuple[str, dict[str, Any], str]] = [
    (
        "caching",
        PRINCIPLE,
        "Caches trade memory for latency. Invalidate a cache entry when its source changes, "
        "because a stale cache silently serves wrong answers to every reader that trusts it.",
    ),
    (
        "idempotence",
        PRINCIPLE,
        "An idempotent operation can be retried safely: applying it twice leaves the system in "
        "the same state as applying it once. Design retries around idempotent writes.",
    ),
    (
        "backpressure",
        PRINCIPLE,
        "Backpressure lets a slow consumer tell a fast producer to wait, so queues stay bounded "
        "and memory does not grow without limit under sustained overload.",
    ),
    (
        "checksums",
        {"knowledge_type": "paper"},
        "Checksums on every block detect silent disk corruption; end-to-end verification catches "
        "what hardware error correction misses in large storage fleets.",
    ),
    (
        "launch",
        OLD_NEWS,
        "The rocket launch was postponed by a week after engineers found a faulty valve in the "
        "second stage; the new window opens on Tuesday morning.",
    ),
    (
        "merger",
        OLD_NEWS,
        "Two regional airlines announced a merger that will combine their fleets and routes; "
        "regulators are expected to review the deal over the summer.",
    ),
    (
        "lowprinciple",
        {"knowledge_type": "principle", "importance": 0.05},
        "Tabs versus spaces is a matter of team convention; pick one formatter and let it decide "
        "so reviews stay about behaviour rather than whitespace.",
    ),
    (
        "wal",
        {"knowledge_type": "experiment"},
        "Write-ahead logging appends every change to a log before touching the data pages, so a "
        "crash can be recovered by replaying the log from the last checkpoint.",
    ),
]
QUERIES = [
    "stale cache wrong answers",
    "rocket launch postponed valve",
    "airlines merger regulators",
    "retries idempotent writes",
    "crash recovered replaying the log",
    "tabs spaces formatter",
]
PARAMS = MemoryParams(importance_threshold=0.1)


def archive_file(system: MemorySystem) -> Path:
    return system.settings.archive_path / "chunks_archive.jsonl"


def forget(system: MemorySystem, params: MemoryParams = PARAMS, **kw: Any) -> ForgettingReport:
    """No grace period unless asked: these chunks were ingested a moment ago."""
    kw.setdefault("grace_days", 0)
    return run_forgetting_batch(
        system.store, system.writer, archive_file(system), system.embedder, params, **kw
    )


def restore(system: MemorySystem, **kw: Any) -> RestoreReport:
    return restore_archived(
        system.store, system.writer, archive_file(system), system.embedder, **kw
    )


def ingest(system: MemorySystem, corpus: list[tuple[str, dict[str, Any], str]]) -> dict[str, str]:
    """Ingest each text as its own document; returns title -> doc_id."""
    ids = {t: system.ingest_text(text, t, meta).doc_id for t, meta, text in corpus}
    system.update_index()
    return ids


def results(system: MemorySystem) -> list[list[tuple[str, int, str]]]:
    """Top hits that match the query at all (zero-similarity filler ties break by chunk id)."""
    return [
        [
            (h.doc_id, h.chunk_index, h.content)
            for h in system.query(
                q, system.settings.search_request(top_k=5, record_access=False)
            ).hits
            if (h.stage_scores.get("sparse") or 0) > 0 or (h.stage_scores.get("dense") or 0) > 0
        ]
        for q in QUERIES
    ]


def runs(system: MemorySystem) -> list[ForgettingRun]:
    with system.store.read() as s:
        return list(s.scalars(sa.select(ForgettingRun)))


# ------------------------------------------------------------------- candidates
CANDIDATE_CASES: list[tuple[str, dict[str, Any], MemoryParams, str | None]] = [
    (
        "principle with low importance is cut",
        {"knowledge_type": "principle", "importance": 0.1},
        MemoryParams(importance_threshold=0.3),
        CutReason.IMPORTANCE.value,
    ),
    ("fresh principle stays", PRINCIPLE, MemoryParams(importance_threshold=0.3), None),
    (
        "ancient principle never decays",
        {"knowledge_type": "principle", "source_date": "1990-01-01"},
        MemoryParams(),
        None,
    ),
    ("old news fades", OLD_NEWS, MemoryParams(), CutReason.SCORE.value),
    ("fresh news stays", {"knowledge_type": "news"}, MemoryParams(), None),
    (
        "old paper fades",
        {"knowledge_type": "paper", "source_date": "2020-01-01"},
        MemoryParams(),
        CutReason.SCORE.value,
    ),
    (
        "unset importance passes the cut",
        {"knowledge_type": "experiment"},
        MemoryParams(importance_threshold=0.9),
        None,
    ),
    ("no knowledge_type is not aged", {"source_date": "2000-01-01"}, MemoryParams(), None),
]


@pytest.mark.parametrize(
    ("case", "metadata", "params", "reason"), CANDIDATE_CASES, ids=[c[0] for c in CANDIDATE_CASES]
)
def test_who_is_a_candidate(
    system: MemorySystem,
    case: str,
    metadata: dict[str, Any],
    params: MemoryParams,
    reason: str | None,
) -> None:
    system.ingest_text(f"A short note for the case {case}.", "note", metadata)
    now = now_utc()
    report = forget(system, params, now=now)
    assert report.dry_run and report.live_chunks == 1
    assert [c.reason for c in report.examples] == ([reason] if reason else [])
    if reason:
        (chunk,) = system.store.get_chunks(system.store.all_ids().tolist()).values()
        fields = MemoryFields(
            chunk.knowledge_type,
            chunk.importance,
            chunk.access_count,
            chunk.created_at,
            chunk.source_date,
        )
        assert report.examples[0].score == memory_score(fields, params, now).score
        assert report.by_type == {metadata.get("knowledge_type", "-"): {reason: 1}}


# --------------------------------------------------------------------- dry run
def test_dry_run_changes_nothing_byte_for_byte(system: MemorySystem) -> None:
    ingest(system, CORPUS)
    before = snapshot(system)
    report = forget(system, score_threshold=0.06, max_fraction=0.1)
    assert snapshot(system) == before
    assert not system.settings.archive_path.exists()
    assert runs(system) == []
    assert report.dry_run and report.params["dry_run"] is True and report.run_id is None
    assert report.candidates == 3 and report.refused  # 3 of 8 > 10 %: reported, not raised
    assert report.params["score_threshold"] == 0.06 and report.params["importance_threshold"] == 0.1
    text = report.render()
    assert "DRY RUN" in text and "--force" in text and "news" in text
    assert json.loads(json.dumps(report.to_dict(), default=str))["candidates"] == 3


# ---------------------------------------------------------- archive and restore
def test_archive_then_restore_gives_the_same_search_results(system: MemorySystem) -> None:
    docs = ingest(system, CORPUS)
    before = results(system)
    report = forget(system, max_fraction=0.5, dry_run=False)
    assert report.archived == report.candidates == 3
    assert report.by_type == {
        "news": {CutReason.SCORE.value: 2},
        "principle": {CutReason.IMPORTANCE.value: 1},
    }
    gone = {docs["launch"], docs["merger"], docs["lowprinciple"]}
    assert all(before) and sum(doc in gone for hits in before for doc, _, _ in hits) >= 3
    during = results(system)
    assert all(doc not in gone for hits in during for doc, _, _ in hits)
    assert during[0][0] == before[0][0]  # what was kept is still found
    assert len(archived_keys(system.store, archive_file(system))) == 3

    back = restore(system, run_id=report.run_id)
    assert (back.restored, back.reused_vectors, back.reembedded) == (3, 3, 0)
    assert back.skipped == [] and back.index_version is not None
    assert results(system) == before
    assert archived_keys(system.store, archive_file(system)) == set()
    for old_id, new_id in back.new_ids.items():
        assert new_id > old_id  # ids are never reused
        text = system.store.contents([new_id])[new_id]
        hits = system.query(text, system.settings.search_request(top_k=3, record_access=False)).hits
        assert new_id in [h.chunk_id for h in hits]
    with pytest.raises(NotFoundError, match="already restored"):
        restore(system, run_id=report.run_id)


def test_real_run_is_recorded_and_archive_lines_are_complete(system: MemorySystem) -> None:
    ingest(system, CORPUS)
    ids = system.store.all_ids().tolist()
    vectors = dict(zip(*system.store.vectors_for(ids, system.embedder.model_id), strict=True))
    chunks = system.store.get_chunks(ids)
    report = forget(system, max_fraction=0.5, dry_run=False)
    (run,) = runs(system)
    assert (run.run_id, run.status, run.dry_run) == (report.run_id, "archived", False)
    assert (run.n_candidates, run.n_archived) == (3, 3)
    assert run.finished_at is not None and run.finished_at >= run.created_at
    assert json.loads(run.params)["score_threshold"] == 0.05
    lines = list(iter_archive(archive_file(system)))
    assert len(lines) == 3 and all(err is None for _, _, err in lines)
    for _, record, _ in lines:
        assert record is not None
        assert set(record) == {
            "type", "run_id", "archived_at", "reason", "score", "chunk_id", "doc_id", "space",
            "chunk_index", "content", "index_text", "turns", "token_count", "knowledge_type", "importance", "tags",
            "access_count", "last_accessed_at", "created_at", "source_date", "model_id",
            "vector", "dim", "document",
        }  # fmt: skip
        assert set(record["document"]) >= {
            "source", "title", "fmt", "content_hash", "normalized_hash", "byte_size",
            "knowledge_type", "importance", "source_date", "source_date_rule", "created_at",
        }  # fmt: skip
        old = chunks[record["chunk_id"]]
        assert (record["doc_id"], record["chunk_index"], record["content"]) == (
            old.doc_id,
            old.chunk_index,
            old.content,
        )
        assert record["run_id"] == report.run_id and record["model_id"] == "hashing-bow-384"
        np.testing.assert_array_equal(decode_vector(record["vector"]), vectors[old.id])
        assert (record["score"] is None) == (record["reason"] == CutReason.IMPORTANCE.value)
    assert system.store.counts() == {"documents": 8, "chunks": 5}  # documents kept for restore
    assert "archived 3" in report.render()


def test_refuses_more_than_max_fraction_unless_forced(system: MemorySystem) -> None:
    ingest(system, CORPUS)
    before = snapshot(system)
    with pytest.raises(ForgettingRefusedError, match=r"3 of 8 live chunks.*force=True") as err:
        forget(system, dry_run=False)
    assert "--force" in str(err.value) and "(1)" in str(err.value)  # floor(0.2 * 8)
    assert snapshot(system) == before and not archive_file(system).exists()
    report = forget(system, dry_run=False, force=True)
    assert report.archived == 3 and report.refused
    assert system.store.counts()["chunks"] == 5


SELECTOR_ERRORS: list[tuple[dict[str, Any], type[Exception], str]] = [
    ({}, InvalidInputError, "exactly one"),
    ({"run_id": "x", "doc_id": "y"}, InvalidInputError, "got run_id, doc_id"),
    ({"chunk_ids": []}, InvalidInputError, "non-empty list"),
    ({"chunk_ids": ["1"]}, InvalidInputError, "integers"),
    ({"doc_id": " "}, InvalidInputError, "non-empty"),
    ({"run_id": "no-such-run"}, NotFoundError, "no such forgetting run"),
    ({"doc_id": "no-such-doc"}, NotFoundError, "nothing archived matches"),
    ({"chunk_ids": [10_000]}, NotFoundError, "nothing archived matches"),
]


@pytest.mark.parametrize(("kwargs", "error", "needle"), SELECTOR_ERRORS)
def test_restore_selector_errors(
    system: MemorySystem, kwargs: dict[str, Any], error: type[Exception], needle: str
) -> None:
    ingest(system, CORPUS)
    forget(system, max_fraction=0.5, dry_run=False)
    with pytest.raises(error, match=needle):
        restore(system, **kwargs)


def test_restoring_a_run_that_archived_nothing_says_so(system: MemorySystem) -> None:
    ingest(system, CORPUS)
    report = forget(system, MemoryParams(), dry_run=False, score_threshold=0.0)
    assert report.run_id is not None and report.archived == 0
    with pytest.raises(NotFoundError) as err:
        restore(system, run_id=report.run_id)
    assert str(err.value) == (
        f"nothing to restore for run {report.run_id}: that run archived nothing"
    )


def test_restore_by_chunk_id_and_by_document(system: MemorySystem) -> None:
    docs = ingest(system, CORPUS)
    report = forget(system, max_fraction=0.5, dry_run=False)
    records = {r["doc_id"]: r for _, r, _ in iter_archive(archive_file(system)) if r}
    one = records[docs["launch"]]["chunk_id"]
    back = restore(system, chunk_ids=[one, 424_242])
    assert back.restored == 1 and back.not_archived == [424_242]
    # the document was deleted meanwhile: restore recreates its row from the archive
    system.delete_document(docs["merger"])
    back = restore(system, doc_id=docs["merger"])
    assert back.restored == 1 and back.documents_recreated == 1
    assert system.store.get_document(docs["merger"]) is not None
    assert (
        system.query(
            "airlines merger", system.settings.search_request(top_k=1, record_access=False)
        )
        .hits[0]
        .doc_id
        == (docs["merger"])
    )
    assert len(archived_keys(system.store, archive_file(system))) == 1
    assert report.run_id is not None


def test_restore_skips_chunks_live_again(system: MemorySystem) -> None:
    docs = ingest(system, CORPUS)
    forget(system, max_fraction=0.5, dry_run=False)
    system.delete_document(docs["launch"])
    title, meta, text = CORPUS[4]
    assert system.ingest_text(text, title, meta).doc_id == docs["launch"]  # same bytes, same id
    back = restore(system, doc_id=docs["launch"])
    assert back.restored == 0 and len(back.skipped) == 1
    assert "live again" in back.skipped[0].reason and "skipped" in back.render()
    assert system.store.counts()["chunks"] == 6


def test_restore_reembeds_vectors_of_another_model(system: MemorySystem) -> None:
    ingest(system, CORPUS)
    ids = system.store.all_ids().tolist()
    original = dict(zip(*system.store.vectors_for(ids, system.embedder.model_id), strict=True))
    report = forget(system, max_fraction=0.5, dry_run=False)
    path = archive_file(system)
    records = [r for _, r, _ in iter_archive(path) if r]
    path.write_text(
        "".join(json.dumps({**r, "model_id": "some-older-model"}) + "\n" for r in records)
    )
    back = restore(system, run_id=report.run_id)
    assert (back.restored, back.reused_vectors, back.reembedded) == (3, 0, 3)
    found, matrix = system.store.vectors_for(list(back.new_ids.values()), system.embedder.model_id)
    for new_id, vec in zip(found.tolist(), matrix, strict=True):
        old_id = next(o for o, n in back.new_ids.items() if n == new_id)
        np.testing.assert_allclose(vec, original[old_id], atol=1e-6)


# ---------------------------------------------------------------- crash windows
def test_lines_of_an_interrupted_run_are_ignored(
    system: MemorySystem, monkeypatch: pytest.MonkeyPatch
) -> None:
    ingest(system, CORPUS)
    live = system.store.all_ids().tolist()

    def crash(*_: object) -> None:
        raise RuntimeError("killed between the archive append and the delete")

    monkeypatch.setattr(forgetting, "_delete_and_finish", crash)
    with pytest.raises(RuntimeError):
        forget(system, max_fraction=0.5, dry_run=False)
    monkeypatch.undo()
    (run,) = runs(system)
    assert run.status == "pending"
    assert len(list(iter_archive(archive_file(system)))) == 3  # lines are there …
    assert archived_keys(system.store, archive_file(system)) == set()  # … but do not count
    assert system.store.all_ids().tolist() == live
    with pytest.raises(NotFoundError, match="interrupted"):
        restore(system, run_id=run.run_id)

    with archive_file(system).open("ab") as fh:  # a run killed in the middle of a line
        fh.write(b'{"type": "chunk", "run_id": "half')
    report = forget(system, max_fraction=0.5, dry_run=False)
    errors = [err for _, rec, err in iter_archive(archive_file(system)) if rec is None]
    assert len(errors) == 1 and "not valid JSON" in errors[0]
    keys = archived_keys(system.store, archive_file(system))
    assert len(keys) == 3 and all(k.startswith(f"{report.run_id}:") for k in keys)
    assert restore(system, run_id=report.run_id).restored == 3


def test_index_failure_leaves_the_database_the_truth(
    system: MemorySystem, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = ingest(system, CORPUS)
    from memory_pipeline.errors import IndexBusyError

    def busy() -> None:
        raise IndexBusyError("another writer holds the lock")

    monkeypatch.setattr(system.writer, "update", busy)
    report = forget(system, max_fraction=0.5, dry_run=False)
    assert report.archived == 3 and "another writer" in (report.index_error or "")
    hits = system.query(
        "rocket launch postponed valve",
        system.settings.search_request(top_k=5, record_access=False),
    ).hits
    assert docs["launch"] not in {h.doc_id for h in hits}  # deleted ids are never served


# ------------------------------------------------------------------------- CLI
class _Front:
    """Stands in for the MemorySystem wrappers: the same keywords, straight to the core."""

    def __init__(self, system: MemorySystem) -> None:
        self.system = system

    def run_forgetting_batch(
        self,
        time_weight: float | None = None,
        freq_weight: float | None = None,
        importance_threshold: float | None = None,
        **kw: Any,
    ) -> ForgettingReport:
        defaults = MemoryParams()
        params = MemoryParams(
            time_weight=defaults.time_weight if time_weight is None else time_weight,
            freq_weight=defaults.freq_weight if freq_weight is None else freq_weight,
            importance_threshold=importance_threshold or 0.0,
        )
        return forget(self.system, params, **kw)

    def restore_archived(self, **kw: Any) -> RestoreReport:
        return restore(self.system, **kw)


def test_cli_forget_and_restore(
    system: MemorySystem, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    ingest(system, CORPUS)
    parser = argparse.ArgumentParser()
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--db")
    sub = parser.add_subparsers(dest="command", required=True)
    front = system if hasattr(system, "run_forgetting_batch") else _Front(system)
    register(sub, [common], lambda _args: front)  # type: ignore[arg-type,return-value]

    def run(*argv: str) -> str:
        args = parser.parse_args(argv)
        assert args.func(args) == 0
        return capsys.readouterr().out

    out = run("forget", "--importance-threshold", "0.1")
    assert "1 of 8 live chunks" in out  # the old news is inside its grace period
    out = run("forget", "--importance-threshold", "0.1", "--grace-days", "0")
    assert "DRY RUN" in out and "3 of 8 live chunks" in out and "importance_below" in out
    assert system.store.counts()["chunks"] == 8
    with pytest.raises(ForgettingRefusedError):
        run("forget", "--apply", "--importance-threshold", "0.1", "--grace-days", "0")
    data = json.loads(
        run(
            "forget",
            "--apply",
            "--importance-threshold",
            "0.1",
            "--max-fraction",
            "0.5",
            "--grace-days",
            "0",
            "--json",
        )
    )
    assert data["archived"] == 3 and data["dry_run"] is False
    assert system.store.counts()["chunks"] == 5
    out = run("restore", "--run-id", data["run_id"])
    assert "3 of 3 archived chunks back" in out
    assert system.store.counts()["chunks"] == 8
    with pytest.raises(SystemExit):
        parser.parse_args(["restore", "--run-id", "a", "--doc-id", "b"])
    assert parser.parse_args(["forget", "--dry-run"]).apply is False
    assert parser.parse_args(["restore", "--chunk-id", "3", "--chunk-id", "4"]).chunk_id == [3, 4]


def test_now_controls_age(system: MemorySystem) -> None:
    """Chunks are aged from created_at when they have no source_date."""
    ingest(system, [("fresh", {"knowledge_type": "news"}, "Breaking: the bridge reopened.")])
    assert forget(system, MemoryParams()).candidates == 0
    later = now_utc() + dt.timedelta(days=400)
    assert forget(system, MemoryParams(), now=later).candidates == 1


def test_archive_and_restore_on_both_backends(db_url: str, tmp_path: Path) -> None:
    from memory_pipeline.embedding.base import HashingEmbedder
    from tests.conftest import make_settings

    system = MemorySystem(make_settings(tmp_path, database_url=db_url), embedder=HashingEmbedder())
    try:
        ingest(system, CORPUS)
        before = results(system)
        report = forget(system, max_fraction=0.5, dry_run=False)
        assert report.archived == 3 and system.store.counts()["chunks"] == 5
        assert runs(system)[0].status == "archived"
        back = restore(system, run_id=report.run_id)
        assert back.restored == 3 and results(system) == before
        assert archived_keys(system.store, archive_file(system)) == set()
    finally:
        system.close()


# ---------------------------------------------------------------- grace period
SAMPLE_CORPUS = Path(__file__).resolve().parents[2] / "memory_pipeline" / "sample_corpus"
OLD_PAPER = (
    "Dense retrievers trained with hard negatives close most of the gap to cross-encoders on "
    "open-domain questions, while keeping query latency low enough to serve interactively."
)


def old_paper(system: MemorySystem, days_old: int = 667) -> list[int]:
    """A paper written ``days_old`` days ago, ingested now; its chunk ids."""
    day = (now_utc() - dt.timedelta(days=days_old)).date().isoformat()
    meta = {"knowledge_type": "paper", "source_date": day}
    doc_id = system.ingest_text(OLD_PAPER, "old paper", meta).doc_id
    return [c.id for c in system.store.get_chunks(system.store.all_ids().tolist()).values()
            if c.doc_id == doc_id]  # fmt: skip


def test_fresh_material_is_no_candidate_until_the_grace_is_over(system: MemorySystem) -> None:
    system.ingest(sorted(p for p in SAMPLE_CORPUS.glob("*.md") if p.name != "README.md"))
    paper = old_paper(system)
    live = len(system.store.all_ids())
    report = system.run_forgetting_batch()  # the defaults, minutes after ingest
    assert report.live_chunks == live and report.candidates == 0
    grace = system.settings.forgetting.grace_days
    later = now_utc() + dt.timedelta(days=grace + 1)
    report = system.run_forgetting_batch(now=later, examples=live)
    assert set(paper) <= {c.chunk_id for c in report.examples}
    assert {c.reason for c in report.examples} == {CutReason.SCORE.value}


def test_an_access_inside_the_grace_extends_it(system: MemorySystem) -> None:
    paper = old_paper(system)
    created = system.store.get_chunks(paper)[paper[0]].created_at
    system.store.record_access(paper, when=created + dt.timedelta(days=20))
    assert system.run_forgetting_batch(now=created + dt.timedelta(days=31)).candidates == 0
    assert system.run_forgetting_batch(now=created + dt.timedelta(days=51)).candidates == len(paper)


def test_grace_does_not_shield_an_importance_cut(system: MemorySystem) -> None:
    system.ingest_text("Tabs or spaces: let the formatter decide.", "low", {"importance": 0.05})
    report = system.run_forgetting_batch(
        memory=system.settings.memory_params(importance_threshold=0.1)
    )
    assert [c.reason for c in report.examples] == [CutReason.IMPORTANCE.value]


def test_grace_days_setting_and_override(system: MemorySystem) -> None:
    paper = old_paper(system)
    assert system.run_forgetting_batch(grace_days=0).candidates == len(paper)
    settings = system.settings.replace(grace_days=0)
    assert settings.forgetting.grace_days == 0

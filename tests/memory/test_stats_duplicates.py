"""System stats and the near-duplicate audit on a real memory; both read, neither writes."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from memory_pipeline.cli.reports import register
from memory_pipeline.errors import InvalidInputError
from memory_pipeline.memory.duplicates import duplicate_audit
from memory_pipeline.memory.stats import SystemStats, system_stats
from memory_pipeline.system import MemorySystem

WORDS = (
    "memory systems keep long lived knowledge for agents while retrieval pipelines rank "
    "passages by dense vectors sparse terms recency importance and access frequency so "
    "that old news fades principles stay experiments last a project"
)


def stats(system: MemorySystem) -> SystemStats:
    return system_stats(
        system.store,
        system.reader,
        embedder_id=system.embedder.model_id,
        reranker_status=system.reranker_status,
    )


def chunk_ids(system: MemorySystem, doc_id: str) -> list[int]:
    return [c.id for c in system.store.document_chunks(doc_id)]


def test_stats_counts_coverage_access_and_index(system: MemorySystem) -> None:
    empty = stats(system)
    assert (empty.documents, empty.chunks, empty.index) == (0, 0, None)
    assert "none published" in empty.render()

    paper = {"knowledge_type": "paper", "tags": ["ml", "faiss"], "importance": 0.8}
    system.ingest_text("FAISS flat search is exact.", "a", paper)
    paper_ml = {"knowledge_type": "paper", "tags": ["ml"]}
    b = system.ingest_text("BM25 weighs rare terms higher.", "b", paper_ml).doc_id
    c = system.ingest_text(
        "Zebra stripes confuse biting flies.", "c", {"knowledge_type": "news"}
    ).doc_id
    d = system.ingest_text("An untyped note without tags.", "d").doc_id
    system.update_index()
    for _ in range(3):  # searches that return the zebra chunk count as accesses
        assert (
            system.query("zebra stripes biting flies", system.settings.search_request(top_k=1))
            .hits[0]
            .doc_id
            == c
        )
    system.store.record_access(chunk_ids(system, d))
    for _ in range(10):
        system.store.record_access(chunk_ids(system, b))

    st = stats(system)
    assert (st.documents, st.chunks) == (4, 4)
    kinds = {k.knowledge_type: (k.documents, k.chunks) for k in st.by_knowledge_type}
    assert kinds == {"paper": (2, 2), "news": (1, 1), "unset": (1, 1)}
    assert (st.importance_set, st.importance_share) == (1, 0.25)
    assert (st.tagged_chunks, st.tag_coverage, st.distinct_tags) == (2, 0.5, 2)
    assert st.top_tags == [("ml", 2), ("faiss", 1)]
    assert st.access_buckets == {"0": 1, "1": 1, "2-4": 1, "5-9": 0, "10+": 1}
    assert st.total_accesses == 3 + 1 + 10
    assert st.index is not None and st.index.version == system.reader.current().manifest.version  # type: ignore[union-attr]
    assert st.index.size_bytes > 0 and st.index.n_dense == 4
    assert (st.embedder, st.reranker) == (system.embedder.model_id, "none")
    assert st.unindexed_chunks == 0 and st.vectors_by_model == {system.embedder.model_id: 4}
    data = json.loads(json.dumps(st.to_dict()))
    assert data["tag_coverage"] == 0.5 and data["top_tags"][0] == {"tag": "ml", "chunks": 2}
    text = st.render()
    assert "reranker: none" in text and "paper" in text and "10+" in text


@pytest.fixture
def duplicated(system: MemorySystem) -> dict[str, str]:
    docs = {
        "original": WORDS,
        "case_space": "  " + WORDS.upper().replace(" ", "   \n"),  # same normalised text
        "one_word": WORDS.replace("agents", "robots"),  # near-identical vector
        "other": "Tantivy segments are immutable; deletes go to separate files.",
    }
    ids = {name: system.ingest_text(text, name).doc_id for name, text in docs.items()}
    system.update_index()
    return ids


def test_duplicate_audit_groups_and_pairs_without_deleting(
    system: MemorySystem, duplicated: dict[str, str]
) -> None:
    before = system.store.counts()
    report = duplicate_audit(system.store, system.embedder.model_id, threshold=0.95)
    assert system.store.counts() == before

    assert len(report.document_groups) == 1
    group = report.document_groups[0]
    assert {d.doc_id for d in group.documents} == {duplicated["original"], duplicated["case_space"]}
    assert {d.title for d in group.documents} == {"original", "case_space"}

    pairs = {frozenset((p.doc_a, p.doc_b)): p for p in report.chunk_pairs}
    trio = [duplicated[n] for n in ("original", "case_space", "one_word")]
    assert set(pairs) == {frozenset((x, y)) for x in trio for y in trio if x < y}
    exact = pairs[frozenset(trio[:2])]
    assert exact.cosine == pytest.approx(1.0) and not exact.identical_text and not exact.same_doc
    assert 0.95 <= pairs[frozenset((trio[0], trio[2]))].cosine < 1.0
    assert all(duplicated["other"] not in key for key in pairs)
    assert (report.method, report.vectors_searched, report.truncated) == ("exact", 4, False)
    assert [p.cosine for p in report.chunk_pairs] == sorted(
        (p.cosine for p in report.chunk_pairs), reverse=True
    )
    assert "1 groups" in report.render() and "cosine" in report.render()


def test_duplicate_audit_ivf_and_truncation(
    system: MemorySystem, duplicated: dict[str, str]
) -> None:
    exact = duplicate_audit(system.store, system.embedder.model_id)
    ivf = duplicate_audit(system.store, system.embedder.model_id, exact_limit=2)
    assert ivf.method == "ivf"
    assert [(p.chunk_a, p.chunk_b) for p in ivf.chunk_pairs] == [
        (p.chunk_a, p.chunk_b) for p in exact.chunk_pairs
    ]
    top = duplicate_audit(system.store, system.embedder.model_id, max_pairs=1)
    assert top.truncated and top.chunk_pairs == exact.chunk_pairs[:1]
    strict = duplicate_audit(system.store, system.embedder.model_id, threshold=1.0)
    assert all(p.cosine >= 0.99999 for p in strict.chunk_pairs)


def test_pairs_inside_one_document_are_marked(system: MemorySystem) -> None:
    text = "\n\n".join([f"# Part {i}\n\n{WORDS}" for i in range(3)])
    doc = system.ingest_text(text, "repetitive").doc_id
    report = duplicate_audit(system.store, system.embedder.model_id, threshold=0.9)
    assert report.chunk_pairs and all(p.same_doc and p.doc_a == doc for p in report.chunk_pairs)


@pytest.mark.parametrize(("threshold", "max_pairs"), [(0.0, 10), (1.5, 10), (0.9, 0)])
def test_duplicate_audit_rejects_bad_arguments(
    system: MemorySystem, threshold: float, max_pairs: int
) -> None:
    with pytest.raises(InvalidInputError):
        duplicate_audit(system.store, "m", threshold=threshold, max_pairs=max_pairs)


def test_stats_and_duplicates_cli(
    system: MemorySystem,
    duplicated: dict[str, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    register(sub, [], lambda _args: system)

    args = parser.parse_args(["stats", "--json"])
    assert args.func(args) == 0
    assert json.loads(capsys.readouterr().out)["documents"] == 4

    out = tmp_path / "report.json"
    args = parser.parse_args(["duplicates", "--threshold", "0.97", "--output", str(out)])
    assert args.func(args) == 0
    assert "report written to" in capsys.readouterr().out
    saved = json.loads(out.read_text())
    assert saved["threshold"] == 0.97 and saved["method"] == "exact"
    assert len(saved["document_groups"]) == 1 and saved["chunk_pairs"]
    assert system.store.counts()["documents"] == 4

    with pytest.raises(SystemExit):
        parser.parse_args(["duplicates", "--threshold", "2"])

"""One contract for every index backend (``HYBRID_RAG_INDEX_BACKEND``), run on each.

Each test builds real memories (a SQLite file, or a database on the pgvector server)
with the deterministic hashing embedder and checks what a user relies on: what was
ingested is found at once, what was deleted or archived never comes back, filters
act before the cut, the memory axis orders as on ``local``, forgetting and restore
give the same results as before, health sees debris and gaps, a foreign model is
refused, and a memory space never sees another's chunks.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
import tantivy

from memory_pipeline.embedding.base import HashingEmbedder
from memory_pipeline.errors import ModelMismatchError
from memory_pipeline.index.backends.local.sparse_files import BODY_FIELD
from memory_pipeline.index.tokenizer import tokenize
from memory_pipeline.memory.forgetting import ForgettingReport
from memory_pipeline.spaces import Spaces
from memory_pipeline.system import MemorySystem
from memory_pipeline.types import SearchFilters
from tests.conftest import make_settings

# qdrant runs on Qdrant Edge (its default without a server); qdrant-local on
# qdrant-client's pure-Python local mode (HYBRID_RAG_QDRANT_MODE=local).
BACKENDS = ["local", "pgvector", "qdrant", "qdrant-local", "chroma"]
MODES = {"qdrant-local": {"qdrant_mode": "local"}}
NOW = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)

Factory = Callable[..., MemorySystem]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def open_memory(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Factory]:
    """Opens memories on ``backend``; every call with the same ``name`` shares one store."""
    opened: list[MemorySystem] = []
    urls: dict[str, str | None] = {}

    def factory(
        name: str = "a", *, embedder: HashingEmbedder | None = None, **kw: object
    ) -> MemorySystem:
        if name not in urls:
            urls[name] = (
                str(request.getfixturevalue("pgvector_url")) if backend == "pgvector" else None
            )
            if backend == "pgvector" and len(urls) > 1:
                raise AssertionError("one pgvector database per test")
        settings = make_settings(
            tmp_path / name,
            backend=backend.split("-")[0],
            database_url=urls[name],
            max_chunk_size=256,
            **MODES.get(backend, {}),
        ).replace(**kw)
        (tmp_path / name).mkdir(exist_ok=True)
        memory = MemorySystem(settings, embedder=embedder or HashingEmbedder())
        opened.append(memory)
        return memory

    yield factory
    for memory in opened:
        memory.close()


CORPUS = [
    ("design", "The index writer publishes a new version atomically.", "principle", 0.9, ["arch"]),
    ("faiss", "FAISS segments hold dense vectors for fast search.", None, 0.5, ["dense"]),
    ("bm25", "BM25 scores terms by frequency and rarity across chunks.", None, 0.5, []),
    ("news", "Release news: the index now supports spaces and backends.", "news", 0.3, ["news"]),
    ("paper", "A paper on hybrid search fusing dense and sparse scores.", "paper", 0.6, ["paper"]),
    ("exp", "Experiment log: recall of the index under deletes.", "experiment", 0.4, ["exp"]),
    ("jp", "記憶の索引は日本語でも検索できる。東京の会議メモ。", None, 0.5, ["ja"]),
    ("cats", "Cats sleep most of the day in the warm sun.", None, 0.2, []),
]
QUERIES = ["index version", "dense vectors search", "日本語の検索", "sun", "hybrid scores"]


def _fill(memory: MemorySystem, *, extra: int = 0) -> dict[str, str]:
    """The corpus (and ``extra`` filler documents about the index); title -> doc id."""
    out: dict[str, str] = {}
    for i, (title, text, kind, importance, tags) in enumerate(CORPUS):
        meta = {
            "knowledge_type": kind,
            "importance": importance,
            "tags": tags,
            "source_date": (NOW.date() - dt.timedelta(days=30 * i)).isoformat(),
        }
        out[title] = memory.ingest_text(text, title, meta).doc_id
    for i in range(extra):
        text = f"Filler note {i} about the index and the index version and the index writer."
        out[f"filler-{i}"] = memory.ingest_text(text, f"filler-{i}").doc_id
    return out


def _forget_some(memory: MemorySystem, share: float) -> ForgettingReport:
    """Archive about ``share`` of the live chunks: those lowest on the memory axis."""
    dry = memory.run_forgetting_batch(
        score_threshold=1.0, max_fraction=1.0, now=NOW, examples=500, grace_days=0
    )
    scores = sorted(c.score for c in dry.examples if c.score is not None)
    cut = scores[max(1, int(len(scores) * share)) - 1] + 1e-9
    run = memory.run_forgetting_batch(
        dry_run=False, score_threshold=cut, max_fraction=1.0, now=NOW, grace_days=0
    )
    assert 0 < run.archived < run.live_chunks
    return run


def _titles(
    memory: MemorySystem, query: str, *, filters: SearchFilters | None = None, **chosen: Any
) -> list[str]:
    request = memory.settings.search_request(**{"record_access": False, "top_k": 5, **chosen})
    return [h.title or "" for h in memory.query(query, request, filters=filters).hits]


def test_what_is_ingested_is_found_at_once(open_memory: Factory) -> None:
    memory = open_memory()
    _fill(memory)
    assert _titles(memory, "warm sun cats")[0] == "cats"  # no update_index
    memory.update_index()
    memory.ingest_text("Penguins waddle across the ice.", "penguins")
    assert _titles(memory, "penguins ice")[0] == "penguins"


@pytest.mark.parametrize("then", ["nothing", "update", "rebuild"])
def test_deleted_and_archived_never_return(open_memory: Factory, then: str) -> None:
    memory = open_memory()
    docs = _fill(memory)
    memory.update_index()
    memory.delete_document(docs["cats"])
    before = set(memory.store.all_ids().tolist())
    archived = _forget_some(memory, 0.3)
    live = set(memory.store.all_ids().tolist())
    assert archived.archived > 0 and len(live) == len(before) - archived.archived
    if then == "update":
        memory.update_index()
    elif then == "rebuild":
        memory.rebuild_index()
    for query in [*QUERIES, "cats warm sun"]:
        hits = memory.query(
            query, memory.settings.search_request(top_k=20, record_access=False)
        ).hits
        assert hits and {h.chunk_id for h in hits} <= live
        assert "cats" not in {h.title for h in hits}


@pytest.mark.parametrize(
    "filters",
    [
        SearchFilters(tags=("exp",)),
        SearchFilters(knowledge_types=("experiment",)),
        SearchFilters(
            source_date_from=(NOW - dt.timedelta(days=160)).date(),
            source_date_to=(NOW - dt.timedelta(days=140)).date(),
        ),
    ],
    ids=["tags", "knowledge_type", "date_window"],
)
def test_filters_act_before_the_cut(open_memory: Factory, filters: SearchFilters) -> None:
    """40 filler notes crowd 'index' out of a top 5; the filter still finds the log."""
    memory = open_memory(top_n=5)
    _fill(memory, extra=40)
    memory.update_index()
    assert "exp" not in _titles(memory, "index")
    assert _titles(memory, "index", filters=filters) == ["exp"]


def test_a_doc_id_filter_acts_before_the_cut(open_memory: Factory) -> None:
    memory = open_memory(top_n=5)
    docs = _fill(memory, extra=40)
    memory.update_index()
    only = SearchFilters(doc_ids=(docs["exp"], docs["cats"]))
    assert sorted(_titles(memory, "index sun", filters=only)) == ["cats", "exp"]


def _ranked(memory: MemorySystem) -> list[list[tuple[str, int]]]:
    out = []
    for query in QUERIES:
        for memory_axis in (False, True):
            hits = memory.query(
                query,
                memory.settings.search_request(
                    top_k=6,
                    record_access=False,
                    enable_memory_rerank=memory_axis,
                    enable_mmr=memory_axis,
                    now=NOW,
                ),
            ).hits
            out.append([(h.title or "", h.chunk_index) for h in hits])
    return out


def test_the_memory_axis_orders_as_on_local(
    open_memory: Factory, backend: str, tmp_path: Path
) -> None:
    memory = open_memory()
    _fill(memory, extra=5)
    memory.update_index()
    for h in memory.query(
        "index", memory.settings.search_request(top_k=3)
    ).hits:  # access counts feed the boost
        assert h.chunk_id
    local = MemorySystem(
        make_settings(tmp_path / "reference", max_chunk_size=256), embedder=HashingEmbedder()
    )
    try:
        _fill(local, extra=5)
        local.update_index()
        local.query("index", local.settings.search_request(top_k=3))
        assert _ranked(memory) == _ranked(local)
    finally:
        local.close()


def _bm25(memory: MemorySystem) -> list[list[tuple[int, float]]]:
    """Every query's BM25 top 50 as the backend's own sparse index ranks it."""
    view = memory.published()
    assert view is not None
    return [view.sparse.search(tokenize(q), 50) for q in QUERIES]


def test_bm25_scores_equal_the_local_ones(open_memory: Factory, tmp_path: Path) -> None:
    """One build of the same chunks: the same BM25 (Lucene's idf, tantivy's quantised
    lengths) on every backend, to float32 precision."""
    memory = open_memory()
    _fill(memory, extra=5)
    memory.rebuild_index()
    local = MemorySystem(
        make_settings(tmp_path / "reference", max_chunk_size=256), embedder=HashingEmbedder()
    )
    try:
        _fill(local, extra=5)
        local.rebuild_index()
        want = _bm25(local)
    finally:
        local.close()
    got = _bm25(memory)
    assert all(want)
    assert [[i for i, _ in ranked] for ranked in got] == [[i for i, _ in r] for r in want]
    for ranked, expected in zip(got, want, strict=True):
        assert [s for _, s in ranked] == pytest.approx([s for _, s in expected], rel=1e-5)


def _scored(memory: MemorySystem) -> list[set[tuple[str, float]]]:
    """Every chunk each query finds, with its score (restored chunks get new ids, so
    equal scores may change places: sets, not lists)."""
    return [
        {
            (h.title or "", round(h.score, 6))
            for h in memory.query(
                q, memory.settings.search_request(top_k=50, record_access=False)
            ).hits
        }
        for q in QUERIES
    ]


def test_forgetting_then_restore_gives_the_results_back(open_memory: Factory, backend: str) -> None:
    memory = open_memory()
    _fill(memory, extra=5)
    memory.update_index()
    before = _scored(memory)
    run = _forget_some(memory, 0.3)
    assert _scored(memory) != before
    memory.update_index()
    memory.restore_archived(run_id=run.run_id)
    memory.update_index()
    if backend in ("local", "chroma"):
        # tantivy (the BM25 side of both) keeps counting deleted documents in its BM25
        # statistics until their segments merge: equal scores again once rebuilt.
        memory.rebuild_index()
    assert _scored(memory) == before


def test_health_finds_gaps_and_debris(open_memory: Factory, backend: str) -> None:
    memory = open_memory()
    _fill(memory)
    memory.update_index()
    assert memory.index_health().healthy
    ids = sorted(memory.store.all_ids().tolist())
    if backend == "pgvector":
        with memory.store.engine.begin() as c:  # a gap: one vector row lost
            c.execute(sa.text("DELETE FROM pgv_vectors WHERE chunk_id = :i"), {"i": ids[0]})
            # Debris cannot exist: the index rows cascade from the chunks.
            with pytest.raises(sa.exc.IntegrityError), c.begin_nested():
                c.execute(
                    sa.text(
                        "INSERT INTO pgv_vectors SELECT 999999, embedding FROM pgv_vectors LIMIT 1"
                    )
                )
        found = {f.check: f for f in memory.index_health().findings}
        assert found["gaps"].severity == "error" and ids[0] in found["gaps"].examples
        assert found["dense_sparse"].severity == "error"
    else:
        with memory.store.write() as s:  # debris: a chunk gone without its queued delete
            s.execute(sa.text("DELETE FROM chunks WHERE id = :i"), {"i": ids[0]})
        found = {f.check: f for f in memory.index_health().findings}
        assert found["debris"].severity == "error" and ids[0] in found["debris"].examples


def test_a_foreign_model_is_refused(open_memory: Factory) -> None:
    memory = open_memory()
    _fill(memory)
    memory.update_index()
    other = open_memory(embedder=HashingEmbedder(dim=128))
    with pytest.raises(ModelMismatchError):
        other.ingest_text("Vectors of another model.", "foreign")
        other.update_index()
    with pytest.raises(ModelMismatchError):
        other.query("index version", other.settings.search_request(record_access=False))
    assert _titles(memory, "warm sun cats")[0] == "cats"  # the memory still serves


def test_a_space_never_sees_another(open_memory: Factory) -> None:
    memory = open_memory()
    _fill(memory)
    team = memory.bound(Spaces.bound("team"))
    team.ingest_text("The team's private roadmap mentions the index version.", "roadmap")
    team.ingest_text("Cats of the team sleep in the sun.", "team-cats")
    for step in ("before", "after"):
        for query in [*QUERIES, "roadmap", "cats sun"]:
            mine = {
                h.title
                for h in memory.query(
                    query, memory.settings.search_request(top_k=20, record_access=False)
                ).hits
            }
            theirs = {
                h.title
                for h in team.query(
                    query, team.settings.search_request(top_k=20, record_access=False)
                ).hits
            }
            assert not mine & {"roadmap", "team-cats"}, (step, query)
            assert theirs <= {"roadmap", "team-cats"}, (step, query)
        memory.update_index()
    both = MemorySystem(memory.settings, embedder=HashingEmbedder()).bound(
        Spaces.bound("default", ("team",))
    )
    try:
        assert "roadmap" in _titles(both, "roadmap", top_k=20)
    finally:
        both.close()


def test_a_turn_is_found_by_its_context_and_returned_as_said(open_memory: Factory) -> None:
    from memory_pipeline.ingest.loaders import load_text
    from memory_pipeline.ingest.turns import TurnText

    memory = open_memory()
    _fill(memory)
    said = dt.datetime(2023, 5, 8, tzinfo=dt.UTC)
    turns = (
        TurnText("t1", "Ana", said, "Did you book the ferry to Hydra?"),
        TurnText("t2", "Sam", said, "Yes, twice, oddly."),
    )
    doc = replace(load_text("Ana and Sam", "talk"), turns=turns)
    memory.ingest_loaded([doc], update_index=False)
    for step in ("unindexed", "indexed"):
        if step == "indexed":
            memory.update_index()
        hits = memory.query(
            "ferry Hydra", memory.settings.search_request(top_k=2, record_access=False)
        ).hits
        assert {h.content for h in hits} == {t.text for t in turns}, step
        assert {h.turns[0].turn_id for h in hits} == {"t1", "t2"}


def test_a_space_beside_another_finds_its_new_notes(open_memory: Factory) -> None:
    """A server bound to one space, with another space holding chunks, restricts its
    searches to its space's ids; once it has searched, what that space gains later
    (another process's ingest, its own) is found, before and after an index update."""
    memory = open_memory()
    _fill(memory)
    memory.update_index()
    writer = memory.bound(Spaces.bound("mine"))
    memory.bound(Spaces.bound("other")).ingest_text(
        "Walruses bask on the northern shore.", "walrus"
    )
    writer.ingest_text("Owls hunt at night in the forest.", "owls")
    server = MemorySystem(memory.settings, embedder=HashingEmbedder()).bound(Spaces.bound("mine"))
    try:
        notes = {"owls": "owls hunt night forest"}
        for i, step in enumerate(["nothing", "update", "rebuild", "server ingests", "update"]):
            for title, query in notes.items():  # the server has searched: its ids are known
                assert _titles(server, query)[:1] == [title], (step, title)
            note = f"Penguin number {i} waddles across the ice floe {i}."
            (server if step == "server ingests" else writer).ingest_text(note, f"penguin-{i}")
            notes[f"penguin-{i}"] = note
            if step == "update":
                memory.update_index()
            elif step == "rebuild":
                memory.rebuild_index()
            for title, query in notes.items():
                assert _titles(server, query)[:1] == [title], (step, title)
                assert "walrus" not in _titles(server, query, top_k=20)
        server.delete_document(
            server.query("owls night", server.settings.search_request(top_k=1)).hits[0].doc_id
        )
        assert "owls" not in _titles(server, "owls hunt night forest", top_k=20)
    finally:
        server.close()


def test_a_scrub_takes_a_stored_secret_out_of_what_the_backend_serves(
    open_memory: Factory, backend: str, tmp_path: Path
) -> None:
    """A token stored with redaction off is found by its words; after ``scrub --apply``
    the store, every hit and (for the backends that keep index files in the memory's
    folder) every index file hold none of it, and the rest is still found."""
    import random
    import string

    token = "ghp_" + "".join(random.Random(11).choices(string.ascii_letters + string.digits, k=36))
    memory = open_memory(redact="off")
    memory.ingest_text(f"The deploy key for the harbour service is {token} today.", "deploy")
    memory.ingest_text("The harbour service restarts nightly.", "restarts")
    memory.update_index()
    request = memory.settings.search_request(top_k=5, record_access=False)
    assert any(token in h.content for h in memory.query(f"harbour deploy {token}", request).hits)
    core = token[4:16]

    def leaks() -> list[str]:
        """Files under the memory's folder holding a piece of it, and BM25 terms (stored
        compressed: read term by term) that are."""
        files = [p for p in (tmp_path / "a").rglob("*") if p.is_file()]
        assert files or backend == "pgvector"  # whose index lives in the database
        found = [str(p.relative_to(tmp_path)) for p in files if core.encode() in p.read_bytes()]
        for folder in {p.parent for p in files if p.suffix == ".term"}:
            terms = tantivy.Index.open(str(folder)).searcher().terms_with_prefix(BODY_FIELD, "")
            found += [f"{folder.name}: {t}" for t, _ in terms if core.lower() in t]
        return found

    assert leaks() or backend == "pgvector", "the test means files that hold it"
    outcome = memory.scrub(apply=True)
    assert outcome.applied and dict(outcome.plan.by_kind) == {"github-token": 1}
    hits = memory.query(f"harbour deploy key {token}", request).hits
    assert hits and not [h for h in hits if token in h.content]
    assert any("[secret: github-token]" in h.content for h in hits)
    assert not memory.scrub().plan
    assert leaks() == []

"""Memory spaces, enforced by the store: one memory, several projects, no leaks.

Two systems share one database and one index folder, each bound to its own space
(as two MCP servers would be); what one stores the other cannot see, find, change or
delete, and its ids behave like ids that were never stored.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from memory_pipeline.embedding.base import HashingEmbedder
from memory_pipeline.errors import InvalidInputError, NotFoundError
from memory_pipeline.spaces import Spaces, check_space
from memory_pipeline.system import MemorySystem
from memory_pipeline.types import SearchFilters
from tests.conftest import make_settings

A_NOTES = {
    "a-harbour": "The harbour lanterns are lit at dusk by the night keeper.",
    "a-ledger": "Project A keeps its release ledger in the shared drive.",
}
B_NOTES = {
    "b-secret": "Project B's private note: the lanterns budget is confidential.",
    "b-plan": "Project B plans a harbour survey next spring.",
}


@pytest.fixture
def pair(tmp_path: Path, db_url: str) -> Iterator[tuple[MemorySystem, MemorySystem]]:
    """Two systems over one database (SQLite and PostgreSQL) and one index folder."""
    settings = make_settings(tmp_path, database_url=db_url)
    a = MemorySystem(settings, embedder=HashingEmbedder()).bound(Spaces.bound("project-a"))
    b = MemorySystem(settings, embedder=HashingEmbedder()).bound(Spaces.bound("project-b"))
    for title, text in A_NOTES.items():
        a.ingest_text(text, title, {"tags": ["team-a"]})
    for title, text in B_NOTES.items():
        b.ingest_text(text, title, {"tags": ["team-b"]})
    a.update_index()
    yield a, b
    a.close()
    b.close()


def _ids(system: MemorySystem, title: str) -> str:
    [hit] = [
        h
        for h in system.query(
            title, system.settings.search_request(top_k=10, record_access=False)
        ).hits
        if h.title == title
    ]
    return hit.doc_id


def test_search_returns_only_the_bound_space(pair: tuple[MemorySystem, MemorySystem]) -> None:
    a, b = pair
    for query in ("lanterns harbour", "Project B private budget", "survey spring"):
        titles = {
            h.title
            for h in a.query(query, a.settings.search_request(top_k=10, record_access=False)).hits
        }
        assert titles <= set(A_NOTES), query
        assert {
            h.title
            for h in b.query(query, b.settings.search_request(top_k=10, record_access=False)).hits
        } <= set(B_NOTES)


def test_ids_of_another_space_behave_like_missing_ids(
    pair: tuple[MemorySystem, MemorySystem],
) -> None:
    a, b = pair
    secret = _ids(b, "b-secret")
    missing = "0" * 32

    def message(call, doc_id: str) -> str:  # type: ignore[no-untyped-def]
        with pytest.raises(NotFoundError) as info:
            call(doc_id)
        return str(info.value).replace(doc_id, "<id>")

    for call in (
        a.get_document_chunks,
        a.delete_document,
        lambda d: a.set_chunk_tags(d, 0, importance=0.1),
    ):
        assert message(call, secret) == message(call, missing)
    # Nothing of B changed.
    chunks = b.get_document_chunks(secret)
    assert len(chunks) == 1 and chunks[0].importance is None
    assert a.find_by_tag("team-b") == [] and len(b.find_by_tag("team-b")) == 2
    # Filters that name B's ids find nothing either.
    named = a.query(
        "lanterns", a.settings.search_request(top_k=10), filters=SearchFilters(doc_ids=[secret])
    )
    assert named.hits == []


def test_counts_are_per_space(pair: tuple[MemorySystem, MemorySystem]) -> None:
    a, b = pair
    assert a.counts() == {"documents": 2, "chunks": 2} == b.counts()
    stats = a.system_stats()
    assert stats.documents == 2 and dict(stats.top_tags) == {"team-a": 2}


def test_bound_is_the_same_memory_under_another_binding(
    pair: tuple[MemorySystem, MemorySystem],
) -> None:
    """The settings bind a memory; ``bound`` gives the same parts (database, index,
    models) under another binding, and the binding it already has is itself."""
    a, _ = pair
    every = a.bound(Spaces.everything())
    assert a.bound(Spaces.bound("project-a")) is a
    assert every.spaces == every.store.spaces == Spaces.everything()
    assert every.store.engine is a.store.engine and every.backend is a.backend
    assert every.embedder is a.embedder and every.reranker is a.reranker
    assert every.counts() == {"documents": 4, "chunks": 4}
    assert a.counts() == {"documents": 2, "chunks": 2}


class CountingEmbedder(HashingEmbedder):
    """The test embedder, counting the passages it embeds."""

    def __init__(self) -> None:
        super().__init__()
        self.passages = 0

    def embed_documents(self, texts: Sequence[str], *, progress: bool = False) -> np.ndarray:
        self.passages += len(texts)
        return super().embed_documents(texts, progress=progress)


def test_the_same_file_is_stored_per_space_and_embedded_once(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    note = tmp_path / "shared-note.md"
    note.write_text("# Shared\n\nA principle both projects keep.\n\n" + "More text. " * 80)
    embedder = CountingEmbedder()
    a = MemorySystem(settings, embedder=embedder).bound(Spaces.bound("project-a"))
    b = MemorySystem(settings, embedder=embedder).bound(Spaces.bound("project-b"))
    try:
        [first] = a.ingest([note])
        embedded = embedder.passages
        [second] = b.ingest([note])
        assert first.doc_id != second.doc_id
        assert first.embedded == first.chunks > 1 and embedded > 1
        assert embedder.passages == embedded  # B reused A's vectors …
        # … and reports it as an empty memory would: B cannot tell that A holds the file.
        assert (second.embedded, second.reused_vectors) == (first.embedded, 0)
        a.delete_document(first.doc_id)
        assert len(b.get_document_chunks(second.doc_id)) == second.chunks
    finally:
        a.close()
        b.close()


def test_a_space_may_read_another_but_not_change_it(tmp_path: Path, db_url: str) -> None:
    settings = make_settings(tmp_path, database_url=db_url)
    shared = MemorySystem(settings, embedder=HashingEmbedder()).bound(Spaces.bound("shared"))
    reader = MemorySystem(settings, embedder=HashingEmbedder()).bound(
        Spaces.bound("project-a", ["shared"])
    )
    other = MemorySystem(settings, embedder=HashingEmbedder()).bound(Spaces.bound("project-b"))
    try:
        doc = shared.ingest_text("Principle: publish the index atomically.", "principle").doc_id
        hits = reader.query(
            "publish index atomically", reader.settings.search_request(top_k=5, record_access=False)
        ).hits
        assert [h.doc_id for h in hits] == [doc]
        assert (
            other.query("publish index atomically", other.settings.search_request(top_k=5)).hits
            == []
        )
        with pytest.raises(InvalidInputError, match="reads but does not write"):
            reader.delete_document(doc)
        with pytest.raises(InvalidInputError, match="reads but does not write"):
            reader.set_chunk_tags(doc, 0, importance=0.9)
        assert len(shared.get_document_chunks(doc)) == 1
    finally:
        for system in (shared, reader, other):
            system.close()


def test_filters_apply_before_the_cut_per_space(tmp_path: Path) -> None:
    """B holds 99% of the chunks; A's top-10 is the one a memory holding A alone returns.
    (Without the restriction before the cut, B takes the slots and A's list comes back
    short.)"""
    topics = ["harbour", "lantern", "ledger", "survey", "budget", "release", "keeper", "tide"]
    a_texts = [f"{topics[i % 8]} note {i} about {topics[(i * 3) % 8]} work" for i in range(20)]
    b_texts = [f"{topics[i % 8]} entry {i} on {topics[(i * 5) % 8]} matters" for i in range(1980)]
    shared = MemorySystem(make_settings(tmp_path / "shared"), embedder=HashingEmbedder()).bound(
        Spaces.bound("project-a")
    )
    alone = MemorySystem(make_settings(tmp_path / "alone"), embedder=HashingEmbedder())
    b = MemorySystem(make_settings(tmp_path / "shared"), embedder=HashingEmbedder()).bound(
        Spaces.bound("project-b")
    )
    try:
        for i, text in enumerate(a_texts):
            shared.ingest_text(text, f"a{i}")
            alone.ingest_text(text, f"a{i}")
        b.ingest_loaded([_text(t, f"b{i}") for i, t in enumerate(b_texts)], update_index=False)
        shared.update_index()
        alone.update_index()
        for query in topics:
            got = [
                h.content
                for h in shared.query(
                    query, shared.settings.search_request(top_k=10, record_access=False)
                ).hits
            ]
            want = [
                h.content
                for h in alone.query(
                    query, alone.settings.search_request(top_k=10, record_access=False)
                ).hits
            ]
            assert len(got) == 10 and got == want, query
    finally:
        for system in (shared, alone, b):
            system.close()


def _text(text: str, title: str):  # type: ignore[no-untyped-def]
    from memory_pipeline.ingest.loaders import load_text

    return load_text(text, title)


@pytest.mark.parametrize("name", ["", "Project", "a b", "-lead", "x" * 65, "naïve", None])
def test_a_bad_space_name_is_refused(name: object) -> None:
    with pytest.raises(InvalidInputError, match="space name"):
        check_space(name)


def test_a_database_from_before_spaces_keeps_every_search_result(
    tmp_path: Path, db_url: str
) -> None:
    """A memory made at revision 0003 (no spaces) is migrated on open: everything lands
    in ``default``, the ids stay, and every search returns what it returned before."""
    import sqlalchemy as sa
    from alembic import command

    from memory_pipeline.store import engine as store_engine

    settings = make_settings(tmp_path, database_url=db_url)
    system = MemorySystem(settings, embedder=HashingEmbedder())
    for title, text in {**A_NOTES, **B_NOTES}.items():
        system.ingest_text(text, title, {"tags": ["t"]})
    system.update_index()
    queries = ["lanterns harbour", "Project B budget", "release ledger", "survey"]
    before = {
        q: system.query(q, system.settings.search_request(top_k=10, record_access=False)).hits
        for q in queries
    }
    system.close()

    cfg = store_engine._alembic_config()
    old = sa.create_engine(settings.url)
    with old.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0003")
    with old.connect() as conn:
        columns = {c["name"] for c in sa.inspect(conn).get_columns("documents")}
    old.dispose()
    assert "space" not in columns  # the shape of a database made before spaces

    again = MemorySystem(settings, embedder=HashingEmbedder())
    try:
        after = {
            q: again.query(q, again.settings.search_request(top_k=10, record_access=False)).hits
            for q in queries
        }
        for q in queries:
            assert [(h.chunk_id, h.doc_id, h.score) for h in after[q]] == [
                (h.chunk_id, h.doc_id, h.score) for h in before[q]
            ], q
        assert again.find_by_tag("t") and again.counts()["documents"] == 4
    finally:
        again.close()


def test_reports_of_one_space_see_only_that_space(pair: tuple[MemorySystem, MemorySystem]) -> None:
    a, b = pair
    # The same note in both spaces is a duplicate in neither.
    a.ingest_text("An identical note, stored by both projects.", "twin")
    b.ingest_text("An identical note, stored by both projects.", "twin")
    a.update_index()
    report = a.duplicate_audit(threshold=0.99)
    assert report.document_groups == []
    visible = a.store.document_ids()
    assert len(visible) == 3
    assert all(p.doc_a in visible and p.doc_b in visible for p in report.chunk_pairs)
    forgetting = a.run_forgetting_batch(dry_run=True, score_threshold=1.0)
    assert forgetting.live_chunks == 3  # A's three chunks, not B's
    assert a.index_health().healthy


def test_forgetting_and_restoring_stay_in_their_space(
    pair: tuple[MemorySystem, MemorySystem],
) -> None:
    a, b = pair
    report = a.run_forgetting_batch(
        dry_run=False, score_threshold=1.0, max_fraction=1.0, grace_days=0
    )
    assert report.archived == 2 and b.counts()["chunks"] == 2 and a.counts()["chunks"] == 0
    assert report.run_id is not None
    with pytest.raises(NotFoundError, match="there is no such forgetting run"):
        b.restore_archived(run_id=report.run_id)
    restored = a.restore_archived(run_id=report.run_id)
    assert restored.restored == 2
    assert a.counts()["chunks"] == 2 and b.counts()["chunks"] == 2
    assert {
        h.title for h in a.query("lanterns ledger", a.settings.search_request(top_k=10)).hits
    } <= set(A_NOTES)


def test_reusing_a_vector_of_an_unreadable_space_reads_as_embedding(
    tmp_path: Path, db_url: str
) -> None:
    """What ingest reports about a text must not tell whether another space holds it."""
    text = B_NOTES["b-secret"] + "\n\n" + B_NOTES["b-plan"]

    def counts(system: MemorySystem) -> tuple[str, int, int, int]:
        r = system.ingest_text(text, "note", update_index=False)
        return r.status, r.chunks, r.embedded, r.reused_vectors

    empty = MemorySystem(make_settings(tmp_path / "empty"), embedder=HashingEmbedder())
    alone = counts(empty)
    empty.close()
    settings = make_settings(tmp_path, database_url=db_url)
    memory = {
        name: MemorySystem(settings, embedder=HashingEmbedder()).bound(spaces)
        for name, spaces in {
            "a": Spaces.bound("project-a"),
            "b": Spaces.bound("project-b"),
            "reader": Spaces.bound("project-c", also_read=["project-b"]),
        }.items()
    }
    try:
        assert counts(memory["b"]) == alone and alone[3] == 0
        assert counts(memory["a"]) == alone  # B's copy is reused, not reported
        _, chunks, _, _ = alone
        # A space that reads B may be told: it could find the text itself.
        assert counts(memory["reader"]) == ("ingested", chunks, 0, chunks)
    finally:
        for system in memory.values():
            system.close()


def test_restore_does_not_tell_which_texts_another_space_holds(tmp_path: Path) -> None:
    """A restored chunk whose archived vector is of an older model takes a vector of the
    same text from another space, and counts it as re-embedded, as if B held nothing."""
    settings = make_settings(tmp_path)
    a = MemorySystem(settings, embedder=HashingEmbedder()).bound(Spaces.bound("project-a"))
    b = MemorySystem(settings, embedder=HashingEmbedder()).bound(Spaces.bound("project-b"))
    try:
        text = B_NOTES["b-plan"]
        a.ingest_text(text, "plan")
        run = a.run_forgetting_batch(
            dry_run=False, score_threshold=1.0, max_fraction=1.0, grace_days=0
        )
        path = a.archive_file
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        path.write_text("".join(json.dumps({**r, "model_id": "older"}) + "\n" for r in lines))
        b.ingest_text(text, "plan")
        back = a.restore_archived(run_id=run.run_id)
        assert (back.restored, back.reused_vectors, back.reembedded) == (1, 0, 1)
    finally:
        a.close()
        b.close()


def test_the_cli_acts_in_its_space_and_all_spaces_only_when_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from memory_pipeline.cli.main import main

    storage = [
        "--db",
        str(tmp_path / "m.db"),
        "--index",
        str(tmp_path / "idx"),
        "--model",
        "hashing",
    ]
    notes = {}
    for name, text in {
        "a.md": "# A\n\nharbour lanterns at dusk",
        "b.md": "# B\n\n" + B_NOTES["b-secret"],
    }.items():
        (tmp_path / name).write_text(text)
        notes[name] = tmp_path / name

    def run(*args: str) -> tuple[int, str]:
        code = main([*args[:1], *storage, *args[1:]])
        out, _err = capsys.readouterr()
        return code, out

    assert run("ingest", "--space", "project-a", str(notes["a.md"]))[0] == 0
    assert run("ingest", "--space", "project-b", str(notes["b.md"]))[0] == 0
    code, out = run("search", "--space", "project-a", "--json", "confidential lanterns budget")
    hits = [h["content"] for h in json.loads(out)["hits"]]
    assert code == 0 and len(hits) == 1 and "harbour" in hits[0]
    code, out = run("stats", "--space", "project-a", "--json")
    assert json.loads(out)["documents"] == 1
    code, out = run("stats", "--space", "project-a", "--all-spaces", "--json")
    assert json.loads(out)["documents"] == 2
    code, out = run("forget", "--space", "project-a", "--score-threshold", "1", "--json")
    assert json.loads(out)["live_chunks"] == 1
    code, out = run("search", "--space", "project-a", "--read-space", "project-b", "--json", "x")
    hits = [h["content"] for h in json.loads(out)["hits"]]
    assert any("confidential" in h for h in hits)  # reading B is a binding the operator states
    code, out = run("stats", "--space", "Not A Space")
    assert code != 0


@pytest.mark.parametrize(
    ("program", "args", "env", "named", "not_named"),
    [
        ("cli", ["--space", "Not A Space"], {}, "--space:", "HYBRID_RAG_SPACE"),
        ("cli", ["--read-space", "Bad!"], {}, "--read-space:", "HYBRID_RAG_READ_SPACES"),
        ("cli", [], {"HYBRID_RAG_SPACE": "Bad!"}, "HYBRID_RAG_SPACE:", "--space"),
        ("server", ["--space", "Not A Space"], {}, "--space:", "HYBRID_RAG_SPACE"),
        ("server", ["--read-space", "Bad!"], {}, "--read-space:", "HYBRID_RAG_READ_SPACES"),
        ("server", [], {"HYBRID_RAG_SPACE": "Bad!"}, "HYBRID_RAG_SPACE:", "--space"),
    ],
)
def test_a_bad_space_is_named_by_where_it_came_from(
    program: str,
    args: list[str],
    env: dict[str, str],
    named: str,
    not_named: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A flag's value is refused under the flag's name, a variable's under the variable's."""
    from memory_pipeline.cli.main import main as cli
    from serving.__main__ import main as server

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(tmp_path)
    if program == "cli":
        code = cli(["stats", "--db", str(tmp_path / "m.db"), "--model", "hashing", *args])
    else:
        code = server(["--model", "hashing", *args])
    err = capsys.readouterr().err
    assert code == 2
    assert named in err and "space name" in err and not_named not in err, err
    assert not (tmp_path / "m.db").exists()


def test_a_sources_root_names_its_space(tmp_path: Path) -> None:
    from memory_pipeline.sources import sync
    from memory_pipeline.sources.ledger import open_ledger
    from memory_pipeline.sources.sources_file import load_sources

    (tmp_path / "notes").mkdir()
    (tmp_path / "principles").mkdir()
    (tmp_path / "notes" / "n.md").write_text("# Note\n\nproject lantern schedule")
    (tmp_path / "principles" / "p.md").write_text("# Principle\n\npublish the index atomically")
    sources = tmp_path / "sources.yaml"
    sources.write_text(
        "roots:\n  - path: notes\n  - path: principles\n    space: shared\n"
        "    knowledge_type: principle\n"
    )
    cfg = load_sources(sources)
    memory = MemorySystem(make_settings(tmp_path), embedder=HashingEmbedder()).bound(
        Spaces.bound("project-a")
    )
    shared = MemorySystem(make_settings(tmp_path), embedder=HashingEmbedder()).bound(
        Spaces.bound("shared")
    )
    try:
        with open_ledger(cfg.state_path) as ledger:
            plan = sync.plan_sync(memory.store, cfg, ledger)
            assert sorted(Path(p).name for p in plan.ingest) == ["n.md", "p.md"]
            report = sync.apply_sync(memory, cfg, plan, ledger)
            assert not report.failed and report.documents_added == 2
            # Level-based: nothing is left to ingest once each file is in its root's space.
            assert sync.plan_sync(memory.store, cfg, ledger).ingest == []
        assert memory.counts()["documents"] == 1 and shared.counts()["documents"] == 1
        assert [
            h.title
            for h in shared.query(
                "publish atomically", shared.settings.search_request(top_k=5)
            ).hits
        ] == ["Principle"]
        (tmp_path / "principles" / "p.md").unlink()
        with open_ledger(cfg.state_path) as ledger:
            plan = sync.plan_sync(memory.store, cfg, ledger)
            sync.apply_sync(memory, cfg, plan, ledger)
        assert shared.counts()["documents"] == 0 and memory.counts()["documents"] == 1
    finally:
        memory.close()
        shared.close()


def test_a_bad_space_in_the_sources_file_is_named(tmp_path: Path) -> None:
    from memory_pipeline.sources.sources_file import load_sources

    (tmp_path / "notes").mkdir()
    sources = tmp_path / "sources.yaml"
    sources.write_text("roots:\n  - path: notes\n    space: Shared Notes\n")
    with pytest.raises(InvalidInputError, match=r"roots\.0\.space"):
        load_sources(sources)


def test_bm25_statistics_are_those_of_the_space(tmp_path: Path) -> None:
    """A term that is rare in A but everywhere in B keeps A's weight in A's searches."""
    a_texts = ["alpha alpha gamma", "beta delta", "gamma epsilon", "delta zeta"]
    b_texts = [f"alpha filler{i}" for i in range(300)]
    shared = MemorySystem(make_settings(tmp_path / "s"), embedder=HashingEmbedder()).bound(
        Spaces.bound("a")
    )
    alone = MemorySystem(make_settings(tmp_path / "alone"), embedder=HashingEmbedder())
    try:
        for i, text in enumerate(a_texts):
            shared.ingest_text(text, f"a{i}")
            alone.ingest_text(text, f"a{i}")
        shared.bound(Spaces.bound("b")).ingest_loaded(
            [_text(t, f"b{i}") for i, t in enumerate(b_texts)]
        )
        shared.update_index()
        alone.update_index()

        def ranked(system: MemorySystem) -> list[tuple[str, float]]:
            version = system.published()
            assert version is not None
            hits = version.sparse.search(["alpha", "beta"], 10)
            texts = system.store.contents([cid for cid, _ in hits])
            return [(texts[cid], round(score, 4)) for cid, score in hits]

        assert ranked(shared) == ranked(alone)
        assert ranked(shared)[0][0] == "alpha alpha gamma"  # B's 300 alphas do not count
        every = shared.reader.current()
        assert every is not None and every.sparse.num_docs == len(a_texts) + len(b_texts)
    finally:
        shared.close()
        alone.close()


def test_a_search_over_two_spaces_merges_their_partitions(tmp_path: Path) -> None:
    """Reading A and shared: both BM25 partitions are searched, and a chunk not yet in
    the published index (in either space) is found at once."""
    settings = make_settings(tmp_path)
    shared = MemorySystem(settings, embedder=HashingEmbedder()).bound(Spaces.bound("shared"))
    reader = MemorySystem(settings, embedder=HashingEmbedder()).bound(
        Spaces.bound("project-a", ["shared"])
    )
    try:
        shared.ingest_text("shared lighthouse keeper rota", "shared-rota")
        reader.ingest_text("project lighthouse budget", "a-budget")
        reader.update_index()
        version = reader.published()
        assert version is not None and version.sparse.num_docs == 2  # both partitions
        titles = {
            h.title
            for h in reader.query("lighthouse", reader.settings.search_request(top_k=5)).hits
        }
        assert titles == {"shared-rota", "a-budget"}
        shared.ingest_text("shared lighthouse lamp schedule", "shared-lamp")  # not indexed yet
        hits = reader.query(
            "lighthouse lamp", reader.settings.search_request(top_k=5, record_access=False)
        )
        assert hits.hits[0].title == "shared-lamp" and hits.stats.unindexed_searched == 1
    finally:
        shared.close()
        reader.close()

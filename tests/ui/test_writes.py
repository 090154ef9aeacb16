"""Changing the memory from the viewer's pages, over a real memory (SQLite file, index
folder) through the viewer's ASGI app: a chunk's fields and a document's deletion go
through ``MemorySystem`` as the MCP tools do and are recorded as the page's; every write
refused (another site, no form token, a stale one, a read-only page, another space's
document) leaves the store exactly as it was: every row, the index, the archive.
"""

from __future__ import annotations

from collections.abc import Iterator
from html import unescape
from pathlib import Path
from typing import Any

import pytest

from memory_pipeline.embedding.base import HashingEmbedder
from memory_pipeline.memory.scoring import MemoryParams
from memory_pipeline.system import MemorySystem
from memory_pipeline.types import SearchFilters
from serving.harness import StoreLayout, snapshot
from tests.conftest import make_settings
from tests.ui.writing import form_of, post, viewer_client

NOTE = "\n\n".join(
    [
        "Decision: the session cache moves from Redis to SQLite with a five-minute TTL. "
        "Redis cost a server for a cache nobody measured; SQLite was enough in the load "
        "test, at a tenth of the latency budget.",
        "Revisit when sessions exceed ten thousand a day. The migration script keeps both "
        "for a week, reading SQLite first and Redis second, then drops Redis entirely.",
        "Rollback: set the cache backend back to Redis in the settings and restart; the "
        "SQLite file can stay, nothing reads it then, and it is rebuilt on the next move.",
        "Owners: the platform team runs the migration; the on-call engineer watches the "
        "hit rate and the p95 latency of session reads during the week both are kept.",
        "Open question: whether the rate limiter, which also sits on Redis today, follows "
        "the cache to SQLite or moves to the gateway's own counters next quarter.",
    ]
)
OTHER = "Zanzibar ledger: the other project's plan for quarterly llama shearing."


def _memory(tmp_path: Path, space: str = "default") -> MemorySystem:
    return MemorySystem(make_settings(tmp_path, space=space), embedder=HashingEmbedder())


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[MemorySystem]:
    system = _memory(tmp_path)
    system.ingest_text(NOTE, "Cache decision")
    system.update_index()
    yield system
    system.close()


def digest(system: MemorySystem) -> dict[str, Any]:
    """Every row of the store, the published index pointer and the archive, read apart
    from the code under test (``serving.harness.snapshot``)."""
    return snapshot(StoreLayout(system.settings.db_path.parent))


def _doc(system: MemorySystem, title: str = "Cache decision") -> str:
    return system.store.documents_by_source(f"text:{title}")[0].doc_id


def test_a_chunks_fields_set_from_its_form_are_stored_searchable_and_recorded(
    memory: MemorySystem,
) -> None:
    client = viewer_client(memory)
    doc = _doc(memory)
    page = client.get(f"/documents/{doc}").text
    fields = form_of(page, f"documents/{doc}/chunks/0")
    assert fields["importance"] == "" and fields["tags"] == ""
    sent = {**fields, "importance": "0.9", "knowledge_type": "principle", "tags": "cache, redis"}
    done = post(client, f"/documents/{doc}/chunks/0", sent)
    assert done.status_code == 303
    assert done.headers["location"] == f"/documents/{doc}?chunk=0&saved=1#chunk-0"
    chunk = memory.store.document_chunks(doc)[0]
    assert (chunk.importance, chunk.knowledge_type, sorted(chunk.tags)) == (
        0.9,
        "principle",
        ["cache", "redis"],
    )
    after = client.get(done.headers["location"]).text
    assert "Saved." in after and "importance 0.9" in after
    history = memory.history(doc_id=doc)
    assert sorted((c.field, c.actor, c.before, c.after) for c in history) == [
        ("importance", "page", None, 0.9),
        ("knowledge_type", "page", None, "principle"),
        ("tags", "page", [], ["cache", "redis"]),
    ]
    # searchable at once: the next search filters by what the page set
    request = memory.settings.search_request(top_k=5, record_access=False)
    found = memory.query(
        "session cache",
        request,
        filters=SearchFilters(tags=("redis",), knowledge_types=("principle",)),
    )
    assert [(h.doc_id, h.chunk_index) for h in found.hits] == [(doc, 0)]
    # an empty importance unsets it
    fields = form_of(after, f"documents/{doc}/chunks/0")
    assert fields["importance"] == "0.9"
    assert (
        post(client, f"/documents/{doc}/chunks/0", {**fields, "importance": ""}).status_code == 303
    )
    assert memory.store.document_chunks(doc)[0].importance is None


def test_only_the_fields_the_person_changed_are_written(memory: MemorySystem) -> None:
    """The agent re-tags the chunk while the page is open; the person then sets its
    importance: the agent's tags stand, and nothing is recorded for the untouched fields."""
    client = viewer_client(memory)
    doc = _doc(memory)
    fields = form_of(client.get(f"/documents/{doc}").text, f"documents/{doc}/chunks/0")
    memory.set_chunk_tags(doc, 0, tags=["from-the-agent"], actor="mcp")
    assert (
        post(client, f"/documents/{doc}/chunks/0", {**fields, "importance": "0.4"}).status_code
        == 303
    )
    chunk = memory.store.document_chunks(doc)[0]
    assert (chunk.importance, list(chunk.tags)) == (0.4, ["from-the-agent"])
    assert [(c.field, c.actor) for c in memory.history(doc_id=doc)] == [
        ("importance", "page"),
        ("tags", "mcp"),
    ]


@pytest.mark.parametrize(
    ("importance", "said"),
    [("2", "importance"), ("lots", "expected a number from 0 to 1")],
)
def test_a_bad_value_is_refused_and_changes_nothing(
    memory: MemorySystem, importance: str, said: str
) -> None:
    client = viewer_client(memory)
    doc = _doc(memory)
    fields = form_of(client.get(f"/documents/{doc}").text, f"documents/{doc}/chunks/0")
    before = digest(memory)
    sent = {**fields, "importance": importance, "tags": "kept-out"}
    refused = post(client, f"/documents/{doc}/chunks/0", sent)
    assert refused.status_code == 400
    assert said in unescape(refused.text) and "Nothing was changed." in refused.text
    assert digest(memory) == before


def test_every_forged_or_stale_write_is_refused_and_changes_nothing(
    memory: MemorySystem,
) -> None:
    client = viewer_client(memory)
    doc = _doc(memory)
    other = memory.ingest_text(OTHER, "Another note").doc_id
    page = client.get(f"/documents/{doc}").text
    fields = form_of(page, f"documents/{doc}/chunks/0")
    change = {**fields, "importance": "0.7"}
    path = f"/documents/{doc}/chunks/0"
    before = digest(memory)
    refusals = {
        "another site": post(client, path, change, origin="http://evil.example"),
        "no origin": client.post(path, data=change),
        "a referer elsewhere": client.post(
            path, data=change, headers={"referer": "http://evil.example/page"}
        ),
        "no form token": post(client, path, {k: v for k, v in change.items() if k != "form_token"}),
        "a made-up token": post(client, path, {**change, "form_token": "guessed"}),
        "another document's token": post(
            client,
            path,
            {
                **change,
                "form_token": form_of(
                    client.get(f"/documents/{other}").text, f"documents/{other}/chunks/0"
                )["form_token"],
            },
        ),
        "another run's token": post(
            viewer_client(memory),
            path,
            {
                **change,
                "form_token": form_of(
                    viewer_client(memory).get(f"/documents/{doc}").text, f"documents/{doc}/chunks/0"
                )["form_token"],
            },
        ),
    }
    for why, refused in refusals.items():
        assert refused.status_code == 403, why
        assert "nothing was changed" in refused.text.lower(), why
    assert digest(memory) == before
    # the page's own token, once: taken, then stale
    assert post(client, path, change).status_code == 303
    assert memory.store.document_chunks(doc)[0].importance == 0.7
    again = digest(memory)
    stale = post(client, path, {**change, "importance": "0.1"})
    assert stale.status_code == 403 and "stale" in stale.text
    assert digest(memory) == again


def test_a_read_only_page_has_no_forms_and_refuses_writes(memory: MemorySystem) -> None:
    doc = _doc(memory)
    token = form_of(
        viewer_client(memory).get(f"/documents/{doc}").text, f"documents/{doc}/chunks/0"
    )
    viewer = viewer_client(memory, read_only=True)
    page = viewer.get(f"/documents/{doc}").text
    assert "<form" not in page.replace('<form class="search"', "") and "Delete this" not in page
    before = digest(memory)
    for path in (f"/documents/{doc}/chunks/0", f"/documents/{doc}/delete"):
        refused = post(viewer, path, {**token, "importance": "0.3"})
        assert refused.status_code == 403 and "read-only" in refused.text
    assert viewer.get(f"/documents/{doc}/delete").status_code == 403
    assert digest(memory) == before


def test_a_page_bound_to_one_space_cannot_change_anothers_document(tmp_path: Path) -> None:
    """Editing the ids in a form's address reaches no other space's chunk: not one this
    page cannot see, nor one it only reads (shown without forms)."""
    ours = _memory(tmp_path, space="ours")
    theirs = ours.bound(ours.spaces.bound("theirs"))
    shared = ours.bound(ours.spaces.bound("shared"))
    reader = ours.bound(ours.spaces.bound("ours", also_read=["shared"]))
    try:
        mine = ours.ingest_text(NOTE, "Cache decision").doc_id
        hidden = theirs.ingest_text(OTHER, "Zanzibar ledger").doc_id
        common = shared.ingest_text(OTHER + " Shared.", "Shared ledger").doc_id
        client = viewer_client(reader)
        fields = form_of(client.get(f"/documents/{mine}").text, f"documents/{mine}/chunks/0")
        assert "<form" not in client.get(f"/documents/{common}").text.split("<h2>Chunks</h2>")[1]
        before = digest(ours)
        for doc in (hidden, common):
            refused = post(client, f"/documents/{doc}/chunks/0", {**fields, "importance": "0.2"})
            assert refused.status_code == 403
            assert client.get(f"/documents/{doc}/delete").status_code in (403, 404)
            assert post(client, f"/documents/{doc}/delete", fields).status_code == 403
        assert digest(ours) == before
        # a token tried on another document is spent; the page's next one changes it alone
        fields = form_of(client.get(f"/documents/{mine}").text, f"documents/{mine}/chunks/0")
        assert (
            post(client, f"/documents/{mine}/chunks/0", {**fields, "importance": "0.2"}).status_code
            == 303
        )
        assert ours.store.document_chunks(mine)[0].importance == 0.2
        assert theirs.store.document_chunks(hidden)[0].importance is None
        assert shared.store.document_chunks(common)[0].importance is None
    finally:
        ours.close()


def test_deleting_a_document_says_what_goes_and_what_stays(tmp_path: Path) -> None:
    memory = _memory(tmp_path)
    try:
        doc = memory.ingest_text(NOTE, "Cache decision").doc_id
        memory.ingest_text(OTHER, "Another note")
        memory.update_index()
        n_chunks = len(memory.store.document_chunks(doc))
        assert n_chunks >= 3
        memory.set_chunk_tags(doc, 1, importance=0.01)
        run = memory.run_forgetting_batch(
            memory=MemoryParams(importance_threshold=0.05),
            dry_run=False,
            max_fraction=1.0,
            grace_days=0,
        )
        assert run.archived == 1
        client = viewer_client(memory)
        page = client.get(f"/documents/{doc}").text
        assert f'href="documents/{doc}/delete"' in page
        confirm = client.get(f"/documents/{doc}/delete")
        text = unescape(confirm.text)
        left = n_chunks - 1
        assert f"its {left} chunks" in text and f"their {left} stored vectors" in text
        assert "1 of its chunks forgotten earlier" in text
        assert memory.store.get_document(doc) is not None  # looking deletes nothing
        fields = form_of(confirm.text, f"documents/{doc}/delete")
        done = post(client, f"/documents/{doc}/delete", fields)
        assert done.status_code == 200
        assert f"{left} chunks" in done.text and "The search index is updated" in done.text
        assert memory.store.get_document(doc) is None
        newest = memory.history(1, doc_id=doc)[0]
        assert (newest.field, newest.actor) == ("document", "page")
        request = memory.settings.search_request(top_k=10, record_access=False)
        hits = memory.query("Redis SQLite session cache TTL", request).hits
        assert hits and doc not in {h.doc_id for h in hits}
        assert memory.index_health().healthy
        assert client.get(f"/documents/{doc}").status_code == 404
        # the same form again: its token is spent
        assert post(client, f"/documents/{doc}/delete", fields).status_code == 403
    finally:
        memory.close()


def test_a_sessions_marks_stay_when_a_person_edits_its_tags(memory: MemorySystem) -> None:
    """The tags sessions are looked up by are shown beside the field, not in it, and a
    save keeps them, even from a form that claims they were in the field."""
    marks = ["conversation", "transcript_of:s-42", "transcript_last_activity:2026-12-01"]
    doc = memory.ingest_text(
        "Ana: keep Redis? Ben: no, SQLite.", "A session", {"tags": [*marks, "cache"]}
    ).doc_id
    client = viewer_client(memory)
    page = client.get(f"/documents/{doc}").text
    fields = form_of(page, f"documents/{doc}/chunks/0")
    assert fields["tags"] == fields["was_tags"] == "cache"
    assert "kept: conversation, transcript_last_activity:2026-12-01, transcript_of:s-42" in page
    done = post(client, f"/documents/{doc}/chunks/0", {**fields, "tags": "decision"})
    assert done.status_code == 303
    assert sorted(memory.store.document_chunks(doc)[0].tags) == sorted([*marks, "decision"])
    fields = form_of(client.get(f"/documents/{doc}").text, f"documents/{doc}/chunks/0")
    forged = {**fields, "was_tags": ", ".join([*marks, "decision"]), "tags": "decision"}
    assert post(client, f"/documents/{doc}/chunks/0", forged).status_code == 303
    assert sorted(memory.store.document_chunks(doc)[0].tags) == sorted([*marks, "decision"])
    assert memory.find_by_tag("transcript_of:s-42")

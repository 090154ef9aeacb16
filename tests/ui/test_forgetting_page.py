"""Forgetting from the viewer's pages, over a real memory through the viewer's ASGI app:
the candidates are the forgetting batch's own dry run (same chunks, scores, reasons);
only the chunks a person ticks are archived; the archive is searchable and its chunks
restored; looking archives nothing, and a refused write leaves the store as it was.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from memory_pipeline.embedding.base import HashingEmbedder
from memory_pipeline.system import MemorySystem
from serving.harness import StoreLayout, snapshot
from tests.conftest import make_settings
from tests.ui.writing import ORIGIN, post, viewer_client

NOTES = {
    "Old standup": "Standup notes: the printer on floor three jams on duplex jobs again.",
    "Lunch poll": "Lunch poll results: tacos won over ramen by two votes this week.",
    "Parking memo": "Parking memo: the garage closes early on Friday for repainting.",
    "Cache decision": "Decision: the session cache moves from Redis to SQLite with a TTL.",
}
#: The notes a person marked as unimportant: cut by the importance threshold.
WEAK = ("Old standup", "Lunch poll", "Parking memo")


def _memory(tmp_path: Path, space: str = "default", max_fraction: float = 1.0) -> MemorySystem:
    settings = make_settings(
        tmp_path, space=space, grace_days=0, importance_threshold=0.05, max_fraction=max_fraction
    )
    return MemorySystem(settings, embedder=HashingEmbedder())


def _fill(system: MemorySystem) -> dict[str, str]:
    docs = {title: system.ingest_text(text, title).doc_id for title, text in NOTES.items()}
    for title in WEAK:
        system.set_chunk_tags(docs[title], 0, importance=0.01)
    system.update_index()
    return docs


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[MemorySystem]:
    system = _memory(tmp_path)
    _fill(system)
    yield system
    system.close()


def _ticks(html: str) -> list[int]:
    return [int(v) for v in re.findall(r'name="chunk" value="(\d+)"', html)]


def _token(html: str) -> str:
    found = re.search(r'name="form_token" value="([^"]+)"', html)
    assert found is not None
    return found.group(1)


def _live(system: MemorySystem, title: str) -> bool:
    return bool(system.store.documents_by_source(f"text:{title}")) and bool(
        system.store.document_chunks(system.store.documents_by_source(f"text:{title}")[0].doc_id)
    )


def test_the_candidates_are_the_batchs_own(memory: MemorySystem) -> None:
    client = viewer_client(memory)
    layout = StoreLayout(memory.settings.db_path.parent)
    before = snapshot(layout)
    page = client.get("/forgetting").text
    assert client.get("/forgetting").status_code == 200
    assert snapshot(layout) == before  # looking archives nothing
    report = memory.run_forgetting_batch(dry_run=True, examples=200)
    assert report.candidates == len(WEAK)
    assert _ticks(page) == [c.chunk_id for c in report.examples]
    for c in report.examples:
        assert c.reason in page and c.snippet[:40] in page
    assert f"{report.candidates} of {report.live_chunks} chunks are candidates" in page


def test_only_the_ticked_chunks_are_archived_and_one_comes_back(memory: MemorySystem) -> None:
    client = viewer_client(memory)
    page = client.get("/forgetting").text
    standup, lunch, _parking = _ticks(page)
    healthy = memory.store.document_chunks(
        memory.store.documents_by_source("text:Cache decision")[0].doc_id
    )[0].id
    # two candidates ticked, and a chunk that is no candidate (an id edited in)
    sent = [("form_token", _token(page)), ("chunk", str(standup)), ("chunk", str(lunch))]
    sent.append(("chunk", str(healthy)))
    done = client.post("/forgetting", content=_encoded(sent), headers=_form_headers())
    assert done.status_code == 200, done.text
    assert "Archived 2 chunks" in done.text and "1 of the ticked chunks" in done.text
    assert [_live(memory, t) for t in NOTES] == [False, False, True, True]
    request = memory.settings.search_request(top_k=10, record_access=False)
    texts = {h.content for h in memory.query("printer duplex tacos ramen", request).hits}
    assert not any("printer" in t or "tacos" in t for t in texts)
    # the archive: both listed, searchable, one restored
    archive = client.get("/archive").text
    assert "2 of 2 archived chunks" in archive and "printer" in archive and "tacos" in archive
    narrowed = client.get("/archive?q=TACOS").text
    assert "1 of 2 archived chunks" in narrowed and "printer" not in narrowed
    assert _ticks(narrowed) == [lunch]
    back = client.post(
        "/archive/restore",
        content=_encoded([("form_token", _token(narrowed)), ("chunk", str(lunch))]),
        headers=_form_headers(),
    )
    assert back.status_code == 303 and back.headers["location"] == "/archive?restored=1"
    assert "Restored 1 chunk." in client.get(back.headers["location"]).text
    assert [_live(memory, t) for t in NOTES] == [False, True, True, True]
    hits = memory.query("tacos ramen lunch poll", request).hits
    assert any("tacos" in h.content for h in hits)
    assert "1 of 1 archived chunks" in client.get("/archive").text
    assert memory.index_health().healthy


def _encoded(pairs: list[tuple[str, str]]) -> str:
    from urllib.parse import urlencode

    return urlencode(pairs)


def _form_headers() -> dict[str, str]:
    return {"origin": ORIGIN, "content-type": "application/x-www-form-urlencoded"}


def test_a_refused_archive_or_restore_changes_nothing(tmp_path: Path) -> None:
    ours = _memory(tmp_path, space="ours")
    theirs = ours.bound(ours.spaces.bound("theirs"))
    try:
        _fill(ours)
        their_doc = theirs.ingest_text("Their memo about llamas.", "Llamas").doc_id
        theirs.set_chunk_tags(their_doc, 0, importance=0.01)
        their_chunk = theirs.store.document_chunks(their_doc)[0].id
        assert theirs.run_forgetting_batch(dry_run=False, max_fraction=1.0).archived == 1
        client = viewer_client(ours)
        page = client.get("/forgetting").text
        first, second, _ = _ticks(page)
        assert ours.run_forgetting_batch(dry_run=False, chosen=[second]).archived == 1
        layout = StoreLayout(tmp_path)
        before = snapshot(layout)
        refusals = {
            "no token": post(client, "/forgetting", {"chunk": str(first)}),
            "another site": post(
                client, "/forgetting",
                {"form_token": _token(client.get("/forgetting").text), "chunk": str(first)},
                origin="http://evil.example",
            ),
            "nothing ticked": post(client, "/forgetting", {"form_token": _token(page)}),
            "a token already used": post(
                client, "/forgetting", {"form_token": _token(page), "chunk": str(first)}
            ),
            "not a number": post(
                client, "/forgetting",
                {"form_token": _token(client.get("/forgetting").text), "chunk": "1; DROP"},
            ),
            "their archived chunk": post(
                client, "/archive/restore",
                {"form_token": _token(client.get("/archive").text), "chunk": str(their_chunk)},
            ),
        }  # fmt: skip
        strict = _memory(tmp_path, space="ours", max_fraction=0.2)
        try:
            capped = viewer_client(strict)
            refusals["over the run's limit"] = over = post(
                capped, "/forgetting",
                {"form_token": _token(capped.get("/forgetting").text), "chunk": str(first)},
            )  # fmt: skip
            assert "at most 0 chunks" in over.text and "HYBRID_RAG_FORGET_MAX_FRACTION" in over.text
        finally:
            strict.close()
        for why, refused in refusals.items():
            assert refused.status_code in (400, 403), why
            assert "nothing was changed" in refused.text.lower(), why
        assert "llamas" not in client.get("/archive").text.lower()
        # another space's live chunk ticked: no candidate here, so nothing is archived
        mine = ours.store.document_chunks(
            ours.store.documents_by_source("text:Cache decision")[0].doc_id
        )[0].id
        assert snapshot(layout) == before
        viewer = viewer_client(ours, read_only=True)
        assert 'name="chunk"' not in viewer.get("/forgetting").text
        assert (
            post(viewer, "/forgetting", {"form_token": "x", "chunk": str(mine)}).status_code == 403
        )
        assert snapshot(layout) == before
    finally:
        ours.close()

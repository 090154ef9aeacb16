"""The agent proposes, a person decides: the agent's changes to chunks (over MCP) wait on
the viewer's page until a person accepts one (it stands) or reverts it (the field goes
back, recorded as the page's); on SQLite and PostgreSQL, through ``MemorySystem`` and
through the page, with every refused verdict leaving the store as it was.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from html import unescape
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from memory_pipeline.embedding.base import HashingEmbedder
from memory_pipeline.errors import InvalidInputError, NotFoundError
from memory_pipeline.system import MemorySystem
from memory_pipeline.types import SearchFilters
from serving.harness import StoreLayout, snapshot
from tests.conftest import make_settings
from tests.ui.writing import ORIGIN, viewer_client

NOTES = {
    "Cache decision": "Decision: the session cache moves from Redis to SQLite with a TTL.",
    "Queue note": "The job queue stays on PostgreSQL: SKIP LOCKED is enough for our load.",
}


def _memory(tmp_path: Path, db_url: str | None = None, space: str = "default") -> MemorySystem:
    settings = make_settings(tmp_path, space=space)
    if db_url is not None:
        settings = settings.replace(database_url=db_url)
    return MemorySystem(settings, embedder=HashingEmbedder())


def _filled(system: MemorySystem) -> dict[str, str]:
    return {title: system.ingest_text(text, title).doc_id for title, text in NOTES.items()}


def test_the_agents_changes_wait_for_a_verdict(tmp_path: Path, db_url: str) -> None:
    system = _memory(tmp_path, db_url)
    try:
        docs = _filled(system)
        cache, queue = docs["Cache decision"], docs["Queue note"]
        system.set_chunk_tags(cache, 0, importance=0.2, tags=["redis"], actor="mcp")
        system.set_chunk_tags(queue, 0, knowledge_type="principle", actor="mcp")
        system.set_chunk_tags(queue, 0, tags=["by-a-person"], actor="page")  # not a proposal
        waiting = system.proposals()
        assert [(c.doc_id, c.field, c.after) for c in waiting] == [
            (queue, "knowledge_type", "principle"),
            (cache, "tags", ["redis"]),
            (cache, "importance", 0.2),
        ]
        by_field = {(c.doc_id, c.field): c for c in waiting}
        # accept: it stands, and leaves the list
        accepted = system.review_change(by_field[(cache, "importance")].id, "accept", actor="page")
        assert accepted.review == "accepted"
        assert system.store.document_chunks(cache)[0].importance == 0.2
        # revert: the field goes back, recorded as the person's
        reverted = by_field[(cache, "tags")]
        system.review_change(reverted.id, "revert", actor="page")
        assert list(system.store.document_chunks(cache)[0].tags) == []
        newest = system.history(1, doc_id=cache)[0]
        assert (newest.field, newest.actor, newest.before, newest.after) == (
            "tags",
            "page",
            ["redis"],
            [],
        )
        assert [c.id for c in system.proposals()] == [by_field[(queue, "knowledge_type")].id]
        assert {c.id: c.review for c in system.history(doc_id=cache)}[reverted.id] == "reverted"
        # a verdict once only
        with pytest.raises(InvalidInputError, match="already"):
            system.review_change(reverted.id, "accept", actor="page")
        # a later change stands: the revert is refused, nothing changes
        system.set_chunk_tags(queue, 0, knowledge_type="news", actor="cli")
        kind = by_field[(queue, "knowledge_type")]
        with pytest.raises(InvalidInputError, match="changed again since"):
            system.review_change(kind.id, "revert", actor="page")
        assert system.store.document_chunks(queue)[0].knowledge_type == "news"
        assert [c.id for c in system.proposals()] == [kind.id]
        with pytest.raises(InvalidInputError, match="accept or revert"):
            system.review_change(kind.id, "ignore", actor="page")
        # a deleted document's change can be accepted, not reverted
        system.delete_document(queue, actor="mcp")  # a deletion is no proposal
        with pytest.raises(InvalidInputError, match="its chunk is gone"):
            system.review_change(kind.id, "revert", actor="page")
        system.review_change(kind.id, "accept", actor="page")
        assert system.proposals() == []
        with pytest.raises(NotFoundError):
            system.review_change(10**6, "accept", actor="page")
    finally:
        system.close()


def test_another_spaces_change_is_out_of_reach(tmp_path: Path, db_url: str) -> None:
    ours = _memory(tmp_path, db_url, space="ours")
    theirs = ours.bound(ours.spaces.bound("theirs"))
    try:
        doc = theirs.ingest_text(NOTES["Queue note"], "Queue note").doc_id
        theirs.set_chunk_tags(doc, 0, importance=0.1, actor="mcp")
        [change] = theirs.proposals()
        assert ours.proposals() == []
        with pytest.raises(NotFoundError):
            ours.review_change(change.id, "revert", actor="page")
        assert theirs.store.document_chunks(doc)[0].importance == 0.1
        assert theirs.proposals() == [change]
    finally:
        ours.close()


# ---------------------------------------------------------------- the page
@pytest.fixture
def memory(tmp_path: Path) -> Iterator[MemorySystem]:
    system = _memory(tmp_path)
    yield system
    system.close()


def _token(html: str) -> str:
    found = re.search(r'name="form_token" value="([^"]+)"', html)
    assert found is not None, "no form on the page"
    return unescape(found.group(1))


def _verdict(client: TestClient, change_id: int, decision: str, token: str) -> Any:
    return client.post(
        f"/proposals/{change_id}",
        data={"form_token": token, "decision": decision},
        headers={"origin": ORIGIN},
    )


def test_a_person_accepts_and_reverts_on_the_page(memory: MemorySystem) -> None:
    docs = _filled(memory)
    cache, queue = docs["Cache decision"], docs["Queue note"]
    client = viewer_client(memory)
    assert "Nothing to review." in client.get("/proposals").text
    memory.set_chunk_tags(cache, 0, importance=0.95, actor="mcp")
    memory.set_chunk_tags(queue, 0, tags=["queue", "postgres"], actor="mcp")
    page = client.get("/proposals").text
    assert "importance unset → 0.95" in page and "tags [] → [postgres, queue]" in page
    assert "Redis to SQLite" in page  # the chunk's text, to decide on
    imp, tags = (c.id for c in sorted(memory.proposals(), key=lambda c: c.field))
    done = _verdict(client, tags, "revert", _token(page))
    assert done.status_code == 303 and done.headers["location"] == "/proposals?done=revert"
    after = client.get(done.headers["location"]).text
    assert "Reverted" in after and "postgres" not in after
    assert list(memory.store.document_chunks(queue)[0].tags) == []
    request = memory.settings.search_request(top_k=5, record_access=False)
    assert memory.query("job queue", request, filters=SearchFilters(tags=("queue",))).hits == []
    done = _verdict(client, imp, "accept", _token(after))
    assert done.status_code == 303
    assert "Nothing to review." in client.get("/proposals").text
    assert memory.store.document_chunks(cache)[0].importance == 0.95
    history = client.get(f"/documents/{cache}").text
    assert "mcp · importance unset → 0.95 · accepted" in unescape(history)


def test_a_refused_verdict_changes_nothing(tmp_path: Path, memory: MemorySystem) -> None:
    docs = _filled(memory)
    theirs = memory.bound(memory.spaces.bound("theirs"))
    other = theirs.ingest_text("Their note about llamas.", "Llamas").doc_id
    theirs.set_chunk_tags(other, 0, importance=0.3, actor="mcp")
    memory.set_chunk_tags(docs["Cache decision"], 0, importance=0.95, actor="mcp")
    [ours] = memory.proposals()
    [foreign] = theirs.proposals()
    client = viewer_client(memory)
    layout = StoreLayout(tmp_path)
    before = snapshot(layout)
    token = _token(client.get("/proposals").text)
    refused = {
        "no token": client.post(
            f"/proposals/{ours.id}", data={"decision": "revert"}, headers={"origin": ORIGIN}
        ),
        "another site": client.post(
            f"/proposals/{ours.id}",
            data={"form_token": token, "decision": "revert"},
            headers={"origin": "http://evil.example"},
        ),
        "another space's change": _verdict(
            client, foreign.id, "revert", _token(client.get("/proposals").text)
        ),
        "no such verdict": _verdict(client, ours.id, "drop", _token(client.get("/proposals").text)),
    }
    for why, response in refused.items():
        assert response.status_code in (400, 403), why
        assert "nothing was changed" in response.text.lower(), why
    assert snapshot(layout) == before
    viewer = viewer_client(memory, read_only=True)
    page = viewer.get("/proposals").text
    assert "importance unset → 0.95" in page and "<button" not in page
    assert _verdict(viewer, ours.id, "revert", token).status_code == 403
    assert snapshot(layout) == before


# ---------------------------------------------------------------- the command line
def test_review_lists_and_judges_from_the_command_line(tmp_path: Path) -> None:
    """``memory-pipeline review`` as a process: the waiting changes with their ids, then
    one accepted, one reverted (recorded as cli's), and a refused verdict (exit 1) that
    changes nothing."""
    import os

    from tests.capture.helpers import cli

    layout = StoreLayout(tmp_path / "memory")
    env = {**os.environ, **layout.env()}
    system = MemorySystem(
        make_settings(layout.root).replace(db_path=layout.db, index_path=layout.index),
        embedder=HashingEmbedder(),
    )
    try:
        docs = _filled(system)
        system.set_chunk_tags(docs["Cache decision"], 0, importance=0.95, actor="mcp")
        system.set_chunk_tags(docs["Queue note"], 0, tags=["queue"], actor="mcp")
        imp, tags = sorted(system.proposals(), key=lambda c: c.field)
        listed = cli("review", env=env)
        assert listed.returncode == 0, listed.stderr
        assert f"{imp.id}" in listed.stdout and "importance unset → 0.95" in listed.stdout
        done = cli("review", "--accept", str(imp.id), "--revert", str(tags.id), env=env)
        assert done.returncode == 0, done.stderr
        assert f"accepted change {imp.id}" in done.stdout
        assert f"reverted change {tags.id}" in done.stdout
        assert list(system.store.document_chunks(docs["Queue note"])[0].tags) == []
        assert system.history(1)[0].actor == "cli"
        before = snapshot(layout)
        again = cli("review", "--revert", str(tags.id), env=env)
        assert again.returncode == 1 and "was reverted already" in again.stdout
        assert "nothing changed" in again.stdout and snapshot(layout) == before
        assert "no change of the agent's waits" in cli("review", env=env).stdout
    finally:
        system.close()

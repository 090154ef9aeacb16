"""Changing the memory from its pages in a real browser: headless Chromium (driven over the
DevTools protocol, ``tests/ui/cdp.py``) fills and posts the forms of a real
``memory-pipeline ui`` process. Each change is checked on the page, in the store, and
through a real MCP client's ``hybrid_search`` (``python -m serving`` over stdio) right
after; a form another site serves is refused by the browser's own request.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from html import unescape
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from serving.harness import StoreLayout, snapshot, stdio_params, structured
from tests.ui.browser import memory_env, memory_in, sample_memory, serving
from tests.ui.cdp import Browser

QUERY = "reciprocal rank fusion"


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    sample_memory(tmp_path)
    return tmp_path


def agent_search(folder: Path, query: str, **arguments: Any) -> list[tuple[str, int]]:
    """``hybrid_search`` through a real MCP client over stdio: the hits' (doc_id, chunk)."""

    async def search() -> list[tuple[str, int]]:
        async with Client(stdio_params(memory_env(folder), folder)) as client:
            found = await client.call_tool("hybrid_search", {"query": query, **arguments})
        return [(c["doc_id"], c["chunk_index"]) for c in structured(found)["chunks"]]

    return anyio.run(search)


def set_fields(browser: Browser, chunk: int, **values: str) -> None:
    """Fill chunk ``chunk``'s form as a person would, and press its Save."""
    fills = "".join(
        f"f.elements[{json.dumps(k)}].value = {json.dumps(v)};" for k, v in values.items()
    )
    browser.submit(
        f"(() => {{ const f = document.querySelector('#chunk-{chunk} form.edit'); {fills}"
        " f.querySelector('button').click(); })()"
    )


def test_a_person_corrects_and_deletes_in_the_browser(folder: Path) -> None:
    memory = memory_in(folder)
    try:
        request = memory.settings.search_request(top_k=5, record_access=False)
        hits = memory.query(QUERY, request).hits
        doc, chunk = hits[0].doc_id, hits[0].chunk_index
        gone = next(h.doc_id for h in hits if h.doc_id != doc)
        gone_title = memory.store.get_document(gone).title  # type: ignore[union-attr]
        with serving(folder) as viewer, Browser() as browser:
            # set importance and re-tag
            browser.open(viewer.url(f"/documents/{doc}"))
            set_fields(
                browser,
                chunk,
                importance="0.95",
                knowledge_type="principle",
                tags="fusion-reviewed",
            )
            assert browser.status() == 200 and "Saved." in browser.text()
            assert f"#{chunk} · principle · importance 0.95" in browser.text()
            stored = memory.store.document_chunks(doc)[chunk]
            assert (stored.importance, stored.knowledge_type, list(stored.tags)) == (
                0.95,
                "principle",
                ["fusion-reviewed"],
            )
            assert {(c.field, c.actor) for c in memory.history(doc_id=doc)} == {
                ("importance", "page"),
                ("knowledge_type", "page"),
                ("tags", "page"),
            }
            filters = {"tags": ["fusion-reviewed"], "knowledge_types": ["principle"]}
            assert agent_search(folder, QUERY, filters=filters) == [(doc, chunk)]
            # re-tag again: the history grows on the page
            set_fields(browser, chunk, tags="fusion-reviewed, settled")
            changed = "page · tags [fusion-reviewed] → [fusion-reviewed, settled]"
            assert changed in unescape(browser.html())  # in the chunk's folded history
            assert agent_search(folder, QUERY, filters={"tags": ["settled"]}) == [(doc, chunk)]

            # delete a document: the confirmation, then the button
            browser.open(viewer.url(f"/documents/{gone}"))
            browser.submit("document.querySelector('a[href$=\"/delete\"]').click()")
            confirm = browser.text()
            n = len(memory.store.document_chunks(gone))
            assert f"Delete {gone_title}?" in confirm and f"its {n} chunk" in confirm
            assert memory.store.get_document(gone) is not None
            browser.submit("document.querySelector('form.delete button').click()")
            assert browser.status() == 200 and f"Deleted {gone_title}" in browser.text()
            assert memory.store.get_document(gone) is None
            assert gone not in {d for d, _ in agent_search(folder, QUERY, top_k=20)}
            browser.open(viewer.url(f"/documents/{gone}"))
            assert browser.status() == 404
    finally:
        memory.close()


def agent_sets(folder: Path, doc: str, chunk: int, **fields: Any) -> None:
    """``set_chunk_tags`` through a real MCP client over stdio: the agent's change."""

    async def call() -> None:
        env = {**memory_env(folder), "HYBRID_RAG_TOOLS": "all"}  # a maintenance tool
        async with Client(stdio_params(env, folder)) as client:
            arguments = {"doc_id": doc, "chunk_index": chunk, **fields}
            structured(await client.call_tool("set_chunk_tags", arguments))

    anyio.run(call)


def test_a_person_reviews_the_agents_changes_in_the_browser(folder: Path) -> None:
    memory = memory_in(folder)
    try:
        request = memory.settings.search_request(top_k=5, record_access=False)
        [first, second] = memory.query(QUERY, request).hits[:2]
        held = sorted(memory.store.document_chunks(first.doc_id)[first.chunk_index].tags)
        agent_sets(folder, first.doc_id, first.chunk_index, tags=["agent-says-core"])
        agent_sets(folder, second.doc_id, second.chunk_index, importance=0.05)
        [importance, tags] = memory.proposals()
        assert (importance.field, tags.field) == ("importance", "tags")
        with serving(folder) as viewer, Browser() as browser:
            browser.open(viewer.url("/proposals"))
            listed = browser.text()
            assert f"tags [{', '.join(held)}] → [agent-says-core]" in listed
            assert "importance unset → 0.05" in listed
            browser.submit(
                f"document.querySelector('#change-{importance.id} button[value=revert]').click()"
            )
            assert browser.status() == 200 and "Reverted" in browser.text()
            assert "importance unset → 0.05" not in browser.text()
            assert (
                memory.store.document_chunks(second.doc_id)[second.chunk_index].importance is None
            )
            browser.submit(
                f"document.querySelector('#change-{tags.id} button[value=accept]').click()"
            )
            assert "Accepted" in browser.text() and "Nothing to review." in browser.text()
        assert memory.proposals() == []
        reviews = {c.id: c.review for c in memory.history()}
        assert (reviews[importance.id], reviews[tags.id]) == ("reverted", "accepted")
        newest = memory.history(1)[0]
        assert (newest.actor, newest.field, newest.before, newest.after) == (
            "page",
            "importance",
            0.05,
            None,
        )
        # what the agent searches right after: the accepted tag holds, the reverted cut not
        assert agent_search(folder, QUERY, filters={"tags": ["agent-says-core"]}) == [
            (first.doc_id, first.chunk_index)
        ]
        stored = memory.store.document_chunks(second.doc_id)[second.chunk_index]
        assert stored.importance is None
    finally:
        memory.close()


#: Forgetting as a person would set it up to clear out what they marked unimportant.
FORGETTING = {
    "HYBRID_RAG_FORGET_GRACE_DAYS": "0",
    "HYBRID_RAG_IMPORTANCE_THRESHOLD": "0.05",
    "HYBRID_RAG_FORGET_MAX_FRACTION": "1.0",
}


def test_a_person_archives_two_candidates_and_restores_one_in_the_browser(
    folder: Path,
) -> None:
    memory = memory_in(folder)
    try:
        request = memory.settings.search_request(top_k=5, record_access=False)
        weak = memory.query(QUERY, request).hits[:3]
        for hit in weak:
            memory.set_chunk_tags(hit.doc_id, hit.chunk_index, importance=0.01)
        ids = [memory.store.document_chunks(h.doc_id)[h.chunk_index].id for h in weak]
        with serving(folder, env=FORGETTING) as viewer, Browser() as browser:
            browser.open(viewer.url("/forgetting"))
            assert browser.status() == 200
            listed = browser.evaluate(
                "[...document.querySelectorAll('input[name=chunk]')].map(b => +b.value)"
            )
            assert listed[:3] == sorted(ids)  # the importance cuts first, as the batch lists
            browser.submit(
                f"document.querySelector('input[value=\"{ids[0]}\"]').click();"
                f"document.querySelector('input[value=\"{ids[1]}\"]').click();"
                "document.querySelector('form[action=forgetting] button').click()"
            )
            assert "Archived 2 chunks" in browser.text()
            positions = [(h.doc_id, h.chunk_index) for h in weak]
            found = agent_search(folder, QUERY, top_k=20)
            assert positions[2] in found and not {*positions[:2]} & {*found}
            live = {(c.doc_id, c.chunk_index) for d in {p[0] for p in positions}
                    for c in memory.store.document_chunks(d)}  # fmt: skip
            assert (positions[0] in live, positions[1] in live, positions[2] in live) == (
                False,
                False,
                True,
            )
            # the archive: search it, restore one
            browser.open(viewer.url("/archive"))
            assert "2 of 2 archived chunks" in browser.text()
            browser.submit(
                f"document.querySelector('input[value=\"{ids[1]}\"]').click();"
                "document.querySelector('form[action=\"archive/restore\"] button').click()"
            )
            assert "Restored 1 chunk." in browser.text() and "1 of 1 archived" in browser.text()
            found = agent_search(folder, QUERY, top_k=20)
            assert positions[1] in found and positions[0] not in found
    finally:
        memory.close()


@contextmanager
def other_site(target: str) -> Iterator[str]:
    """A page on another port that posts a form to ``target`` (a forged write)."""
    page = (
        f'<!doctype html><form method="post" action="{target}">'
        '<input name="importance" value="0.01"><input name="was_importance" value="">'
        "<button>go</button></form>"
    ).encode()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/html; charset=utf-8")
            self.send_header("content-length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def test_a_form_from_another_site_changes_nothing(folder: Path) -> None:
    """The person's browser holds the viewer's cookie; another site's form posted to the
    viewer (even with the page's real form fields) is refused."""
    memory = memory_in(folder)
    doc = memory.store.recent_documents(1)[0].doc_id
    memory.close()
    layout = StoreLayout(folder)
    with serving(folder) as viewer, Browser() as browser:
        browser.open(viewer.url(f"/documents/{doc}"))  # the cookie, as after a visit
        token = browser.evaluate("document.querySelector('form.edit').form_token.value")
        before = snapshot(layout)
        with other_site(f"{viewer.base}/documents/{doc}/chunks/0") as evil:
            browser.open(evil)
            browser.evaluate(
                f"document.forms[0].insertAdjacentHTML('beforeend', "
                f"'<input name=form_token value={token}>')"
            )
            browser.submit("document.forms[0].querySelector('button').click()")
            assert browser.status() in (401, 403)
        assert snapshot(layout) == before


def test_a_read_only_page_shows_no_form(folder: Path) -> None:
    memory = memory_in(folder)
    doc = memory.store.recent_documents(1)[0].doc_id
    memory.close()
    with serving(folder, "--read-only") as viewer, Browser(width=390, height=844) as browser:
        browser.open(viewer.url(f"/documents/{doc}"))
        assert browser.status() == 200
        assert browser.evaluate("document.querySelectorAll('form.edit, form.delete').length") == 0
        assert "Delete this document" not in browser.text()
        browser.open(viewer.url(f"/documents/{doc}/delete"))
        assert browser.status() == 403 and "read-only" in browser.text()

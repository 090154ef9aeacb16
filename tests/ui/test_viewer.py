"""The viewer's pages over a real memory (SQLite file, index folder), through its ASGI app:
who may read (the token, the Host, the Origin), what a page bound to one space shows,
and search explained by the search's own stage scores.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator
from html import unescape
from importlib import resources
from pathlib import Path
from urllib.parse import urljoin

import pytest
from starlette.testclient import TestClient

from memory_pipeline.embedding.base import HashingEmbedder
from memory_pipeline.system import MemorySystem
from memory_pipeline.types import SearchFilters
from memory_pipeline.ui.app import build_app, cookie_name
from memory_pipeline.ui.pages import _value, ages, growth
from tests.conftest import make_settings

TOKEN = "t0ken-for-the-tests"
PORT = 8765
SAMPLES = sorted(
    p
    for p in Path(str(resources.files("memory_pipeline") / "sample_corpus")).glob("*.md")
    if p.name != "README.md"
)
OTHER = "Zanzibar ledger: the other project's secret plan for quarterly llama shearing."


def _memory(tmp_path: Path, space: str = "default") -> MemorySystem:
    return MemorySystem(make_settings(tmp_path, space=space), embedder=HashingEmbedder())


def _client(system: MemorySystem, host: str = "127.0.0.1") -> TestClient:
    app = build_app(system, token=TOKEN, host=host, port=PORT)
    return TestClient(app, base_url=f"http://{host}:{PORT}", follow_redirects=False)


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[MemorySystem]:
    system = _memory(tmp_path)
    system.ingest(SAMPLES)
    yield system
    system.close()


@pytest.fixture
def client(memory: MemorySystem) -> TestClient:
    client = _client(memory)
    client.cookies.set(cookie_name(PORT), TOKEN)
    return client


def _doc_id(memory: MemorySystem) -> str:
    return memory.store.recent_documents(1)[0].doc_id


def test_without_the_token_every_page_is_refused(memory: MemorySystem) -> None:
    client = _client(memory)
    doc = _doc_id(memory)
    for path in ["/", "/documents", "/search?q=fusion", f"/documents/{doc}", "/nowhere"]:
        refused = client.get(path)
        assert refused.status_code == 401, path
        assert "memory-pipeline ui" in refused.text and "fusion" not in refused.text.lower()
    client.cookies.set(cookie_name(PORT), "not-the-token")
    assert client.get("/").status_code == 401
    assert client.get("/?token=not-the-token").status_code == 401


def test_the_token_in_the_address_becomes_a_cookie(memory: MemorySystem) -> None:
    client = _client(memory)
    first = client.get(f"/search?q=rank+fusion&token={TOKEN}")
    assert first.status_code == 303
    assert first.headers["location"] == "/search?q=rank+fusion"  # the token is not kept
    cookie = first.headers["set-cookie"]
    assert cookie.startswith(f"{cookie_name(PORT)}={TOKEN};")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    then = client.get(first.headers["location"])
    assert then.status_code == 200 and "Why it ranks here" in then.text


def test_a_wrong_host_or_a_foreign_origin_is_refused(client: TestClient) -> None:
    assert client.get("/").status_code == 200
    assert client.get("/", headers={"host": f"attacker.example:{PORT}"}).status_code == 400
    assert client.get("/", headers={"host": "127.0.0.1:9999"}).status_code == 400
    foreign = client.get("/", headers={"origin": "http://attacker.example"})
    assert foreign.status_code == 403
    assert client.get("/", headers={"origin": f"http://127.0.0.1:{PORT}"}).status_code == 200
    other_port = client.get("/", headers={"origin": f"http://127.0.0.1:{PORT + 1}"})
    assert other_port.status_code == 403


def test_a_bind_beyond_loopback_still_needs_the_token(memory: MemorySystem) -> None:
    client = _client(memory, host="10.20.30.40")
    assert client.get("/").status_code == 401
    assert client.get(f"/?token={TOKEN}").status_code == 303
    assert client.get("/").status_code == 200


def test_search_explains_each_hit_with_the_searchs_own_scores(
    client: TestClient, memory: MemorySystem
) -> None:
    query = "reciprocal rank fusion"
    page = client.get("/search", params={"q": query, "top_k": 4}).text
    request = memory.settings.search_request(top_k=4, record_access=False)
    result = memory.query(query, request)
    articles = re.findall(r'<article class="hit".*?</article>', page, flags=re.S)
    assert len(articles) == len(result.hits) == 4
    for article, hit in zip(articles, result.hits, strict=True):
        assert f'href="documents/{hit.doc_id}?chunk={hit.chunk_index}' in article
        assert f"score {hit.score:.4f}" in article
        for value in hit.stage_scores.values():
            assert f'<span class="num">{_value(value)}</span>' in article
    assert "dense rank" in page and "BM25 rank" in page and "fused score" in page
    assert "<mark>" in articles[0]  # the query's words, highlighted


def test_the_memory_axis_stages_show_when_it_is_on(client: TestClient) -> None:
    page = client.get("/search", params={"q": "news decay", "memory": "on"}).text
    assert "decay (by knowledge type and age)" in page and "memory-axis score" in page


def test_a_document_opens_as_its_chunks(client: TestClient, memory: MemorySystem) -> None:
    doc = _doc_id(memory)
    page = client.get(f"/documents/{doc}", params={"chunk": 1}).text
    chunks = memory.store.document_chunks(doc)
    text = unescape(page)
    for chunk in chunks:
        assert chunk.content in text
        assert f'id="chunk-{chunk.chunk_index}"' in page
    assert 'class="chunk focus" id="chunk-1"' in page


def test_a_missing_document_or_a_bad_query_gets_a_clear_page(client: TestClient) -> None:
    missing = client.get("/documents/no-such-document")
    assert missing.status_code == 404 and "No document" in missing.text
    assert "Traceback" not in missing.text
    bad = client.get("/search", params={"q": "bad\x00query"})
    assert bad.status_code == 400 and "control character" in bad.text
    assert client.get("/nowhere").status_code == 404


def test_an_empty_memory_says_what_to_do(tmp_path: Path) -> None:
    system = _memory(tmp_path)
    try:
        client = _client(system)
        client.cookies.set(cookie_name(PORT), TOKEN)
        page = client.get("/").text
        assert "holds nothing yet" in page and "memory-pipeline ingest" in page
    finally:
        system.close()


def test_a_page_bound_to_one_space_never_shows_another(tmp_path: Path) -> None:
    """Every page reached by following links, and searches for the other space's words:
    none holds its text, its document id or its counts."""
    ours = _memory(tmp_path, space="ours")
    theirs = ours.bound(ours.spaces.bound("theirs"))
    try:
        ours.ingest(SAMPLES[:3])
        other = theirs.ingest_text(OTHER * 20, title="Zanzibar ledger")
        for_them = theirs.counts()
        client = _client(ours)
        client.cookies.set(cookie_name(PORT), TOKEN)
        seen, todo = set(), ["/", "/search?q=quarterly+shearing", "/search?q=secret+plan"]
        while todo:
            path = todo.pop()
            if path in seen:
                continue
            seen.add(path)
            page = client.get(path).text
            assert "zanzibar" not in page.lower() and "llama" not in page.lower(), path
            assert other.doc_id not in page, path
            todo += [urljoin("/", unescape(h)) for h in re.findall(r'href="([^"#]*)', page)]
        assert len(seen) > 5
        asked = [client.get(f"/documents?space={name}") for name in ("theirs", "nobodys")]
        assert [a.status_code for a in asked] == [404, 404]
        assert asked[0].text.replace("theirs", "nobodys") == asked[1].text  # no hint either way
        assert "zanzibar" not in asked[0].text.lower() and 'name="space"' not in seen_page(client)
        overview = client.get("/").text
        assert f"<b>{ours.counts()['documents']}</b>documents" in overview
        assert for_them["documents"] == 1
    finally:
        ours.close()


def test_the_overview_counts_the_sessions_of_its_spaces_only(tmp_path: Path) -> None:
    ours = _memory(tmp_path, space="ours")
    theirs = ours.bound(ours.spaces.bound("theirs"))
    try:
        ours.ingest_text("A note, not a session.", "note")
        for n in range(2):
            ours.ingest_text(f"user: session {n} of ours", f"s{n}", {"tags": ["conversation"]})
        for n in range(3):
            theirs.ingest_text(f"user: their session {n}", f"t{n}", {"tags": ["conversation"]})
        client = _client(ours)
        client.cookies.set(cookie_name(PORT), TOKEN)
        overview = client.get("/").text
        assert "<b>3</b>documents" in overview and "<b>2</b>of them sessions" in overview
        assert theirs.store.count_documents_tagged("conversation") == 3
    finally:
        ours.close()


def seen_page(client: TestClient) -> str:
    return client.get("/documents").text


def test_a_page_reading_several_spaces_narrows_the_timeline_to_one(tmp_path: Path) -> None:
    ours = _memory(tmp_path, space="ours")
    reader = ours.bound(ours.spaces.bound("ours", also_read=["shared"]))
    shared = ours.bound(ours.spaces.bound("shared"))
    try:
        mine = ours.ingest_text("Our own note about the deploy checklist.", title="ours note")
        common = shared.ingest_text("A shared note about code review.", title="shared note")
        shared.bound(shared.spaces.bound("hidden")).ingest_text(OTHER, title="Zanzibar ledger")
        client = _client(reader)
        client.cookies.set(cookie_name(PORT), TOKEN)
        every = client.get("/documents").text
        assert mine.doc_id in every and common.doc_id in every and "Zanzibar" not in every
        assert '<option value="shared">shared</option>' in every
        assert "<th>space</th>" in every
        only = client.get("/documents?space=shared").text
        assert common.doc_id in only and mine.doc_id not in only
        assert '<option value="shared" selected>' in only
        assert client.get("/documents?space=hidden").status_code == 404
        assert [d.doc_id for d in reader.store.recent_documents(10, space="ours")] == [mine.doc_id]
        assert reader.store.spaces_of([mine.doc_id, common.doc_id, "no-such-id"]) == {
            mine.doc_id: "ours",
            common.doc_id: "shared",
        }
    finally:
        ours.close()


def test_a_bind_other_machines_can_reach_needs_allow_remote(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from memory_pipeline.cli import main

    db = str(tmp_path / "memory.db")
    assert main(["ui", "--host", "0.0.0.0", "--db", db, "--model", "hashing"]) == 2
    said = capsys.readouterr().err
    assert "--allow-remote" in said and "Traceback" not in said
    assert not (tmp_path / "memory.db").exists()  # refused before the memory opened


def test_the_overview_charts_count_every_chunk_once(
    client: TestClient, memory: MemorySystem
) -> None:
    """Growth ends at the chunks held; the age chart gives each knowledge type its chunks,
    and every chunk falls in one age (the sample notes' dates are in 2025)."""
    page = client.get("/").text
    chunks = memory.counts()["chunks"]
    days = memory.store.chunk_days()
    assert growth(days)[-1][1] == chunks
    today = dt.date(2026, 12, 7)
    by_type = ages(days, today)
    stats = memory.system_stats()
    assert {k: sum(v) for k, v in by_type.items()} == {
        k.knowledge_type: k.chunks for k in stats.by_knowledge_type
    }
    assert 'class="chart growth"' in page and f": {chunks} chunks</p>" in page
    shown = re.findall(r"<title>([a-z]+), [^:]+: (\d+) chunks</title>", page)
    assert sum(int(n) for _, n in shown) == chunks
    older = [n for name, counts in by_type.items() for n in counts[:-2]]
    assert sum(older) == 0  # dated 2025: none within a quarter of 2026-12-07


def test_the_search_form_sends_hybrid_searchs_request(
    client: TestClient, memory: MemorySystem
) -> None:
    """Filters, other phrasings, a window of dates, MMR: the page's hits are those of
    ``MemorySystem.query`` with the same request, and the form keeps what was sent."""
    sent = {
        "q": "how should memories age",
        "knowledge_type": ["principle", "news"],
        "rewrites": "decay by knowledge type\nold news fades",
        "from": "2025-03-01",
        "to": "2025-12-31",
        "diversify": "on",
        "top_k": "3",
    }
    page = client.get("/search", params=sent).text
    request = memory.settings.search_request(top_k=3, record_access=False, enable_mmr=True)
    filters = SearchFilters(
        knowledge_types=("principle", "news"),
        source_date_from=dt.date(2025, 3, 1),
        source_date_to=dt.date(2025, 12, 31),
    )
    rewrites = ["decay by knowledge type", "old news fades"]
    expected = memory.query(sent["q"], request, filters=filters, rewrites=rewrites).hits
    shown = re.findall(r'<article class="hit".*?href="documents/([0-9a-f]+)\?chunk=(\d+)', page)
    assert shown == [(h.doc_id, str(h.chunk_index)) for h in expected] and expected
    assert {h.knowledge_type for h in expected} <= {"principle", "news"}
    assert 'value="principle" checked' in page and 'value="paper">' in page
    assert 'name="diversify" checked' in page and "old news fades</textarea>" in page
    bad = client.get("/search", params={"q": "news", "from": "March"})
    assert bad.status_code == 400 and "expected a date as YYYY-MM-DD" in bad.text


def test_the_overview_shows_the_published_index(client: TestClient, memory: MemorySystem) -> None:
    stats = memory.system_stats()
    assert stats.index is not None
    page = client.get("/").text
    assert f"version {stats.index.version} (" in page and f"{stats.index.n_dense} vectors" in page
    assert stats.embedder in page

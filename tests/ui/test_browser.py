"""The viewer in a real browser: headless Chromium over a real ``memory-pipeline ui``
process on loopback, serving a real memory (the sample corpus in a SQLite file and an
index folder). Each page read is checked against the store.
"""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path

import pytest

from tests.ui.browser import WIDTHS, dom, memory_in, sample_memory, screenshot, serving


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("ui-memory")
    sample_memory(folder)
    return folder


def test_search_then_the_hits_document_in_the_browser(folder: Path) -> None:
    query = "reciprocal rank fusion"
    with serving(folder) as viewer:
        page = dom(viewer.url(f"/search?q={query.replace(' ', '+')}&top_k=3"))
        hits = re.findall(r'<article class="hit".*?</article>', page, flags=re.S)
        memory = memory_in(folder)
        try:
            request = memory.settings.search_request(top_k=3, record_access=False)
            expected = memory.query(query, request).hits
            assert len(hits) == len(expected) == 3
            for article, hit in zip(hits, expected, strict=True):
                assert f'href="documents/{hit.doc_id}?chunk={hit.chunk_index}' in article
                assert "Why it ranks here" in article and "fused score" in article
            first = expected[0]
            link = re.search(r'href="(documents/[^"]+)"', hits[0])
            assert link is not None
            opened = dom(viewer.url("/" + unescape(link.group(1))))
            chunks = memory.store.document_chunks(first.doc_id)
            assert f"<h1>{first.title}</h1>" in unescape(opened)
            text = unescape(re.sub(r"<[^>]+>", "", opened))
            for chunk in chunks:
                assert chunk.content in text
            assert f'class="chunk focus" id="chunk-{first.chunk_index}"' in opened
        finally:
            memory.close()


def test_the_timeline_lists_every_document_newest_first(folder: Path) -> None:
    with serving(folder) as viewer:
        page = dom(viewer.url("/documents"))
    memory = memory_in(folder)
    try:
        docs = memory.store.recent_documents(100)
    finally:
        memory.close()
    listed = re.findall(r'href="documents/([0-9a-f]+)"', page)
    assert listed == [d.doc_id for d in docs] and len(listed) == 5  # four notes, a session
    days = [(d.source_date or d.created_at.date()) for d in docs]
    assert days == sorted(days, reverse=True)


def test_the_timeline_filters_sessions_and_a_session_opens_as_its_turns(folder: Path) -> None:
    with serving(folder) as viewer:
        sessions = dom(viewer.url("/documents?kind=sessions"))
        documents = dom(viewer.url("/documents?kind=documents"))
        papers = dom(viewer.url("/documents?knowledge_type=paper"))
        link = re.search(r'href="(documents/[0-9a-f]+)"', sessions)
        assert link is not None
        session = unescape(dom(viewer.url("/" + link.group(1))))
    assert "Cache decision" in sessions and sessions.count('href="documents/') == 1
    assert "Cache decision" not in documents and documents.count('href="documents/') == 4
    assert papers.count('href="documents/') == 1 and "Reciprocal Rank Fusion" in papers
    assert "<li>Ana" in session and "<li>Ben" in session
    assert "SQLite with a five-minute TTL was enough." in session


def test_the_block_a_session_started_with_is_listed(folder: Path) -> None:
    with serving(folder) as viewer:
        page = unescape(dom(viewer.url("/handed")))
    assert "recall block" in page and "demo-session" in page
    assert "Keep what the agent remembers separate from how it retrieves" in page


def test_the_overview_lists_the_pipelines_last_runs(folder: Path, tmp_path: Path) -> None:
    from tests.ui.pipeline_runs import failing_job, run_jobs, tidy_job

    home = tmp_path / "dagster_home"
    records = run_jobs(home, [tidy_job, failing_job])
    with serving(folder, "--dagster-home", str(home)) as viewer:
        page = dom(viewer.url("/"))
    section = unescape(page).split("The pipeline's last runs", 1)[1].split("<h2>", 1)[0]
    rows = re.findall(r"<tr><td>(\w+)</td><td>([\w ]+)</td>.*?<code>(\w+)</code>", section)
    assert rows == [
        (r.dagster_run.job_name, {"SUCCESS": "succeeded", "FAILURE": "failed"}[r.dagster_run.status.value], r.dagster_run.run_id[:8])
        for r in records
    ]  # fmt: skip
    assert rows[0][0] == "failing_job"  # newest first


def test_without_the_token_the_browser_gets_no_memory(folder: Path) -> None:
    with serving(folder) as viewer:
        page = dom(f"{viewer.base}/search?q=fusion")
    assert "Open the printed address" in page and "Reciprocal" not in page


def test_every_page_renders_at_both_widths(folder: Path, tmp_path: Path) -> None:
    with serving(folder) as viewer:
        for name, (width, height) in WIDTHS.items():
            shot = screenshot(
                viewer.url("/search?q=memory"), tmp_path / f"{name}.png", width, height
            )
            assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

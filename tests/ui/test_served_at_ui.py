"""The viewer's pages at ``/ui`` of ``serve --http``: a real server process, behind the
server's token (or a fresh one it prints when it has none), its links under ``/ui/``; the
MCP endpoint beside them keeps its bearer token."""

from __future__ import annotations

import re
import time
from pathlib import Path

import httpx2
import pytest

from serving.harness import StoreLayout, free_port, http_process

pytestmark = pytest.mark.anyio
TOKEN = "s3cret-token-for-tests-0123456789"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _said(log: object, pattern: str, timeout: float = 30.0) -> re.Match[str]:
    deadline = time.monotonic() + timeout
    while True:
        log.seek(0)  # type: ignore[attr-defined]
        found = re.search(pattern, log.read().decode(errors="replace"))  # type: ignore[attr-defined]
        if found or time.monotonic() > deadline:
            assert found, pattern
            return found
        time.sleep(0.1)


async def test_the_pages_at_ui_take_the_servers_token(tmp_path: Path) -> None:
    layout = StoreLayout(tmp_path)
    port = free_port()
    with http_process(layout.env(HYBRID_RAG_HTTP_TOKEN=TOKEN), layout.docs, port) as (
        url,
        _proc,
        log,
    ):
        said = _said(log, r"the memory's pages: (\S+)")
        assert said.group(1) == f"http://127.0.0.1:{port}/ui/?token=<HYBRID_RAG_HTTP_TOKEN>"
        base = f"http://127.0.0.1:{port}"
        async with httpx2.AsyncClient(base_url=base) as client:
            assert (await client.get("/ui/")).status_code == 401
            assert (await client.get("/ui/?token=wrong")).status_code == 401
            first = await client.get(f"/ui/search?q=memory&token={TOKEN}")
            assert first.status_code == 303
            assert first.headers["location"] == "/ui/search?q=memory"
            client.cookies.set(f"memory_pipeline_ui_{port}", TOKEN)
            for path in ("/ui", "/ui/", "/ui/documents", "/ui/search?q=memory"):
                page = await client.get(path)
                assert page.status_code == 200, path
                assert '<base href="/ui/">' in page.text
            mcp = await client.post(
                url,
                json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                headers={"Accept": "application/json, text/event-stream"},
            )
            assert mcp.status_code == 401  # the cookie is not the MCP endpoint's bearer token
        log.seek(0)
        assert TOKEN not in log.read().decode(errors="replace")


async def test_without_a_server_token_the_pages_get_a_fresh_one(tmp_path: Path) -> None:
    layout = StoreLayout(tmp_path)
    port = free_port()
    with http_process(layout.env(), layout.docs, port) as (_url, _proc, log):
        address = _said(log, r"the memory's pages: (\S+)").group(1)
        token = address.rsplit("token=", 1)[1]
        assert len(token) >= 32
        async with httpx2.AsyncClient() as client:
            assert (await client.get(address.split("?")[0])).status_code == 401
            opened = await client.get(address)
            assert opened.status_code == 303 and opened.headers["location"] == "/ui/"

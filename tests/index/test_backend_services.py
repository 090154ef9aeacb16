"""The vector-service backends (Qdrant, Chroma) when their client or server is missing,
and a memory on a real Chroma server (the one shipped in the chromadb wheel)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from memory_pipeline.embedding.base import HashingEmbedder
from memory_pipeline.errors import IndexUnavailableError
from memory_pipeline.system import MemorySystem
from tests.conftest import make_settings


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(
    ("backend", "module", "chosen"),
    [
        ("qdrant", "qdrant_edge", {}),  # Qdrant Edge, the default without a server
        ("qdrant", "qdrant_client", {"qdrant_mode": "local"}),
        ("chroma", "chromadb", {}),
    ],
)
def test_a_missing_client_names_the_extra(
    backend: str,
    module: str,
    chosen: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # import now raises ImportError
    settings = make_settings(tmp_path, backend=backend, **chosen)
    with pytest.raises(IndexUnavailableError) as err:
        MemorySystem(settings, embedder=HashingEmbedder())
    assert f"pip install 'memory-pipeline[{backend}]'" in str(err.value)
    assert repr(module) in str(err.value)


@pytest.mark.parametrize("setting", ["qdrant_url", "chroma_url"])
def test_an_unreachable_server_is_named(setting: str, tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    backend = setting.split("_")[0]
    settings = make_settings(tmp_path, backend=backend).replace(**{setting: url})
    with pytest.raises(IndexUnavailableError) as err:
        MemorySystem(settings, embedder=HashingEmbedder())
    assert f"server at {url} did not answer" in str(err.value)


@pytest.fixture
def chroma_server(tmp_path: Path) -> Iterator[str]:
    """``chroma run`` on a free port of 127.0.0.1 and a temporary folder; its URL."""
    port = _closed_port()
    url = f"http://127.0.0.1:{port}"
    chroma = str(Path(sys.executable).with_name("chroma"))
    folder = str(tmp_path / "server")
    server = subprocess.Popen(
        [chroma, "run", "--path", folder, "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/api/v2/heartbeat", timeout=1):
                    break
            except (urllib.error.URLError, OSError):
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"the Chroma server did not start on {url}")
                time.sleep(0.2)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


@pytest.mark.slow
def test_a_memory_on_a_chroma_server(chroma_server: str, tmp_path: Path) -> None:
    import chromadb

    settings = make_settings(tmp_path, backend="chroma", chroma_url=chroma_server)
    memory = MemorySystem(settings, embedder=HashingEmbedder())
    try:
        cats = memory.ingest_text("Cats sleep most of the day in the warm sun.", "cats").doc_id
        memory.ingest_text("Penguins waddle across the ice.", "penguins")
        memory.update_index()
        hits = memory.query(
            "warm sun cats", memory.settings.search_request(top_k=3, record_access=False)
        ).hits
        assert hits[0].title == "cats"

        server = chromadb.HttpClient(host="127.0.0.1", port=int(chroma_server.rsplit(":", 1)[1]))
        [collection] = server.list_collections()
        assert collection.name == "memory_pipeline-v1"
        assert collection.count() == 2
        assert collection.metadata["model_id"] == memory.embedder.model_id

        memory.delete_document(cats)
        memory.update_index()
        assert collection.count() == 1
        titles = {
            h.title
            for h in memory.query(
                "cats sun", memory.settings.search_request(top_k=5, record_access=False)
            ).hits
        }
        assert "cats" not in titles
        assert memory.index_health().healthy
    finally:
        memory.close()

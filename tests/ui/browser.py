"""A real browser for the viewer's tests: Debian's headless Chromium, one fresh profile per
page, and a ``memory-pipeline ui`` process serving a memory on a free loopback port.

``.ci/run`` installs Chromium (``scripts/browser-deps.sh``) and sets
``MEMORY_PIPELINE_REQUIRE_BROWSER=1``: there a missing browser fails the tests instead of
skipping them. ``python -m tests.ui.browser OUT_DIR`` writes the screenshots of
``docs/ui.md`` with the same helpers.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from memory_pipeline.system import MemorySystem

FLAGS = [
    "--headless",
    "--no-sandbox",  # needed as root
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]
#: A conversation of two turns (the transcript format, docs/conversations.md).
SESSION = {
    "conversation_id": "cache",
    "title": "Cache decision",
    "sessions": [
        {
            "session_id": "1",
            "date": "2025-06-01T10:00:00Z",
            "turns": [
                {"speaker": "Ana", "text": "Should we keep Redis for the session cache?"},
                {"speaker": "Ben", "text": "No: SQLite with a five-minute TTL was enough."},
            ],
        }
    ],
}
#: The two widths the pages are checked and shown at: a laptop's and a phone's.
WIDTHS = {"wide": (1280, 900), "phone": (390, 844)}


def chromium() -> str:
    found = shutil.which("chromium")
    if found:
        return found
    if os.environ.get("MEMORY_PIPELINE_REQUIRE_BROWSER") == "1":
        pytest.fail("chromium is missing: run scripts/browser-deps.sh")
    pytest.skip("chromium is missing (scripts/browser-deps.sh installs it)")


def _run(*args: str) -> str:
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        done = subprocess.run(
            [chromium(), *FLAGS, f"--user-data-dir={profile}", *args],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
    return done.stdout


def dom(url: str) -> str:
    """The page at ``url`` as Chromium holds it once loaded (redirects and cookies followed)."""
    return _run("--dump-dom", url)


def screenshot(url: str, out: Path, width: int, height: int) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    _run(f"--window-size={width},{height}", f"--screenshot={out}", url)
    if not out.is_file() or out.stat().st_size == 0:
        raise AssertionError(f"chromium wrote no screenshot to {out}")
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Viewer:
    """A running ``memory-pipeline ui``: its base address and token."""

    base: str
    token: str

    def url(self, path: str) -> str:
        """``path`` with the token, as the printed address carries it (before a fragment)."""
        path, hash_, fragment = path.partition("#")
        glue = "&" if "?" in path else "?"
        return f"{self.base}{path}{glue}token={self.token}{hash_}{fragment}"


def memory_env(folder: Path) -> dict[str, str]:
    """The environment of a command over the memory in ``folder``, none of the caller's
    memory settings (``make test`` exports its own) nor make's variables."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("HYBRID_RAG_")
        and k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS", "DAGSTER_HOME")
    }
    env.update(
        HOME=str(folder),  # its notes under ~/notes: no machine's path on a page
        HYBRID_RAG_DB_PATH=str(folder / "memory.db"),
        HYBRID_RAG_INDEX_PATH=str(folder / "indices"),
        HYBRID_RAG_ARCHIVE_PATH=str(folder / "archive"),
        # The fast deterministic embedder: what is looked at is the page, not the model.
        HYBRID_RAG_EMBEDDING_MODEL="hashing",
    )
    return env


@contextmanager
def serving(folder: Path, *args: str, env: dict[str, str] | None = None) -> Iterator[Viewer]:
    """``memory-pipeline ui`` over the memory in ``folder`` until the block ends; ``env``:
    settings added to ``memory_env``'s."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "memory_pipeline.cli", "ui", "--port", str(port), *args],
        env={**memory_env(folder), **(env or {})},
        cwd=folder,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        found = re.search(r"open (http://\S+)/\?token=(\S+)", line)
        if found is None:
            process.kill()
            raise AssertionError(f"no address printed: {line!r} {process.stderr.read()!r}")
        _wait_for(port)
        yield Viewer(found.group(1), found.group(2))
    finally:
        process.terminate()
        process.wait(timeout=30)


def _wait_for(port: int) -> None:
    import time

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise AssertionError(f"nothing listens on port {port}")


def memory_in(folder: Path) -> MemorySystem:
    """The memory ``memory_env(folder)`` names, opened in this process (to check a page
    against the store)."""
    from memory_pipeline.config import Settings
    from memory_pipeline.embedding.base import HashingEmbedder
    from memory_pipeline.system import MemorySystem

    settings = Settings(
        db_path=folder / "memory.db",
        index_path=folder / "indices",
        archive_path=folder / "archive",
        model="hashing",
    )
    return MemorySystem(settings, embedder=HashingEmbedder())


def sample_memory(folder: Path) -> None:
    """The bundled sample corpus ingested into the memory in ``folder``, one session, and
    the block a session-start hook handed over."""
    corpus = resources.files("memory_pipeline") / "sample_corpus"
    notes = folder / "notes"
    notes.mkdir()
    paths = []
    for p in Path(str(corpus)).glob("*.md"):
        if p.name != "README.md":
            paths.append(str(shutil.copy(p, notes / p.name)))
    session = notes / "cache-decision.json"
    session.write_text(json.dumps(SESSION), encoding="utf-8")
    for args in (["ingest", *sorted(paths)], ["import", "transcript", str(session)]):
        subprocess.run(
            [sys.executable, "-m", "memory_pipeline.cli", *args],
            env=memory_env(folder),
            cwd=folder,
            check=True,
            capture_output=True,
        )
    # a session starting: the block the hook hands over is noted for the viewer's page
    hook = {"cwd": str(folder), "session_id": "demo-session", "hook_event_name": "SessionStart"}
    subprocess.run(
        [sys.executable, "-m", "memory_pipeline.cli", "recall", "--hook", "--space", "default"],
        env=memory_env(folder),
        cwd=folder,
        input=json.dumps(hook),
        text=True,
        check=True,
        capture_output=True,
    )


def main(out: Path) -> int:
    """The screenshots of docs/ui.md: each page at both widths, over the sample corpus."""
    with tempfile.TemporaryDirectory(prefix="ui-shots-") as tmp:
        folder = Path(tmp)
        sample_memory(folder)
        from tests.ui.pipeline_runs import failing_job, run_jobs, tidy_job

        home = folder / "dagster_home"
        run_jobs(home, [failing_job, tidy_job])
        memory = memory_in(folder)
        try:
            for doc in memory.store.recent_documents(2):  # as the agent's tools record them
                memory.set_chunk_tags(doc.doc_id, 0, importance=0.9, actor="mcp")
            for doc in memory.store.recent_documents(3, 2):  # a person marks them weak
                memory.set_chunk_tags(doc.doc_id, 0, importance=0.01)
        finally:
            memory.close()
        # forgetting set up to take what is marked weak; one of them archived already
        knobs = {"HYBRID_RAG_FORGET_GRACE_DAYS": "0", "HYBRID_RAG_IMPORTANCE_THRESHOLD": "0.05"}
        subprocess.run(
            [sys.executable, "-m", "memory_pipeline.cli", "forget", "--apply", "--score-threshold", "0"],
            env={**memory_env(folder), **knobs, "HYBRID_RAG_FORGET_MAX_FRACTION": "1.0"},
            cwd=folder, check=True, capture_output=True,
        )  # fmt: skip
        memory = memory_in(folder)
        try:  # two more marked weak, for the forgetting page's candidates
            for doc in memory.store.recent_documents(2, 5):
                memory.set_chunk_tags(doc.doc_id, 0, importance=0.01)
        finally:
            memory.close()
        with serving(folder, "--dagster-home", str(home), env=knobs) as viewer:
            page = dom(viewer.url("/documents"))
            doc = re.search(r'href="(documents/[0-9a-f]+)"', page)
            assert doc is not None
            pages = {
                "overview": "/",
                "search": "/search?q=why+does+news+fade+from+memory",
                "timeline": "/documents",
                "document": f"/{doc.group(1)}",
                "delete": f"/{doc.group(1)}/delete",
                "handed": "/handed",
                "proposals": "/proposals",
                "forgetting": "/forgetting",
                "archive": "/archive",
            }
            for name, path in pages.items():
                for width_name, (width, height) in WIDTHS.items():
                    shot = screenshot(
                        viewer.url(path), out / f"ui-{name}-{width_name}.png", width, height
                    )
                    print(f"wrote {shot}")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else "docs")))

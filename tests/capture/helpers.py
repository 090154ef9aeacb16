"""Claude Code as the capture tests see it: session transcripts in its format, the hook run
as it runs it (a process, the payload on stdin), and the memory read back bound to a space."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from memory_pipeline import spool
from memory_pipeline.config import Settings
from memory_pipeline.embedding.base import HashingEmbedder
from memory_pipeline.locations import capture_dir
from memory_pipeline.sources.conversations import parse_claude_code_session
from memory_pipeline.sources.status import conversation_source, is_current
from memory_pipeline.spaces import Spaces, project_space
from memory_pipeline.system import MemorySystem
from serving.harness import REPO
from tests.conftest import CONSOLE_SCRIPT

START = dt.datetime(2026, 11, 20, 10, 0, tzinfo=dt.UTC)


def turn_text(session: str, n: int) -> str:
    return f"In session {session} turn {n} we chose the zebra{n}x{session} approach."


def write_transcript(path: Path, session: str, turns: int, cwd: str) -> Path:
    """A Claude Code session log: user and assistant records chained by parentUuid."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"type": "summary", "summary": f"Session {session}", "leafUuid": "x"})]
    parent = None
    for n in range(1, turns + 1):
        role = "user" if n % 2 else "assistant"
        content = turn_text(session, n)
        record = {
            "parentUuid": parent,
            "isSidechain": False,
            "cwd": cwd,
            "sessionId": session,
            "type": role,
            "message": {
                "role": role,
                "content": content if role == "user" else [{"type": "text", "text": content}],
            },
            "uuid": f"{session}-u{n}",
            "timestamp": (START + dt.timedelta(seconds=n)).isoformat().replace("+00:00", "Z"),
        }
        lines.append(json.dumps(record))
        parent = record["uuid"]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def space_of(project: Path) -> str:
    """The space the hook gives a session worked in ``project`` (``spaces.project_space``)."""
    return project_space(project).name


def hook_env(tmp_path: Path) -> dict[str, str]:
    """The environment Claude Code runs a hook with, here: the memory under tmp_path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HYBRID_RAG_", "XDG_"))}
    return {
        **env,
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "HYBRID_RAG_EMBEDDING_MODEL": "hashing",
        "PYTHONPATH": str(REPO),
    }


def data_folder(tmp_path: Path) -> Path:
    return tmp_path / "data" / "memory-pipeline"


def spool_of(tmp_path: Path) -> Path:
    return capture_dir(data_folder(tmp_path) / "memory.db")


def payload(transcript: Path, cwd: Path, event: str = "SessionEnd") -> str:
    return json.dumps(
        {
            "session_id": transcript.stem,
            "transcript_path": str(transcript),
            "cwd": str(cwd),
            "hook_event_name": event,
            "reason": "exit",
        }
    )


def command(*args: str) -> list[str]:
    """``memory-pipeline ARGS`` as the console script runs it."""
    return [sys.executable, "-c", CONSOLE_SCRIPT, *args]


def cli(*args: str, env: dict[str, str], stdin: str = "") -> subprocess.CompletedProcess[str]:
    """``memory-pipeline ARGS`` as a process, ``stdin`` on its standard input."""
    return subprocess.run(
        command(*args),
        input=stdin,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def start_cli(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        command(*args),
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def holder(folder: Path) -> int | None:
    """The pid of the worker that last took the spool's lock, while it is alive (holding
    the lock, or closing after it); probed without taking the lock, which would send a
    worker starting that moment away."""
    path = folder / spool.LOCK_NAME
    text = path.read_text().strip() if path.exists() else ""
    if not text:
        return None
    try:
        os.kill(int(text), 0)
    except ProcessLookupError:
        return None
    return int(text)


def wait_idle(folder: Path, timeout: float = 240.0) -> None:
    """Until no capture waits and no worker holds the lock (the started workers are done)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not spool.waiting(folder) and holder(folder) is None:
            return
        time.sleep(0.2)
    log = (folder / spool.LOG_NAME).read_text() if (folder / spool.LOG_NAME).exists() else ""
    raise AssertionError(f"captures still waiting after {timeout}s; log:\n{log}")


@contextmanager
def memory(tmp_path: Path, space: str) -> Iterator[MemorySystem]:
    """The memory the hook wrote to, bound to ``space``."""
    folder = data_folder(tmp_path)
    settings = Settings(
        db_path=folder / "memory.db",
        index_path=folder / "indices",
        archive_path=folder / "archive",
        model_cache=tmp_path / "cache",
        model="hashing",
    )
    system = MemorySystem(settings, embedder=HashingEmbedder()).bound(Spaces.bound(space))
    try:
        yield system
    finally:
        system.close()


def stored_once(system: MemorySystem, transcript: Path) -> bool:
    """The session is one document in the space, and it is the transcript as it is now
    (every turn of it, each once: the document is the session's rendering)."""
    [conv] = parse_claude_code_session(transcript)
    docs = system.store.documents_by_source(conversation_source(conv))
    return len(docs) == 1 and bool(is_current(system.store, conv))


def found(system: MemorySystem, text: str) -> bool:
    """``text`` is among the hits of a hybrid search for it in the bound space."""
    request = system.settings.search_request(top_k=5, record_access=False)
    return any(text in hit.content for hit in system.query(text, request).hits)

"""``memory-pipeline import`` at its edges (issue: capture that never stalls, the smaller
items): Ctrl-C whenever it comes ends the command with 130 and how far it got, never a
traceback.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

from memory_pipeline.cli import main
from memory_pipeline.system import MemorySystem
from tests.capture.helpers import memory, stored_once, write_transcript


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for key in list(os.environ):
        if key.startswith(("HYBRID_RAG_", "MEMORY_PIPELINE_")):
            monkeypatch.delenv(key)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("HYBRID_RAG_EMBEDDING_MODEL", "hashing")
    return tmp_path


def ctrl_c(*args: Any, **kwargs: Any) -> None:
    """Ctrl-C as the terminal sends it, arriving while the index is being updated."""
    os.kill(os.getpid(), signal.SIGINT)  # Python raises KeyboardInterrupt here


def test_ctrl_c_during_the_final_index_update_exits_130_and_says_what_is_stored(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    sessions = [
        write_transcript(home / "projects" / "p" / f"s{n}.jsonl", f"s{n}", 2, "/p")
        for n in range(2)
    ]
    monkeypatch.setattr(MemorySystem, "update_index", ctrl_c)
    code = main(
        ["import", "claude_code", str(home / "projects"), "--space", "hist", "--no-progress"]
    )
    out, err = capsys.readouterr()
    assert code == 130
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert "2 sessions stored" in out
    assert "interrupted while updating the index" in err and "update-index" in err
    monkeypatch.undo()
    with memory(home, "hist") as system:
        assert all(stored_once(system, s) for s in sessions)

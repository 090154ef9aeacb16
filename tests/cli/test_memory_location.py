"""Where the command line finds its memory with no location configured, in real processes.

HOME and XDG_DATA_HOME point into tmp_path: nothing here touches the real home.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CONSOLE_SCRIPT

REPO = Path(__file__).resolve().parents[2]


def cli(cwd: Path, home: Path, *argv: str, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HYBRID_RAG_", "XDG_DATA"))}
    env.update(
        HOME=str(home),
        XDG_DATA_HOME=str(home / "data"),
        HYBRID_RAG_EMBEDDING_MODEL="hashing",
        PYTHONPATH=str(REPO),
        **extra,
    )
    return subprocess.run(
        [sys.executable, "-c", CONSOLE_SCRIPT, *argv],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_one_memory_per_user_whatever_folder_a_command_starts_in(tmp_path: Path) -> None:
    home, one, two = tmp_path / "home", tmp_path / "one", tmp_path / "two"
    for folder in (home, one, two):
        folder.mkdir()
    (one / "note.md").write_text("# Fusion\n\nReciprocal rank fusion merges two lists.\n")
    done = cli(one, home, "ingest", "note.md")
    assert done.returncode == 0, done.stderr
    memory = home / "data" / "memory-pipeline"
    assert (memory / "memory.db").is_file() and (memory / "indices").is_dir()
    found = cli(two, home, "search", "reciprocal rank fusion", "--json")
    assert found.returncode == 0, found.stderr
    assert "Reciprocal rank fusion" in found.stdout
    assert sorted(p.name for p in one.iterdir()) == ["note.md"]
    assert list(two.iterdir()) == []


def test_an_old_memory_in_the_folder_is_used_with_a_notice(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    (project / "note.md").write_text("# Fusion\n\nReciprocal rank fusion merges two lists.\n")
    old = {"HYBRID_RAG_DB_PATH": "hybrid_rag.db", "HYBRID_RAG_INDEX_PATH": "indices"}
    assert cli(project, home, "ingest", "note.md", **old).returncode == 0  # as before
    done = cli(project, home, "search", "reciprocal rank fusion", "--json")
    assert done.returncode == 0, done.stderr
    assert "Reciprocal rank fusion" in done.stdout
    notices = [line for line in done.stderr.splitlines() if "hybrid_rag.db" in line]
    new = home / "data" / "memory-pipeline"
    assert len(notices) == 1 and str(new) in notices[0] and "mv " in notices[0]
    assert not new.exists()


@pytest.mark.parametrize("var", ["HYBRID_RAG_INDEX_PATH", "HYBRID_RAG_DB_PATH"])
def test_an_unexpanded_placeholder_stops_the_command_and_makes_no_folder(
    tmp_path: Path, var: str
) -> None:
    """MCP Inspector or Codex start the server with .mcp.json's values as written."""
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    home.mkdir()
    cwd.mkdir()
    raw = "${" + var + ":-data/x}"
    done = cli(cwd, home, "stats", **{var: raw})
    assert done.returncode == 2 and done.stdout == ""
    assert f"{var}: " in done.stderr and "absolute path" in done.stderr
    assert list(cwd.iterdir()) == []


def test_the_server_refuses_an_unexpanded_placeholder(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("HYBRID_RAG_")}
    env.update(
        HOME=str(home),
        XDG_DATA_HOME=str(home / "data"),
        PYTHONPATH=str(REPO),
        HYBRID_RAG_INDEX_PATH="${HYBRID_RAG_INDEX_PATH:-data/indices}",
    )
    done = subprocess.run(
        [sys.executable, "-m", "serving"],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert "cannot start the memory server: HYBRID_RAG_INDEX_PATH: " in done.stderr
    assert "Claude Code" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home"]

"""The hooks answer odd input in one line (issue: capture that never stalls, the smaller
items): JSON too deep to read, JSON that is not an object, an unexpanded variable in the
database's path, a database that is not one. The hooks run as processes, as Claude Code
runs them; nothing is made where it should not be.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memory_pipeline import spool
from tests.capture.helpers import cli, hook_env, spool_of

DEEP = "[" * 100_000 + "]" * 100_000
START = json.dumps({"cwd": "/", "hook_event_name": "SessionStart"})


def one_line(text: str) -> bool:
    return text.count("\n") == 1 and "Traceback" not in text


@pytest.mark.parametrize("given", [DEEP, "[1]", '"text"', "null", "3"])
def test_capture_answers_input_that_is_not_a_json_object_in_one_line(
    given: str, tmp_path: Path
) -> None:
    env = hook_env(tmp_path)
    done = cli("capture", env=env, stdin=given)
    assert done.returncode == 1, done.stderr  # shown by Claude Code, never blocking
    assert one_line(done.stderr), done.stderr
    assert "nothing captured" in done.stderr
    assert spool.waiting(spool_of(tmp_path)) == []


def test_recall_answers_json_too_deep_to_read_in_one_line(tmp_path: Path) -> None:
    done = cli("recall", "--hook", env=hook_env(tmp_path), stdin=DEEP)
    assert done.returncode == 0 and done.stdout == ""
    assert one_line(done.stderr) and "too deeply nested" in done.stderr, done.stderr


def test_an_unexpanded_variable_in_the_database_path_is_refused_by_name(tmp_path: Path) -> None:
    env = {**hook_env(tmp_path), "HYBRID_RAG_DB_PATH": "${HOME}/memory.db"}
    transcript = tmp_path / "s.jsonl"
    transcript.write_text("{}\n")
    given = {
        "hook_event_name": "SessionEnd",
        "transcript_path": str(transcript),
        "cwd": str(tmp_path),
    }
    done = cli("capture", env=env, stdin=json.dumps(given))
    assert done.returncode == 1
    assert one_line(done.stderr), done.stderr
    assert "HYBRID_RAG_DB_PATH" in done.stderr and "${HOME}" in done.stderr
    assert not list(Path.cwd().glob("$*")) and not list(tmp_path.glob("$*"))


@pytest.mark.parametrize("command", [("recall", "--hook"), ("stats",), ("health",)])
def test_a_database_that_is_not_one_is_said_in_one_line(
    command: tuple[str, ...], tmp_path: Path
) -> None:
    db = tmp_path / "memory.db"
    db.write_bytes(b"not a database at all " * 400)
    env = {**hook_env(tmp_path), "HYBRID_RAG_DB_PATH": str(db)}
    done = cli(*command, env=env, stdin=START)
    assert one_line(done.stderr), done.stderr
    assert str(db) in done.stderr and "not a SQLite database" in done.stderr
    assert done.returncode == (0 if "--hook" in command else 2)
    assert db.read_bytes() == b"not a database at all " * 400

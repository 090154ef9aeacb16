"""``memory-pipeline import KIND PATH…``: months of history in one command, resumable."""

from __future__ import annotations

import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from memory_pipeline.cli.main import build_parser
from memory_pipeline.sources.status import READERS
from tests.capture.helpers import (
    cli,
    command,
    found,
    hook_env,
    memory,
    stored_once,
    turn_text,
    write_transcript,
)


def history(folder: Path, sessions: int, turns: int) -> list[Path]:
    """A ``~/.claude/projects``-like folder: one project folder, a sub-agent log beside."""
    made = [
        write_transcript(folder / "-home-dev-orbit" / f"h{n}.jsonl", f"h{n}", turns, "/orbit")
        for n in range(sessions)
    ]
    write_transcript(folder / "-home-dev-orbit" / "agent-1.jsonl", "agent", 2, "/orbit")
    return made


def test_a_folder_is_imported_and_a_second_import_is_a_no_op(tmp_path: Path) -> None:
    env = hook_env(tmp_path)
    sessions = history(tmp_path / "projects", 3, 4)
    first = cli("import", "claude_code", str(tmp_path / "projects"), "--space", "hist", env=env)
    assert first.returncode == 0, first.stderr
    assert "3 sessions stored (3 new, 0 grown), 12 turns, 0 sessions already" in first.stdout
    with memory(tmp_path, "hist") as system:
        assert all(stored_once(system, s) for s in sessions)
        assert len(system.store.document_ids()) == 3  # the sub-agent log is not imported
        assert found(system, turn_text("h2", 4))
    again = cli("import", "claude_code", str(tmp_path / "projects"), "--space", "hist", env=env)
    assert again.returncode == 0, again.stderr
    assert "0 sessions stored (0 new, 0 grown), 0 turns, 3 sessions already" in again.stdout


def test_a_refused_file_is_named_with_its_reason_and_exits_1(tmp_path: Path) -> None:
    env = hook_env(tmp_path)
    [good] = history(tmp_path / "projects", 1, 2)
    bad = good.parent / "broken.jsonl"
    bad.write_text("this is not a session log\n")
    done = cli("import", "claude_code", str(good), str(bad), env=env)
    assert done.returncode == 1
    assert "1 sessions stored" in done.stdout and "1 files refused" in done.stdout
    assert f"refused  {bad}: " in done.stdout and "Claude Code session log" in done.stdout


def test_a_path_that_is_not_there_is_named_by_its_argument(tmp_path: Path) -> None:
    done = cli("import", "claude_code", str(tmp_path / "nowhere"), env=hook_env(tmp_path))
    assert done.returncode == 2
    assert done.stderr.strip() == f"error: PATH {tmp_path / 'nowhere'}: no such file or folder"


def test_every_kind_with_a_reader_can_be_imported() -> None:
    parser = build_parser()
    args = parser.parse_args(["import", "transcript", "x"])
    assert args.kind == "transcript"
    sub = next(a for a in parser._subparsers._group_actions if a.choices)  # type: ignore[union-attr]
    kinds = next(a for a in sub.choices["import"]._actions if a.dest == "kind")  # type: ignore[index]
    assert set(kinds.choices) == {k.value for k in READERS}


def _stopped_midway(env: dict[str, str], folder: Path, sig: signal.Signals, log: Path) -> int:
    """An import stopped by ``sig`` once its progress bar shows a stored session."""
    with open(log, "w") as err:
        proc = subprocess.Popen(
            command("import", "claude_code", str(folder)),
            env=env,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )
        deadline = time.monotonic() + 240
        while not re.search(r"sessions=[1-9]", log.read_text()):
            assert proc.poll() is None, "the import ended before it could be stopped"
            assert time.monotonic() < deadline
            time.sleep(0.05)
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=120)
    log.write_text(log.read_text() + out)
    return proc.returncode


@pytest.mark.slow
def test_an_import_stopped_by_ctrl_c_or_a_kill_continues_and_stores_each_session_once(
    tmp_path: Path,
) -> None:
    env = hook_env(tmp_path)
    sessions = history(tmp_path / "projects", 80, 200)
    log = tmp_path / "stopped.log"
    assert _stopped_midway(env, tmp_path / "projects", signal.SIGINT, log) == 130
    assert "run the same command again to continue" in log.read_text()
    assert _stopped_midway(env, tmp_path / "projects", signal.SIGKILL, log) == -9
    done = cli("import", "claude_code", str(tmp_path / "projects"), "--no-progress", env=env)
    assert done.returncode == 0, done.stderr
    counts = re.search(r"(\d+) sessions stored .* (\d+) sessions already stored", done.stdout)
    assert counts is not None, done.stdout
    assert int(counts.group(1)) + int(counts.group(2)) == len(sessions)
    with memory(tmp_path, "default") as system:
        assert all(stored_once(system, s) for s in sessions)
        assert len(system.store.document_ids()) == len(sessions)

"""A capture that cannot be taken never stalls the others (issue: capture that never
stalls). The hook and the worker run as processes, as Claude Code starts them.

A transcript path the system refuses to even examine (a name over 255 bytes), a file
gone, an unreadable capture ledger: each is set aside with its reason, kept where the
user can see it (``failed/`` in the capture folder), and every other session is stored.
A transcript in a folder the user may not enter is the same failure (``EACCES`` from
``stat``); it cannot be made here when the tests run as root, which enters every folder.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from memory_pipeline import spool
from tests.capture.helpers import (
    cli,
    hook_env,
    memory,
    payload,
    space_of,
    spool_of,
    stored_once,
    wait_idle,
    write_transcript,
)


def set_aside(folder: Path) -> dict[str, dict[str, str]]:
    """The captures set aside: session id → what the file says (its reason among it)."""
    kept = folder / spool.FAILED_DIR
    return {(r := json.loads(p.read_text()))["session_id"]: r for p in sorted(kept.glob("*.json"))}


def test_a_capture_whose_transcript_cannot_be_examined_is_set_aside_and_the_rest_stored(
    tmp_path: Path,
) -> None:
    env = hook_env(tmp_path)
    project = tmp_path / "proj"
    poison = tmp_path / "claude" / ("x" * 300 + ".jsonl")  # ENAMETOOLONG from stat
    done = cli("capture", env=env, stdin=payload(poison, project))
    assert done.returncode == 0
    later = [
        write_transcript(tmp_path / "claude" / f"later{n}.jsonl", f"later{n}", 2, str(project))
        for n in range(3)
    ]
    for transcript in later:
        assert cli("capture", env=env, stdin=payload(transcript, project)).returncode == 0
    folder = spool_of(tmp_path)
    wait_idle(folder)
    with memory(tmp_path, space_of(project)) as system:
        assert all(stored_once(system, t) for t in later)
    kept = set_aside(folder)
    assert list(kept) == [poison.stem]
    assert "cannot be examined" in kept[poison.stem]["reason"]
    assert "File name too long" in kept[poison.stem]["reason"]
    assert spool.waiting(folder) == []
    drained = cli("capture", "--drain", env=env)
    assert drained.returncode == 0 and drained.stderr == "", drained.stderr


def test_a_gone_transcript_is_set_aside_with_its_reason(tmp_path: Path) -> None:
    env = hook_env(tmp_path)
    gone = tmp_path / "claude" / "gone.jsonl"
    assert cli("capture", env=env, stdin=payload(gone, tmp_path / "proj")).returncode == 0
    folder = spool_of(tmp_path)
    wait_idle(folder)
    assert set_aside(folder)["gone"]["reason"] == "the transcript is gone"
    assert set_aside(folder)["gone"]["transcript"] == str(gone)


@pytest.mark.parametrize("ledger", ["{garbage", "[1, 2, 3]", '{"files": [1]}'])
def test_an_unreadable_capture_ledger_is_set_aside_and_rebuilt(tmp_path: Path, ledger: str) -> None:
    env = hook_env(tmp_path)
    project = tmp_path / "proj"
    folder = spool_of(tmp_path)
    folder.mkdir(parents=True)
    (folder / spool.LEDGER_NAME).write_text(ledger)
    transcript = write_transcript(tmp_path / "claude" / "l.jsonl", "l", 2, str(project))
    assert cli("capture", env=env, stdin=payload(transcript, project)).returncode == 0
    wait_idle(folder)
    with memory(tmp_path, space_of(project)) as system:
        assert stored_once(system, transcript)
    [old] = folder.glob(f"{spool.LEDGER_NAME}.unreadable-*")
    assert old.read_text() == ledger
    assert json.loads((folder / spool.LEDGER_NAME).read_text())["files"]
    assert "set aside the unreadable ledger" in (folder / spool.LOG_NAME).read_text()


@pytest.mark.skipif(os.geteuid() == 0, reason="root enters every folder: no EACCES to make")
def test_a_transcript_in_a_folder_the_user_may_not_enter_is_set_aside(tmp_path: Path) -> None:
    env = hook_env(tmp_path)
    project = tmp_path / "proj"
    locked = tmp_path / "locked"
    transcript = write_transcript(locked / "s.jsonl", "s", 2, str(project))
    later = write_transcript(tmp_path / "claude" / "ok.jsonl", "ok", 2, str(project))
    locked.chmod(0)
    try:
        for t in (transcript, later):
            assert cli("capture", env=env, stdin=payload(t, project)).returncode == 0
        folder = spool_of(tmp_path)
        wait_idle(folder)
        with memory(tmp_path, space_of(project)) as system:
            assert stored_once(system, later)
        assert "Permission denied" in set_aside(folder)["s"]["reason"]
    finally:
        locked.chmod(0o755)


@pytest.mark.parametrize("kind", ["a named pipe", "a folder"])
def test_a_transcript_that_is_no_regular_file_is_set_aside_without_holding_the_worker(
    tmp_path: Path, kind: str
) -> None:
    env = hook_env(tmp_path)
    project = tmp_path / "proj"
    odd = tmp_path / "claude" / "odd.jsonl"
    odd.parent.mkdir(parents=True)
    if kind == "a named pipe":
        os.mkfifo(odd)  # opened to read, it waits for a writer that never comes
    else:
        odd.mkdir()
    later = write_transcript(tmp_path / "claude" / "after.jsonl", "after", 2, str(project))
    for transcript in (odd, later):
        assert cli("capture", env=env, stdin=payload(transcript, project)).returncode == 0
    folder = spool_of(tmp_path)
    wait_idle(folder, timeout=60)
    with memory(tmp_path, space_of(project)) as system:
        assert stored_once(system, later)
    assert "not a regular file" in set_aside(folder)["odd"]["reason"]

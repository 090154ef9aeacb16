"""``memory-pipeline capture`` driven as Claude Code drives a hook: a process, the payload
on stdin, a session transcript on disk; the session then found in the project's space."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest

from memory_pipeline import spool
from memory_pipeline.config import Settings
from memory_pipeline.locations import capture_dir, db_from_env
from tests.capture.helpers import (
    cli,
    command,
    found,
    holder,
    hook_env,
    memory,
    payload,
    space_of,
    spool_of,
    stored_once,
    turn_text,
    wait_idle,
    write_transcript,
)


def test_a_session_end_stores_the_session_in_the_projects_space(tmp_path: Path) -> None:
    env = hook_env(tmp_path)
    project = tmp_path / "Orbit App"
    transcript = write_transcript(tmp_path / "claude" / "s1.jsonl", "s1", 6, str(project))
    done = cli("capture", env=env, stdin=payload(transcript, project))
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    wait_idle(spool_of(tmp_path))
    with memory(tmp_path, space_of(project)) as system:
        assert stored_once(system, transcript)
        assert found(system, turn_text("s1", 6))
    with memory(tmp_path, "default") as other:
        assert not found(other, turn_text("s1", 6))


def test_space_flag_and_variable_choose_the_space(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    one = write_transcript(tmp_path / "claude" / "a.jsonl", "a", 2, str(project))
    two = write_transcript(tmp_path / "claude" / "b.jsonl", "b", 2, str(project))
    env = hook_env(tmp_path)
    assert (
        cli("capture", "--space", "flagged", env=env, stdin=payload(one, project)).returncode == 0
    )
    env_space = {**env, "HYBRID_RAG_SPACE": "from-env"}
    assert cli("capture", env=env_space, stdin=payload(two, project)).returncode == 0
    wait_idle(spool_of(tmp_path))
    with memory(tmp_path, "flagged") as system:
        assert stored_once(system, one)
    with memory(tmp_path, "from-env") as system:
        assert stored_once(system, two)


def test_a_grown_session_replaces_the_old_and_an_unchanged_one_is_a_no_op(
    tmp_path: Path,
) -> None:
    env = hook_env(tmp_path)
    project = tmp_path / "proj"
    transcript = write_transcript(tmp_path / "claude" / "g.jsonl", "g", 3, str(project))
    assert cli("capture", env=env, stdin=payload(transcript, project, "PreCompact")).returncode == 0
    wait_idle(spool_of(tmp_path))
    with memory(tmp_path, space_of(project)) as system:
        [first] = system.store.document_ids()
    write_transcript(transcript, "g", 7, str(project))
    assert cli("capture", env=env, stdin=payload(transcript, project)).returncode == 0
    wait_idle(spool_of(tmp_path))
    with memory(tmp_path, space_of(project)) as system:
        [grown] = system.store.document_ids()
        assert grown != first and stored_once(system, transcript)
        assert found(system, turn_text("g", 7))
    assert cli("capture", env=env, stdin=payload(transcript, project)).returncode == 0
    wait_idle(spool_of(tmp_path))
    with memory(tmp_path, space_of(project)) as system:
        assert system.store.document_ids() == {grown}
    log = (spool_of(tmp_path) / spool.LOG_NAME).read_text()
    assert log.count("index version") == 2  # the unchanged capture published nothing


@pytest.mark.slow
def test_four_captures_at_once_store_each_session_once(tmp_path: Path) -> None:
    env = hook_env(tmp_path)
    project = tmp_path / "proj"
    transcripts = [
        write_transcript(tmp_path / "claude" / f"c{n}.jsonl", f"c{n}", 5, str(project))
        for n in range(4)
    ]
    hooks = [
        subprocess.Popen(
            command("capture"),
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in transcripts
    ]
    for hook, transcript in zip(hooks, transcripts, strict=True):
        assert hook.communicate(payload(transcript, project), timeout=60)[1] == ""
        assert hook.returncode == 0
    wait_idle(spool_of(tmp_path))
    with memory(tmp_path, space_of(project)) as system:
        assert all(stored_once(system, t) for t in transcripts)
        assert len(system.store.document_ids()) == 4


@pytest.mark.slow
def test_workers_killed_at_random_lose_nothing_and_drain_catches_up(tmp_path: Path) -> None:
    env = hook_env(tmp_path)
    project = tmp_path / "proj"
    folder = spool_of(tmp_path)
    rng = random.Random(7)
    transcripts = [
        write_transcript(tmp_path / "claude" / f"k{n}.jsonl", f"k{n}", 300, str(project))
        for n in range(10)
    ]
    landed = 0
    for round_, transcript in enumerate(transcripts):
        assert cli("capture", env=env, stdin=payload(transcript, project)).returncode == 0
        if round_ % 3 == 0:  # a session captured again, grown, while its worker may run
            write_transcript(transcript, transcript.stem, 320, str(project))
            assert cli("capture", env=env, stdin=payload(transcript, project)).returncode == 0
        deadline = time.monotonic() + 60
        while (pid := holder(folder)) is None and spool.waiting(folder):
            assert time.monotonic() < deadline, "no worker took the spool"
            time.sleep(0.02)
        time.sleep(rng.uniform(0.0, 0.4))
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                landed += 1
    assert landed >= 1
    done = cli("capture", "--drain", env=env)
    assert done.returncode == 0, done.stderr
    wait_idle(folder)
    assert spool.waiting(folder) == []
    with memory(tmp_path, space_of(project)) as system:
        assert all(stored_once(system, t) for t in transcripts)
        assert len(system.store.document_ids()) == len(transcripts)


BAD_PAYLOADS = {
    "not JSON": ("{not json", 1, "not JSON"),
    "a JSON list": ("[1, 2]", 1, "not a JSON object"),
    "another event": (
        json.dumps({"hook_event_name": "UserPromptSubmit", "transcript_path": "/x"}),
        0,
        "",
    ),
    "no transcript": (json.dumps({"hook_event_name": "SessionEnd", "session_id": "s"}), 0, ""),
    "empty input": ("", 1, "not JSON"),
}


@pytest.mark.parametrize(("stdin", "code", "said"), BAD_PAYLOADS.values(), ids=list(BAD_PAYLOADS))
def test_a_payload_it_cannot_use_exits_without_harm(
    tmp_path: Path, stdin: str, code: int, said: str
) -> None:
    done = cli("capture", env=hook_env(tmp_path), stdin=stdin)
    assert done.returncode == code  # never 2: that would block a compaction
    assert (said in done.stderr) if said else done.stderr == ""
    assert len(done.stderr.splitlines()) <= 1
    folder = spool_of(tmp_path)
    assert spool.waiting(folder) == []
    assert (folder / spool.LOG_NAME).read_text().strip()  # the reason is in the log


def test_a_capture_of_a_missing_transcript_is_logged_and_set_aside(tmp_path: Path) -> None:
    env = hook_env(tmp_path)
    gone = tmp_path / "claude" / "gone.jsonl"
    assert cli("capture", env=env, stdin=payload(gone, tmp_path / "proj")).returncode == 0
    folder = spool_of(tmp_path)
    wait_idle(folder)
    assert "set aside: the transcript is gone" in (folder / spool.LOG_NAME).read_text()
    assert spool.waiting(folder) == []


def test_the_hook_imports_no_settings_store_or_arrays(tmp_path: Path) -> None:
    env = {**hook_env(tmp_path), "PYTHONPROFILEIMPORTTIME": "1"}
    project = tmp_path / "proj"
    transcript = write_transcript(tmp_path / "claude" / "i.jsonl", "i", 2, str(project))
    done = cli("capture", env=env, stdin=payload(transcript, project))
    assert done.returncode == 0
    imported = {line.split("|")[-1].strip().split(".")[0] for line in done.stderr.splitlines()}
    heavy = {"pydantic", "pydantic_settings", "sqlalchemy", "numpy", "yaml", "tqdm"}
    assert imported & heavy == set()
    assert "memory_pipeline.store" not in done.stderr
    wait_idle(spool_of(tmp_path))


@pytest.mark.parametrize(
    "env",
    [{}, {"HYBRID_RAG_DB_PATH": "/srv/mem/my.db"}, {"HYBRID_RAG_DB_PATH": "~/m/memory.db"}],
    ids=["default", "absolute", "home"],
)
def test_the_hook_and_the_settings_find_the_same_spool(
    env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert Settings.from_env(env).capture_dir == capture_dir(db_from_env(env))


def test_the_next_session_start_stores_a_capture_left_pending(tmp_path: Path) -> None:
    """A session that ended while nothing could store it (its worker never ran) is
    stored when the next session starts: the SessionStart hook starts the worker."""
    env = hook_env(tmp_path)
    project = tmp_path / "proj"
    transcript = write_transcript(tmp_path / "claude" / "p.jsonl", "p", 4, str(project))
    capture = spool.Capture("p", str(transcript), space_of(project), str(project), "SessionEnd")
    spool.write_pending(spool_of(tmp_path), capture)
    start = json.dumps(
        {"hook_event_name": "SessionStart", "cwd": str(project), "source": "startup"}
    )
    done = cli("recall", "--hook", env=env, stdin=start)
    assert done.returncode == 0, done.stderr
    wait_idle(spool_of(tmp_path))
    with memory(tmp_path, space_of(project)) as system:
        assert stored_once(system, transcript)

"""The user is told when captured sessions are not stored (issue: capture that never
stalls): a capture set aside, a worker that cannot run and a damaged ledger are said in
one line at the next ``SessionStart`` (the hook's ``systemMessage``, which Claude Code
shows the user), listed with their reasons by ``capture --status``, counted by ``health``
and ``stats``, and ``capture --retry`` / ``--drop`` act on them. Every command runs as a
process, as Claude Code and a user run it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from memory_pipeline import spool
from tests.capture.helpers import (
    cli,
    holder,
    hook_env,
    memory,
    payload,
    space_of,
    spool_of,
    stored_once,
    wait_idle,
    write_transcript,
)


def session_start(env: dict[str, str], project: Path) -> dict[str, Any]:
    """What the ``SessionStart`` hook prints for a session in ``project`` ({} for nothing)."""
    start = {"session_id": "next", "cwd": str(project), "hook_event_name": "SessionStart"}
    done = cli("recall", "--hook", env=env, stdin=json.dumps(start))
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return json.loads(done.stdout) if done.stdout.strip() else {}


def status(env: dict[str, str]) -> dict[str, Any]:
    done = cli("capture", "--status", "--json", env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def report(env: dict[str, str], command: str) -> dict[str, Any]:
    done = cli(command, "--json", env=env)
    assert done.returncode in (0, 1), done.stderr
    return json.loads(done.stdout)


def failed(folder: Path, times: int, timeout: float = 240.0) -> None:
    """Until workers have recorded ``times`` runs that could not run and none is running."""
    deadline = time.monotonic() + timeout
    log = folder / spool.LOG_NAME
    while log.read_text().count("the worker could not run") < times or holder(folder):
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.2)


def capture_findings(env: dict[str, str]) -> list[dict[str, Any]]:
    return [f for f in report(env, "health")["findings"] if f["check"] == "capture"]


def test_a_set_aside_capture_is_said_at_the_next_session_start_and_counted_everywhere(
    tmp_path: Path,
) -> None:
    env = hook_env(tmp_path)
    project = tmp_path / "proj"
    gone = tmp_path / "claude" / "gone.jsonl"
    fine = write_transcript(tmp_path / "claude" / "fine.jsonl", "fine", 2, str(project))
    for transcript in (gone, fine):
        assert cli("capture", env=env, stdin=payload(transcript, project)).returncode == 0
    wait_idle(spool_of(tmp_path))
    with memory(tmp_path, space_of(project)) as system:
        assert stored_once(system, fine)

    said = session_start(env, project)
    notice = said["systemMessage"]
    assert "\n" not in notice
    assert "1 captured session set aside" in notice
    assert "memory-pipeline capture --status" in notice
    assert notice in said["hookSpecificOutput"]["additionalContext"]

    listed = status(env)
    assert listed["counts"] == {
        "waiting": 0,
        "set_aside": 1,
        "ledgers_set_aside": 0,
        "worker_failed": 0,
    }
    [kept] = listed["set_aside"]
    assert (kept["session_id"], kept["reason"]) == ("gone", "the transcript is gone")
    assert kept["transcript"] == str(gone)
    text = cli("capture", "--status", env=env).stdout
    assert "the transcript is gone" in text and kept["name"] in text

    [finding] = capture_findings(env)
    assert (finding["severity"], finding["count"], finding["examples"]) == ("warning", 1, ["gone"])
    assert cli("health", env=env).returncode == 0  # set aside is not a broken memory
    assert report(env, "stats")["captures"] == listed["counts"]
    assert "1 set aside (memory-pipeline capture --status)" in cli("stats", env=env).stdout

    dropped = cli("capture", "--drop", kept["name"], env=env)
    assert dropped.returncode == 0, dropped.stderr
    assert status(env)["set_aside"] == []
    assert "systemMessage" not in session_start(env, project)
    assert [f["severity"] for f in capture_findings(env)] == ["ok"]
    assert gone.parent.is_dir()  # dropping forgets the record, never a transcript


def test_a_worker_that_cannot_run_is_said_at_the_next_session_start_until_one_can(
    tmp_path: Path,
) -> None:
    env = hook_env(tmp_path)
    broken = {**env, "HYBRID_RAG_EMBEDDING_MODEL": str(tmp_path / "no-such-model")}
    project = tmp_path / "proj"
    transcript = write_transcript(tmp_path / "claude" / "s.jsonl", "s", 2, str(project))
    assert cli("capture", env=broken, stdin=payload(transcript, project)).returncode == 0
    folder = spool_of(tmp_path)
    failed(folder, 1)

    notice = session_start(broken, project)["systemMessage"]  # its worker fails again
    failed(folder, 2)
    assert "\n" not in notice
    assert "1 captured session not stored yet: the capture worker could not run" in notice
    assert "no-such-model" in notice and "memory-pipeline capture --status" in notice
    listed = status(env)
    assert listed["counts"]["worker_failed"] == 1 and listed["counts"]["waiting"] == 1
    assert "no-such-model" in listed["worker_failure"]["reason"]
    [finding] = capture_findings(env)
    assert finding["severity"] == "error"
    assert cli("health", env=env).returncode == 1  # sessions are not being stored

    # Fixed: the next worker that can run stores it and the notice is gone.
    drained = cli("capture", "--drain", env=env)
    assert drained.returncode == 0, drained.stderr
    wait_idle(folder)
    with memory(tmp_path, space_of(project)) as system:
        assert stored_once(system, transcript)
    assert status(env)["worker_failure"] is None
    assert "systemMessage" not in session_start(env, project)


def test_a_damaged_ledger_is_said_at_the_next_session_start_and_can_be_dropped(
    tmp_path: Path,
) -> None:
    env = hook_env(tmp_path)
    project = tmp_path / "proj"
    folder = spool_of(tmp_path)
    folder.mkdir(parents=True)
    (folder / spool.LEDGER_NAME).write_text("{garbage")
    transcript = write_transcript(tmp_path / "claude" / "l.jsonl", "l", 2, str(project))
    assert cli("capture", env=env, stdin=payload(transcript, project)).returncode == 0
    wait_idle(folder)

    notice = session_start(env, project)["systemMessage"]
    assert "an unreadable capture ledger was set aside" in notice
    [ledger] = status(env)["ledgers_set_aside"]
    assert ledger.startswith(f"{spool.LEDGER_NAME}.unreadable-")
    assert report(env, "stats")["captures"]["ledgers_set_aside"] == 1

    dropped = cli("capture", "--drop", "all", env=env)
    assert dropped.returncode == 0, dropped.stderr
    assert not (folder / ledger).exists()
    assert (folder / spool.LEDGER_NAME).exists()  # the new ledger stays
    assert "systemMessage" not in session_start(env, project)


def test_retry_stores_a_set_aside_capture_once_its_reason_is_gone(tmp_path: Path) -> None:
    env = hook_env(tmp_path)
    project = tmp_path / "proj"
    late = tmp_path / "claude" / "late.jsonl"
    assert cli("capture", env=env, stdin=payload(late, project)).returncode == 0
    wait_idle(spool_of(tmp_path))
    assert status(env)["counts"]["set_aside"] == 1

    again = cli("capture", "--retry", "late", env=env)  # still gone: set aside again
    assert again.returncode == 0, again.stderr
    assert [k["reason"] for k in status(env)["set_aside"]] == ["the transcript is gone"]

    write_transcript(late, "late", 3, str(project))
    done = cli("capture", "--retry", "late", env=env)
    assert done.returncode == 0, done.stderr
    assert "1 captured sessions stored or current, 0 set aside" in done.stdout
    with memory(tmp_path, space_of(project)) as system:
        assert stored_once(system, late)
    assert status(env)["counts"] == {
        "waiting": 0,
        "set_aside": 0,
        "ledgers_set_aside": 0,
        "worker_failed": 0,
    }


def test_a_name_nothing_set_aside_has_is_refused_and_nothing_changes(tmp_path: Path) -> None:
    env = hook_env(tmp_path)
    gone = tmp_path / "claude" / "gone.jsonl"
    assert cli("capture", env=env, stdin=payload(gone, tmp_path / "proj")).returncode == 0
    wait_idle(spool_of(tmp_path))
    before = status(env)
    for action in ("--drop", "--retry"):
        refused = cli("capture", action, "gone", "nosuch", env=env)
        assert refused.returncode == 2
        assert refused.stderr.count("\n") == 1, refused.stderr
        assert "'nosuch'" in refused.stderr and "capture --status" in refused.stderr
        assert status(env) == before
    nothing = cli("capture", "--status", env=hook_env(tmp_path / "empty"))
    assert nothing.returncode == 0 and "nothing needs you" in nothing.stdout

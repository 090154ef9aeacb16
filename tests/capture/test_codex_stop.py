"""``memory-pipeline capture`` driven as Codex drives its ``Stop`` hook: after every turn, the
rollout grown by that turn, the payload on stdin; the session stored once, by the Codex
source, with every turn and no chunk twice."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from memory_pipeline import spool
from memory_pipeline.cli import main
from memory_pipeline.sources.codex import parse_codex_session
from memory_pipeline.sources.status import conversation_source, is_current
from memory_pipeline.system import MemorySystem
from tests.capture.fake_responses import PROVIDER, reply
from tests.capture.helpers import START, cli, found, hook_env, memory, space_of, spool_of, wait_idle
from tests.cli.test_setup import clean_env

__all__ = ["clean_env"]  # the autouse fixture, used here by being imported

SESSION = "019af0c2-7d1e-7a44-9b1c-3e5f6a7b8c9d"


def said(n: int, role: str) -> str:
    return f"Codex turn {n}: the {role} settled on the walrus{n}{role[0]} plan."


def record(kind: str, payload: dict[str, object], second: int) -> str:
    at = (START + dt.timedelta(seconds=second)).isoformat().replace("+00:00", "Z")
    return json.dumps({"timestamp": at, "type": kind, "payload": payload}) + "\n"


def message(role: str, text: str) -> dict[str, object]:
    block = "input_text" if role == "user" else "output_text"
    return {"type": "message", "role": role, "content": [{"type": block, "text": text}]}


def start_rollout(sessions: Path, cwd: Path) -> Path:
    """A Codex rollout as a session begins: its metadata and the context Codex injects."""
    path = sessions / "2026" / "11" / "20" / f"rollout-2026-11-20T10-00-00-{SESSION}.jsonl"
    path.parent.mkdir(parents=True)
    meta = {"id": SESSION, "timestamp": "2026-11-20T10:00:00Z", "cwd": str(cwd)}
    context = message("user", f"<environment_context>cwd: {cwd}</environment_context>")
    path.write_text(record("session_meta", meta, 0) + record("response_item", context, 0))
    return path


def add_turn(rollout: Path, n: int) -> None:
    """One turn as Codex appends it before Stop runs: the prompt, its UI copy, the reply."""
    with rollout.open("a", encoding="utf-8") as out:
        out.write(record("response_item", message("user", said(n, "user")), 10 * n))
        out.write(record("event_msg", {"type": "user_message", "message": said(n, "user")}, 10 * n))
        out.write(record("response_item", message("assistant", said(n, "assistant")), 10 * n + 1))


def stop_payload(rollout: Path, cwd: Path, n: int) -> str:
    return json.dumps(
        {
            "session_id": SESSION,
            "turn_id": f"turn-{n}",
            "transcript_path": str(rollout),
            "cwd": str(cwd),
            "hook_event_name": "Stop",
            "model": "gpt-5-codex",
            "permission_mode": "default",
            "stop_hook_active": False,
            "last_assistant_message": said(n, "assistant"),
        }
    )


def the_one_document(system: MemorySystem, rollout: Path) -> list[str]:
    """The space's one document, the rollout as it is now; its chunks' texts."""
    [conv] = parse_codex_session(rollout)
    [doc_id] = system.store.document_ids()
    [doc] = system.store.documents_by_source(conversation_source(conv))
    assert doc.doc_id == doc_id and is_current(system.store, conv)
    return [chunk.content for chunk in system.store.document_chunks(doc_id)]


def test_a_codex_session_captured_after_every_turn_is_stored_once_with_every_turn(
    tmp_path: Path,
) -> None:
    env = hook_env(tmp_path)
    project = tmp_path / "orbit"
    project.mkdir()
    rollout = start_rollout(tmp_path / "codex" / "sessions", project)
    for n in range(1, 4):
        add_turn(rollout, n)
        done = cli("capture", env=env, stdin=stop_payload(rollout, project, n))
        assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
        wait_idle(spool_of(tmp_path))
        with memory(tmp_path, space_of(project)) as system:
            chunks = the_one_document(system, rollout)
            assert len(chunks) == len(set(chunks))
            for k in range(1, n + 1):  # every turn so far, each in one chunk of its own
                for role in ("user", "assistant"):
                    assert sum(said(k, role) in c for c in chunks) >= 1
            assert found(system, said(n, "assistant"))
            assert not any("environment_context" in c for c in chunks)
    log = (spool_of(tmp_path) / spool.LOG_NAME).read_text()
    assert log.count(f"pending: Stop {SESSION}") == 3 and "set aside:" not in log


def test_a_stop_without_a_rollout_prints_nothing_and_stores_nothing(tmp_path: Path) -> None:
    env = hook_env(tmp_path)
    payload = json.dumps(
        {"session_id": SESSION, "transcript_path": None, "hook_event_name": "Stop"}
    )
    done = cli("capture", env=env, stdin=payload)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert not spool.waiting(spool_of(tmp_path))
    assert "skipped: Stop without a transcript_path" in (
        (spool_of(tmp_path) / spool.LOG_NAME).read_text()
    )


def loopback_only() -> bool:
    """Whether a network namespace holding only loopback can be made here."""
    tool = shutil.which("unshare")
    return tool is not None and subprocess.run([tool, "-rn", "true"]).returncode == 0


@pytest.mark.slow
def test_the_real_codex_runs_the_hooks_setup_wrote_and_stores_its_session_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``setup codex --hooks``, then two turns of the real Codex CLI (the second resuming the
    session) against a fake Responses API, with nothing but loopback to reach."""
    codex = shutil.which("codex")
    if codex is None:
        pytest.skip("the Codex CLI is not installed (npm install @openai/codex puts `codex` here)")
    if not loopback_only():
        pytest.skip("needs `unshare -rn` (a network namespace holding only loopback)")
    env = hook_env(tmp_path)
    home, project = tmp_path / "codex", tmp_path / "orbit"
    home.mkdir()
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    (home / "config.toml").write_text(PROVIDER)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(project)
    monkeypatch.setenv("CODEX_HOME", str(home))
    assert main(["setup", "codex", "--hooks"]) == 0, capsys.readouterr().err
    if "--prompt" not in cli("recall", "--help", env=env).stdout:
        # Until prompt recall exists, its hook would end in a usage error, which blocks a prompt.
        hooks = json.loads((home / "hooks.json").read_text())
        del hooks["hooks"]["UserPromptSubmit"]
        (home / "hooks.json").write_text(json.dumps(hooks))
    driver = [sys.executable, "-m", "tests.capture.fake_responses", codex, "Which plan?", "And?"]
    done = subprocess.run(
        ["unshare", "-rn", *driver],
        env={**os.environ, "CODEX_HOME": str(home)},
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    runs = json.loads(done.stdout)
    assert [run["code"] for run in runs] == [0, 0], runs
    assert all(run["stderr"].count("hook: Stop Completed") == 1 for run in runs), runs
    assert all("hook: SessionStart Completed" in run["stderr"] for run in runs), runs
    wait_idle(spool_of(tmp_path))
    [rollout] = home.glob("sessions/*/*/*/rollout-*.jsonl")
    with memory(tmp_path, space_of(project)) as system:
        chunks = the_one_document(system, rollout)
        assert chunks == ["Which plan?", reply(1), "And?", reply(2)]
    log = (spool_of(tmp_path) / spool.LOG_NAME).read_text()
    assert log.count("pending: Stop") == 2 and log.count("stored: ") == 2

"""``recall --prompt``: the UserPromptSubmit hook, through the real command on a real memory.

The memory is a SQLite file and an index folder made by the real ``ingest`` command, with
the fast deterministic embedder (``hashing``), so the dense similarities are fixed by the
texts: the note about Redis and the prompt about it share their words (about 0.5), the
greeting shares none with any note (0 or a hash collision's ~0.1, and no BM25 score); the
floors are set between them (``FLOOR``, ``BM25_FLOOR``). Most tests search in the hook's own process
(``HYBRID_RAG_PROMPT_RECALL_HELPER=off``); the helper's own tests start the real one.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from memory_pipeline.cli.prompt_hook import helper_paths, helper_starting
from tests.conftest import CONSOLE_SCRIPT

ROOT = Path(__file__).resolve().parents[2]
SPACE = "project-a"
FLOOR = "0.35"
BM25_FLOOR = "1"
NOTES = {
    "redis.md": "# Session cache\n\nWe dropped Redis for the session cache in March: it lost "
    "sessions on every restart, so the sessions moved to PostgreSQL.\n",
    "grid.md": "# Login page\n\nThe login page uses a two-column grid on wide screens.\n",
    "release.md": "# Release\n\nRelease 2.0 moved the archive to JSONL files.\n",
}
REDIS = "why did we drop Redis for the session cache?"
GREETING = "hello there, good morning to you all!"


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A memory holding the three notes in ``SPACE``, indexed; the one on Redis important."""
    folder = tmp_path_factory.mktemp("prompt-memory")
    notes = folder / "notes"
    notes.mkdir()
    for name, text in NOTES.items():
        (notes / name).write_text(text, encoding="utf-8")
    env = _env(folder)
    (notes / "redis.md").rename(folder / "redis.md")  # an important note: in the start block
    steps = (
        ["ingest", *sorted(str(p) for p in notes.iterdir())],
        ["ingest", str(folder / "redis.md"), "--importance", "0.9"],
    )
    for args in (*steps, ["update-index"]):
        done = _run(args, env, folder)
        assert done.returncode == 0, done.stderr
    return folder


def _env(folder: Path, **extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("HYBRID_RAG_")}
    return {
        **base,
        "PYTHONPATH": str(ROOT),
        "HYBRID_RAG_DB_PATH": str(folder / "memory.db"),
        "HYBRID_RAG_INDEX_PATH": str(folder / "indices"),
        "HYBRID_RAG_ARCHIVE_PATH": str(folder / "archive"),
        "HYBRID_RAG_EMBEDDING_MODEL": "hashing",
        "HYBRID_RAG_SPACE": SPACE,
        "HYBRID_RAG_PROMPT_RECALL_FLOOR": FLOOR,
        "HYBRID_RAG_PROMPT_RECALL_BM25_FLOOR": BM25_FLOOR,
        "HYBRID_RAG_PROMPT_RECALL_HELPER": "off",
        **extra,
    }


def _run(
    args: list[str], env: dict[str, str], cwd: Path, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", CONSOLE_SCRIPT, *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        check=False,
        timeout=120,
    )


def _payload(prompt: str, session: str, cwd: Path) -> str:
    return json.dumps(
        {
            "session_id": session,
            "transcript_path": str(cwd / f"{session}.jsonl"),
            "cwd": str(cwd),
            "permission_mode": "default",
            "hook_event_name": "UserPromptSubmit",
            "prompt": prompt,
        }
    )


def _prompt(
    memory: Path, prompt: str, session: str, **extra: str
) -> subprocess.CompletedProcess[str]:
    return _run(
        ["recall", "--prompt"], _env(memory, **extra), memory, _payload(prompt, session, memory)
    )


def _added(done: subprocess.CompletedProcess[str]) -> str:
    """The context the hook added ("" for none); the hook always exits 0."""
    assert done.returncode == 0, done.stderr
    if not done.stdout.strip():
        return ""
    output = json.loads(done.stdout)
    assert set(output) == {"hookSpecificOutput"}
    hook = output["hookSpecificOutput"]
    assert hook["hookEventName"] == "UserPromptSubmit"
    return str(hook["additionalContext"])


def _log(memory: Path) -> str:
    log = memory / "capture" / "capture.log"
    return log.read_text(encoding="utf-8") if log.exists() else ""


def test_a_note_on_the_prompts_subject_is_handed_over_once_a_session(memory: Path) -> None:
    added = _added(_prompt(memory, REDIS, "s-once"))
    assert added.startswith("<memory-recall>\n") and added.rstrip().endswith("</memory-recall>")
    assert "We dropped Redis for the session cache" in added
    assert "Login page" not in added and "JSONL" not in added
    line = next(x for x in added.splitlines() if "Redis" in x)
    assert "Session cache" in line and "#0)" in line  # its document, and doc_id#chunk
    # The same session asks again: it has it already.
    assert _added(_prompt(memory, REDIS + " Remind me.", "s-once")) == ""
    # Another session has not seen it.
    assert "Redis" in _added(_prompt(memory, REDIS, "s-other"))


@pytest.mark.parametrize(
    "prompt",
    [
        GREETING,  # searched: nothing clears the floor
        "yes",
        "continue",
        "/compact keep the decisions",
        "<task-notification><task-id>7</task-id>why did we drop Redis for the session "
        "cache?</task-notification>",
        "<command-name>/review</command-name> why did we drop Redis for the session cache?",
    ],
)
def test_a_greeting_a_short_prompt_or_one_no_person_typed_gets_nothing(
    memory: Path, prompt: str
) -> None:
    assert _added(_prompt(memory, prompt, "s-nothing")) == ""


def test_the_floor_is_what_keeps_the_greeting_out(memory: Path) -> None:
    floors = {"HYBRID_RAG_PROMPT_RECALL_FLOOR": "-1", "HYBRID_RAG_PROMPT_RECALL_BM25_FLOOR": "0"}
    added = _added(_prompt(memory, GREETING, "s-floor", **floors))
    assert added.count("\n- ") >= 2  # with no floors, the nearest notes would come


def test_a_chunk_the_session_start_block_gave_is_not_given_again(memory: Path) -> None:
    env = _env(memory)
    start = json.dumps(
        {"session_id": "s-start", "cwd": str(memory), "hook_event_name": "SessionStart"}
    )
    block = _run(["recall", "--hook"], env, memory, start)
    assert "We dropped Redis" in json.loads(block.stdout)["hookSpecificOutput"]["additionalContext"]
    assert _added(_prompt(memory, REDIS, "s-start")) == ""
    assert "Redis" in _added(_prompt(memory, REDIS, "s-fresh"))


def test_switched_off_it_adds_nothing(memory: Path) -> None:
    assert _added(_prompt(memory, REDIS, "s-off", HYBRID_RAG_PROMPT_RECALL="off")) == ""


def test_a_broken_memory_never_blocks_the_prompt_and_the_log_says_why(tmp_path: Path) -> None:
    (tmp_path / "memory.db").write_bytes(b"this is not a database" * 100)
    done = _prompt(tmp_path, REDIS, "s-broken")
    assert done.returncode == 0 and done.stdout == ""
    assert "recall --prompt: nothing recalled" in _log(tmp_path)
    # A payload that is not JSON: the same.
    bad = _run(["recall", "--prompt"], _env(tmp_path), tmp_path, "{not json")
    assert bad.returncode == 0 and bad.stdout == ""


def test_no_memory_yet_makes_none(tmp_path: Path) -> None:
    done = _prompt(tmp_path, REDIS, "s-none")
    assert done.returncode == 0 and done.stdout == ""
    assert not (tmp_path / "memory.db").exists()


# ---------------------------------------------------------------- the helper


def _wait(condition, seconds: float = 60.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return False


@pytest.fixture
def helper_env(memory: Path) -> Iterator[dict[str, str]]:
    """The memory's settings with the helper on; whatever helper they started is stopped."""
    env = _env(memory, HYBRID_RAG_PROMPT_RECALL_HELPER="on")
    sock, lock = helper_paths(env)
    yield env
    pid = lock.read_text().strip() if lock.exists() else ""
    if pid.isdigit() and helper_starting(lock):  # held: the pid is the helper's
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid), signal.SIGTERM)
    _wait(lambda: not sock.exists(), 30)


def test_the_first_prompt_starts_the_helper_which_answers_the_next(
    memory: Path, helper_env: dict[str, str]
) -> None:
    sock, _ = helper_paths(helper_env)
    first = _run(["recall", "--prompt"], helper_env, memory, _payload(REDIS, "s-helper", memory))
    assert _added(first) == ""  # no helper yet: started, this prompt goes on without
    assert _wait(sock.exists), _log(memory)
    second = _run(["recall", "--prompt"], helper_env, memory, _payload(REDIS, "s-helper", memory))
    assert "We dropped Redis" in _added(second)
    third = _run(["recall", "--prompt"], helper_env, memory, _payload(REDIS, "s-helper", memory))
    assert _added(third) == ""  # given once in this session
    assert "started the helper" in _log(memory) and "listening" in _log(memory)


def test_the_helper_exits_when_idle_and_a_second_one_does_not_start(
    memory: Path, helper_env: dict[str, str]
) -> None:
    env = {**helper_env, "HYBRID_RAG_PROMPT_RECALL_IDLE": "2"}
    sock, lock = helper_paths(env)
    serve = [sys.executable, "-c", CONSOLE_SCRIPT, "recall", "--serve-prompts"]
    with open(lock, "a") as held:  # held as a running helper holds it
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        again = subprocess.run(serve, env=env, cwd=memory, timeout=60, check=False)
        assert again.returncode == 0 and not sock.exists()  # it left at once
    first = subprocess.Popen(serve, env=env, cwd=memory)
    assert first.wait(timeout=60) == 0  # it served, then went idle and left
    log = _log(memory)
    assert f"listening (pid {first.pid})" in log
    assert f"[{first.pid}] recall --serve-prompts: idle, exiting" in log
    assert not sock.exists()


def test_the_helper_searches_the_space_asked_and_the_ones_it_also_reads(tmp_path: Path) -> None:
    from memory_pipeline.cli.prompt_helper import Answering
    from memory_pipeline.embedding.base import HashingEmbedder
    from memory_pipeline.spaces import Spaces
    from memory_pipeline.system import MemorySystem
    from tests.conftest import make_settings

    floors = {"prompt_recall_floor": float(FLOOR), "prompt_recall_bm25_floor": float(BM25_FLOOR)}
    system = MemorySystem(make_settings(tmp_path, **floors), embedder=HashingEmbedder())
    try:
        for space in ("a", "b"):
            bound = system.bound(Spaces.bound(space))
            bound.ingest_text(NOTES["redis.md"].replace("March", f"March (space {space})"), "cache")
            bound.update_index()
        answering = Answering(system)

        def ask(space: str, reads: list[str]) -> str:
            request = {"prompt": REDIS, "session": None, "space": space, "read_spaces": reads}
            reply = answering.answer(request)
            return str(json.loads(reply["output"])["hookSpecificOutput"]["additionalContext"])

        assert "(space a)" in ask("a", []) and "(space b)" not in ask("a", [])
        both = ask("a", ["b"])
        assert "(space a)" in both and "(space b)" in both
        with pytest.raises(Exception, match="space"):
            answering.answer({"prompt": REDIS, "space": "../x", "read_spaces": []})
    finally:
        system.close()

"""A session log is not a file to the size cap (issue 46, item 3). Heavy users' long
sessions with big tool outputs run past ``HYBRID_RAG_MAX_FILE_BYTES`` (20 MiB); they are
read line by line whatever their size, captured whole, and a stored one that grows past
the cap is stored again with its new turns. The hook and the worker run as processes, as
Claude Code starts them."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from memory_pipeline import spool
from memory_pipeline.errors import InvalidInputError
from memory_pipeline.ingest.lines import read_lines
from memory_pipeline.sources.conversations import parse_claude_code_session
from tests.capture.helpers import (
    START,
    cli,
    hook_env,
    memory,
    payload,
    space_of,
    spool_of,
    stored_once,
    turn_text,
    wait_idle,
)

MIB = 2**20


def tool_round(session: str, n: int, parent: str | None, cwd: str, output: int) -> list[dict]:
    """Turn ``n`` as Claude Code logs it: the person asks, the assistant runs a tool, the
    tool answers with ``output`` bytes (kept twice, as Claude Code does: in the message and
    in ``toolUseResult``), and the assistant says what it found."""

    def record(
        kind: str, suffix: str, parent: str | None, content: object, **extra: object
    ) -> dict:
        return {
            "parentUuid": parent,
            "isSidechain": False,
            "cwd": cwd,
            "sessionId": session,
            "type": kind,
            "message": {"role": kind, "content": content},
            "uuid": f"{session}-{n}{suffix}",
            "timestamp": (START + dt.timedelta(minutes=n, seconds=len(suffix)))
            .isoformat()
            .replace("+00:00", "Z"),
            **extra,
        }

    call = f"toolu_{session}_{n}"
    stdout = (f"line {n} of a long build log " * (output // 28 + 1))[: output // 2]
    ask = record("user", "a", parent, turn_text(session, n))
    use = record(
        "assistant",
        "bb",
        ask["uuid"],
        [{"type": "tool_use", "id": call, "name": "Bash", "input": {"command": "make"}}],
    )
    result = record(
        "user",
        "ccc",
        use["uuid"],
        [{"type": "tool_result", "tool_use_id": call, "content": stdout}],
        toolUseResult={"stdout": stdout, "stderr": ""},
    )
    said = record(
        "assistant",
        "dddd",
        result["uuid"],
        [{"type": "text", "text": f"The build passed. {turn_text(session, n + 1000)}"}],
    )
    return [ask, use, result, said]


def big_transcript(
    path: Path, session: str, cwd: Path, rounds: int, output: int, first: int = 1
) -> Path:
    """A session log of ``rounds`` tool rounds of about ``output`` bytes each, appended
    to ``path`` (its turns numbered from ``first``) as a live session grows."""
    path.parent.mkdir(parents=True, exist_ok=True)
    parent = None
    if path.exists():
        *_, last = path.read_text(encoding="utf-8").splitlines()
        parent = json.loads(last)["uuid"]
    with path.open("a", encoding="utf-8") as fh:
        for n in range(first, first + rounds):
            for record in tool_round(session, n, parent, str(cwd), output):
                fh.write(json.dumps(record) + "\n")
                parent = record["uuid"]
    return path


def capture(env: dict[str, str], transcript: Path, project: Path) -> None:
    done = cli("capture", env=env, stdin=payload(transcript, project))
    assert done.returncode == 0, done.stderr


def chunk_text(tmp_path: Path, space: str) -> str:
    """Everything the space holds, its chunks' text run together."""
    with memory(tmp_path, space) as system:
        return "\n".join(
            c.content
            for doc_id in system.store.document_ids()
            for c in system.store.document_chunks(doc_id)
        )


def set_aside(folder: Path) -> dict[str, str]:
    """The captures set aside: session id → the reason they were."""
    kept = folder / spool.FAILED_DIR
    return {
        (r := json.loads(p.read_text()))["session_id"]: r["reason"]
        for p in sorted(kept.glob("*.json"))
    }


def test_a_30_mb_session_is_captured_whole_with_the_default_settings(tmp_path: Path) -> None:
    env = hook_env(tmp_path)
    project = tmp_path / "proj"
    transcript = big_transcript(tmp_path / "claude" / "huge.jsonl", "huge", project, 6, 5 * MIB)
    assert transcript.stat().st_size > 30 * MIB
    capture(env, transcript, project)
    folder = spool_of(tmp_path)
    wait_idle(folder)
    assert set_aside(folder) == {}
    with memory(tmp_path, space_of(project)) as system:
        assert stored_once(system, transcript)
    held = chunk_text(tmp_path, space_of(project))
    assert all(turn_text("huge", n) in held for n in [*range(1, 7), *range(1001, 1007)])


def test_a_stored_session_that_grows_past_the_file_cap_is_stored_with_its_new_turns(
    tmp_path: Path,
) -> None:
    env = hook_env(tmp_path)
    project = tmp_path / "proj"
    transcript = big_transcript(tmp_path / "claude" / "grows.jsonl", "grows", project, 2, MIB)
    capture(env, transcript, project)
    folder = spool_of(tmp_path)
    wait_idle(folder)
    with memory(tmp_path, space_of(project)) as system:
        assert stored_once(system, transcript)
    big_transcript(transcript, "grows", project, 4, 6 * MIB, first=3)
    assert transcript.stat().st_size > 20 * MIB
    capture(env, transcript, project)
    wait_idle(folder)
    assert set_aside(folder) == {}
    with memory(tmp_path, space_of(project)) as system:
        assert stored_once(system, transcript)
    assert turn_text("grows", 6) in chunk_text(tmp_path, space_of(project))


def test_the_file_cap_does_not_apply_to_session_logs(tmp_path: Path) -> None:
    """Small sessions under a tiny generic cap: new and grown, both stored."""
    env = {**hook_env(tmp_path), "HYBRID_RAG_MAX_FILE_BYTES": "1000"}
    project = tmp_path / "proj"
    transcript = big_transcript(tmp_path / "claude" / "small.jsonl", "small", project, 2, 4000)
    assert transcript.stat().st_size > 1000
    capture(env, transcript, project)
    folder = spool_of(tmp_path)
    wait_idle(folder)
    with memory(tmp_path, space_of(project)) as system:
        assert stored_once(system, transcript)
    big_transcript(transcript, "small", project, 1, 4000, first=3)
    capture(env, transcript, project)
    wait_idle(folder)
    assert set_aside(folder) == {}
    with memory(tmp_path, space_of(project)) as system:
        assert stored_once(system, transcript)
    assert turn_text("small", 3) in chunk_text(tmp_path, space_of(project))


def test_a_session_line_over_its_own_bound_is_set_aside_naming_the_setting(
    tmp_path: Path,
) -> None:
    """One record is held whole to be parsed; a record past the line bound is refused (a
    turn left out would cut the session's thread), the earlier version kept."""
    env = hook_env(tmp_path)
    project = tmp_path / "proj"
    transcript = big_transcript(tmp_path / "claude" / "wide.jsonl", "wide", project, 1, 100)
    capture(env, transcript, project)
    folder = spool_of(tmp_path)
    wait_idle(folder)
    big_transcript(transcript, "wide", project, 1, 20_000, first=2)
    capture({**env, "HYBRID_RAG_MAX_SESSION_LINE_BYTES": "5000"}, transcript, project)
    wait_idle(folder)
    reason = set_aside(folder)["wide"]
    assert "HYBRID_RAG_MAX_SESSION_LINE_BYTES" in reason and "line 7" in reason, reason
    held = chunk_text(tmp_path, space_of(project))
    assert turn_text("wide", 1) in held and turn_text("wide", 2) not in held


def test_a_codex_rollout_is_imported_past_the_file_cap(tmp_path: Path) -> None:
    env = {**hook_env(tmp_path), "HYBRID_RAG_MAX_FILE_BYTES": "1000"}
    rows = [
        {"timestamp": "2026-11-21T09:00:00Z", "type": "session_meta", "payload": {"id": "cx"}},
        *(
            {
                "timestamp": f"2026-11-21T09:00:{n:02d}Z",
                "type": "response_item",
                "payload": {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": turn_text("cx", n) + " pad" * 200}],
                },
            }
            for n in range(1, 4)
        ),
    ]
    rollout = tmp_path / "codex" / "rollout-cx.jsonl"
    rollout.parent.mkdir()
    rollout.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert rollout.stat().st_size > 1000
    done = cli("import", "codex", str(rollout), "--space", "cx", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert turn_text("cx", 3) in chunk_text(tmp_path, "cx")


@pytest.mark.parametrize(
    ("content", "bound", "lines"),
    [
        (b"12345\n", 5, ["12345\n"]),  # the bound is the line's text, its newline aside
        (b"12345", 5, ["12345"]),  # a last line without its newline
        (b"\xef\xbb\xbfab\ncd\n", 5, ["ab\n", "cd\n"]),  # a BOM is no content
        ("a\u2028b\x85c\n".encode(), 16, ["a\u2028b\x85c\n"]),  # split at \n only
    ],
)
def test_a_log_is_read_line_by_line_up_to_the_bound(
    tmp_path: Path, content: bytes, bound: int, lines: list[str]
) -> None:
    log = tmp_path / "s.jsonl"
    log.write_bytes(content)
    assert [line for _, line in read_lines(log, bound)] == lines


def test_a_line_past_the_bound_is_refused_with_its_number(tmp_path: Path) -> None:
    log = tmp_path / "s.jsonl"
    log.write_bytes(b"ok\n123456\n")
    with pytest.raises(InvalidInputError, match=r"line 2 .*HYBRID_RAG_MAX_SESSION_LINE_BYTES"):
        list(read_lines(log, 5))


def test_a_turn_holding_a_line_separator_is_kept(tmp_path: Path) -> None:
    """JSON may hold U+2028 unescaped (Claude Code writes it so); it ends no line."""
    log = big_transcript(tmp_path / "sep.jsonl", "sep", tmp_path, 1, 100)
    record = json.loads(log.read_text(encoding="utf-8").splitlines()[-1])
    record["message"]["content"][0]["text"] += " first\u2028second"
    with log.open("a", encoding="utf-8") as fh:
        fh.write(
            json.dumps(
                {**record, "uuid": "sep-last", "parentUuid": record["uuid"]}, ensure_ascii=False
            )
            + "\n"
        )
    [conv] = parse_claude_code_session(log)
    assert "first\u2028second" in conv.messages[-1].text

"""`setup claude-code --hooks` writes a user's settings only when it can write them exactly
(issue: setup that never damages a user's settings). A file it cannot keep as written is
refused before anything is written, byte for byte as it was; a symlinked file is written
through; this tool's own earlier hooks, from any install and with any flags, are replaced
rather than added beside.
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Any

import pytest

from memory_pipeline.cli.setup import hook_commands
from tests.cli.test_setup import clean_env, hooks_of, setup_in

__all__ = ["clean_env"]  # the autouse fixture, used here by being imported


def settings_of(project: Path) -> Path:
    path = project / ".claude" / "settings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b'{"x": 1e400}', "1e400"),
        (b'{"x": -1e400}', "-1e400"),
        (b'{"x": NaN}', "NaN"),
        (b'{"x": [Infinity]}', "Infinity"),
        (b'{"x": "caf\xe9"}', "not UTF-8"),
        (b'{"x": "\\ud800"}', "lone surrogate"),
        (b'{"x": 1, "x": 2}', 'key "x" twice'),
    ],
    ids=["huge", "huge negative", "NaN", "Infinity", "latin-1", "surrogate", "duplicate key"],
)
def test_a_settings_file_that_cannot_be_kept_as_written_is_refused_and_nothing_is_written(
    raw: bytes,
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    project = tmp_path / "proj"
    settings = settings_of(project)
    settings.write_bytes(raw)
    code, out, err = setup_in(project, monkeypatch, capsys, "--hooks")
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and message in err and "left as it was" in err, err
    assert settings.read_bytes() == raw
    assert not (project / ".mcp.json").exists()
    assert sorted(p.name for p in settings.parent.iterdir()) == ["settings.json"]


def test_numbers_and_text_are_kept_as_their_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "proj"
    settings = settings_of(project)
    text = (
        '{"big": 123456789012345678901234567890, "small": 1e-300, "tenth": 0.1, '
        '"neg": -0.0, "exp": 1E5, "text": "日本語 \\u00e9 \\"q\\" \\n"}'
    )
    settings.write_text(text, encoding="utf-8")
    code, _, err = setup_in(project, monkeypatch, capsys, "--hooks")
    assert code == 0, err
    after = json.loads(settings.read_text(encoding="utf-8"))
    before = json.loads(text)
    assert {k: after[k] for k in before} == before
    assert str(after["neg"]) == "-0.0" and type(after["big"]) is int


def test_a_symlinked_settings_file_and_mcp_json_are_written_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "proj"
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    (dotfiles / "settings.json").write_text('{"model": "opus"}')
    (dotfiles / "mcp.json").write_text('{"mcpServers": {"other": {"command": "x"}}}')
    settings = settings_of(project)
    settings.symlink_to(dotfiles / "settings.json")
    (project / ".mcp.json").symlink_to(dotfiles / "mcp.json")
    code, _, err = setup_in(project, monkeypatch, capsys, "--hooks")
    assert code == 0, err
    assert settings.is_symlink() and (project / ".mcp.json").is_symlink()
    written = json.loads((dotfiles / "settings.json").read_text())
    assert written["model"] == "opus" and set(written["hooks"]) == set(hook_commands(None))
    servers = json.loads((dotfiles / "mcp.json").read_text())["mcpServers"]
    assert set(servers) == {"other", "hybrid-rag"}


def test_a_claude_folder_that_cannot_be_written_is_refused_before_anything_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    (project / ".claude").write_text("a file where the folder should be")
    code, out, err = setup_in(project, monkeypatch, capsys, "--hooks")
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and ".claude" in err and "nothing was written" in err, err
    assert "wal" not in err
    assert not (project / ".mcp.json").exists()
    assert (project / ".claude").read_text() == "a file where the folder should be"


def ours(project: Path) -> dict[str, list[str]]:
    """Each event's hook commands that run this tool (any install)."""
    found: dict[str, list[str]] = {}
    for event, groups in hooks_of(project).items():
        for group in groups:
            for hook in group["hooks"]:
                words = shlex.split(hook["command"])
                if any(w.endswith(("memory-pipeline", "memory_pipeline.cli")) for w in words):
                    found.setdefault(event, []).append(hook["command"])
    return found


def test_a_second_setup_with_other_flags_replaces_its_hooks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "proj"
    assert setup_in(project, monkeypatch, capsys, "--hooks", "--space", "one")[0] == 0
    code, out, err = setup_in(project, monkeypatch, capsys, "--hooks", "--space", "two")
    assert code == 0, err
    now = hook_commands("two")
    assert ours(project) == {event: [hook.command] for event, hook in now.items()}
    assert out.count(", replaced an earlier one)") == 4


def test_hooks_of_another_install_are_replaced_and_the_users_own_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "proj"
    settings = settings_of(project)
    theirs = {"type": "command", "command": "notify-send 'memory-pipeline capture'"}
    old: dict[str, Any] = {
        "SessionEnd": [
            {
                "hooks": [
                    {"type": "command", "command": "/old/venv/bin/memory-pipeline capture"},
                    theirs,
                ]
            }
        ],
        "PreCompact": [
            {"hooks": [{"type": "command", "command": "memory-pipeline capture --space x"}]}
        ],
        "SessionStart": [
            {
                "hooks": [
                    {
                        "type": "command",
                        "command": "/usr/bin/python3 -m memory_pipeline.cli recall --hook",
                    }
                ]
            }
        ],
    }
    settings.write_text(json.dumps({"hooks": old}))
    code, _, err = setup_in(project, monkeypatch, capsys, "--hooks")
    assert code == 0, err
    now = hook_commands(None)
    assert ours(project) == {event: [hook.command] for event, hook in now.items()}
    hooks = hooks_of(project)
    assert theirs in [h for g in hooks["SessionEnd"] for h in g["hooks"]]
    assert all(g["hooks"] for groups in hooks.values() for g in groups)  # no empty group left
    assert os.listdir(settings.parent) == ["settings.json"]


def test_a_hook_of_an_older_timeout_is_replaced_by_one_with_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "proj"
    settings = settings_of(project)
    now = hook_commands(None)
    older = {
        event: [{"hooks": [{"type": "command", "command": hook.command, "timeout": 30}]}]
        for event, hook in now.items()
        if event != "UserPromptSubmit"  # an install from before prompt recall
    }
    settings.write_text(json.dumps({"hooks": older}))
    code, out, err = setup_in(project, monkeypatch, capsys, "--hooks")
    assert code == 0, err
    assert hooks_of(project) == {
        event: [{"hooks": [{"type": "command", "command": hook.command, "timeout": hook.timeout}]}]
        for event, hook in now.items()
    }
    assert {hook.timeout for hook in now.values()} == {5, 10}
    assert out.count(", replaced an earlier one)") == 3 and out.count(", added)") == 1
    before = settings.read_bytes()
    code, out, err = setup_in(project, monkeypatch, capsys, "--hooks")
    assert (code, settings.read_bytes()) == (0, before), err
    assert out.count(", already there)") == 4

"""`memory-pipeline setup codex [--hooks]` writing the Codex CLI's own files.

The server goes into ``$CODEX_HOME/config.toml`` and the hooks into ``hooks.json`` beside
it, trusted in config.toml; everything else in both is kept, a second run changes nothing,
and a file that could not be kept is refused before anything is written. The trust hashes
are checked against the ones the real Codex (0.171.0) reported, and, where ``codex`` is
installed, against the running Codex itself.
"""

from __future__ import annotations

import difflib
import json
import os
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest

from memory_pipeline.cli import main
from memory_pipeline.cli.codex_setup import hook_key, trust_hash
from memory_pipeline.cli.setup import SERVER_NAME, hook_commands, server_command
from memory_pipeline.cli.setup_files import Hook
from memory_pipeline.spaces import marked_space
from tests.cli.test_setup import clean_env

__all__ = ["clean_env"]  # the autouse fixture, used here by being imported

CONFIG = """\
# my Codex settings
model = "o3"  # the model I use

[mcp_servers.other]
command = "npx"
args = ["-y", "other-server"]  # pinned below
env = { TOKEN_FILE = "~/.other" }

# projects I trust
[projects."/home/me/code"]
trust_level = "trusted"
"""
THEIRS = {"type": "command", "command": "notify-send done", "timeout": 3}


def hooks_file_text(hooks: dict[str, Any]) -> str:
    """A hooks.json as Codex's and Claude Code's docs lay it out (two spaces)."""
    return json.dumps({"hooks": hooks}, indent=2) + "\n"


def setup_codex(
    home: Path,
    project: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    *flags: str,
) -> tuple[int, str, str]:
    """``memory-pipeline setup codex FLAGS`` in ``project`` with ``CODEX_HOME=home``."""
    project.mkdir(parents=True, exist_ok=True)
    monkeypatch.chdir(project)
    monkeypatch.setenv("CODEX_HOME", str(home))
    try:
        code = main(["setup", "codex", *flags])
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def codex_hooks() -> dict[str, Hook]:
    return hook_commands(None, capture_on=("Stop",))


def added_lines(before: str, after: str) -> list[str]:
    """The lines ``after`` adds to ``before``; fails when it removes or changes any."""
    diff = list(difflib.ndiff(before.splitlines(), after.splitlines()))
    assert not [line for line in diff if line.startswith("- ")], "\n".join(diff)
    return [line[2:] for line in diff if line.startswith("+ ")]


def test_setup_codex_twice_keeps_every_other_setting_and_hook_and_adds_ours_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    home, project = tmp_path / "codex", tmp_path / "proj"
    home.mkdir()
    config, hooks_json = home / "config.toml", home / "hooks.json"
    config.write_text(CONFIG)
    theirs = {event: [{"hooks": [THEIRS]}] for event in ("SessionStart", "Stop")}
    theirs["UserPromptSubmit"] = [{"matcher": "*", "hooks": [THEIRS, THEIRS]}]
    hooks_json.write_text(hooks_file_text(theirs))
    code, out, err = setup_codex(home, project, monkeypatch, capsys, "--hooks")
    assert code == 0, err
    space = marked_space(project.resolve())
    command, *args = server_command()
    key_file = home.resolve() / "hooks.json"
    wanted = codex_hooks()
    place = {"SessionStart": 1, "UserPromptSubmit": 1, "Stop": 1}  # after theirs
    env = f'{{HYBRID_RAG_SPACE = "{space}", HF_HUB_OFFLINE = "1", TRANSFORMERS_OFFLINE = "1"}}'
    state = []
    for event, hook in wanted.items():
        state += [
            *([""] if state else []),
            f'[hooks.state."{hook_key(key_file, (event, place[event], 0))}"]',
            f'trusted_hash = "{trust_hash(event, hook)}"',
        ]
    assert added_lines(CONFIG, config.read_text()) == [
        "",
        f"[mcp_servers.{SERVER_NAME}]",
        f"command = {json.dumps(command)}",
        f"args = {json.dumps(args)}",
        f"env = {env}",
        "",
        *state,
    ]
    data = json.loads(hooks_json.read_text())["hooks"]
    assert data == {
        event: [*theirs[event], {"hooks": [hook.to_json()]}] for event, hook in wanted.items()
    }
    assert out.count(", added)") == 3 and "the 3 hooks above trusted" in out
    before = (config.read_bytes(), hooks_json.read_bytes())
    code, out, err = setup_codex(home, project, monkeypatch, capsys, "--hooks")
    assert code == 0, err
    assert (config.read_bytes(), hooks_json.read_bytes()) == before
    assert "already set up" in out and out.count(", already there)") == 3
    assert sorted(p.name for p in home.iterdir()) == ["config.toml", "hooks.json"]


def test_without_hooks_only_the_server_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "codex"
    code, _, err = setup_codex(home, tmp_path / "proj", monkeypatch, capsys)
    assert code == 0, err
    assert os.listdir(home) == ["config.toml"]
    written = tomllib.loads((home / "config.toml").read_text())
    assert set(written) == {"mcp_servers"}
    assert written["mcp_servers"][SERVER_NAME]["args"] == list(server_command()[1:])


def test_earlier_hooks_are_replaced_and_other_hooks_keep_their_trust_where_they_move(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    home, project = tmp_path / "codex", tmp_path / "proj"
    home.mkdir()
    key_file = home.resolve() / "hooks.json"
    older = Hook("/old/venv/bin/memory-pipeline capture --space x", 30)
    (home / "hooks.json").write_text(
        hooks_file_text({"Stop": [{"hooks": [older.to_json()]}, {"hooks": [THEIRS]}]})
    )
    theirs_hash = trust_hash("Stop", Hook(THEIRS["command"], THEIRS["timeout"]))
    (home / "config.toml").write_text(
        f'[hooks.state."{key_file}:stop:0:0"]\ntrusted_hash = "{trust_hash("Stop", older)}"\n\n'
        f'[hooks.state."{key_file}:stop:1:0"]\ntrusted_hash = "{theirs_hash}"\nenabled = true\n'
    )
    code, out, err = setup_codex(home, project, monkeypatch, capsys, "--hooks")
    assert code == 0, err
    ours = codex_hooks()["Stop"]
    stop = json.loads((home / "hooks.json").read_text())["hooks"]["Stop"]
    assert stop == [{"hooks": [THEIRS]}, {"hooks": [ours.to_json()]}]
    states = tomllib.loads((home / "config.toml").read_text())["hooks"]["state"]
    assert {k: v for k, v in states.items() if ":stop:" in k} == {
        f"{key_file}:stop:0:0": {"trusted_hash": theirs_hash, "enabled": True},
        f"{key_file}:stop:1:0": {"trusted_hash": trust_hash("Stop", ours)},
    }
    assert "(5 s, replaced an earlier one)" in out and "the trust of 1 other hooks moved" in out


@pytest.mark.parametrize(
    ("name", "raw", "message"),
    [
        ("config.toml", b'model = "o3\n', "is not valid TOML"),
        ("config.toml", b"mcp_servers = 3\n", "mcp_servers is not a table"),
        ("config.toml", b'[hooks]\nstate = "x"\n', "hooks.state is not a table"),
        ("config.toml", b'model = "caf\xe9"\n', "not UTF-8"),
        ("hooks.json", b'{"hooks": {', "is not valid JSON"),
        ("hooks.json", b'{"hooks": {"Stop": {}}}', '"hooks" is not an object of lists'),
    ],
    ids=["broken toml", "servers not a table", "state not a table", "latin-1", "broken", "shape"],
)
def test_a_file_that_cannot_be_kept_is_refused_and_nothing_is_written(
    name: str,
    raw: bytes,
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    home = tmp_path / "codex"
    home.mkdir()
    (home / name).write_bytes(raw)
    code, out, err = setup_codex(home, tmp_path / "proj", monkeypatch, capsys, "--hooks")
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and name in err and message in err, err
    assert "nothing was written" in err
    assert os.listdir(home) == [name] and (home / name).read_bytes() == raw


def test_agents_go_with_claude_code_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = setup_codex(
        tmp_path / "codex", tmp_path / "p", monkeypatch, capsys, "--agents"
    )
    assert (code, out) == (2, "") and "setup claude-code --agents" in err
    assert not (tmp_path / "codex").exists()


# What ``codex app-server``'s hooks/list reported as each hook's currentHash (Codex 0.171.0).
@pytest.mark.parametrize(
    ("event", "hook", "matcher", "reported"),
    [
        ("SessionStart", Hook("/x/memory-pipeline recall --hook", 10), None, "f652c125"),
        ("UserPromptSubmit", Hook("/x/memory-pipeline recall --prompt", 5), None, "30de8900"),
        ("Stop", Hook("/x/memory-pipeline capture", 5), None, "9f6a3981"),
        ("SessionStart", Hook("a b", 10), "startup", "8232089e"),
        ("SessionStart", Hook("a b", 10), "", "0b8bdebf"),
        ("UserPromptSubmit", Hook("a 'é x' \"q\"", 5), "x", "7be64ad7"),  # matcher not counted
        ("Stop", Hook("a b", 5), "*", "6c254ba4"),
    ],
)
def test_the_trust_hash_is_the_one_codex_reports(
    event: str, hook: Hook, matcher: str | None, reported: str
) -> None:
    digest = trust_hash(event, hook, matcher)
    assert digest.startswith(f"sha256:{reported}") and len(digest) == len("sha256:") + 64


def hooks_listed(codex: str, home: Path, cwd: Path) -> list[dict[str, Any]]:
    """The hooks ``codex app-server`` lists for ``cwd`` (its JSON-RPC ``hooks/list``)."""
    requests = [
        {"id": 1, "method": "initialize", "params": {"clientInfo": {"name": "t", "version": "1"}}},
        {"method": "initialized"},
        {"id": 2, "method": "hooks/list", "params": {"cwds": [str(cwd)]}},
    ]
    with subprocess.Popen(
        [codex, "app-server"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "CODEX_HOME": str(home)},
        cwd=cwd,
    ) as server:
        assert server.stdin is not None and server.stdout is not None
        server.stdin.write("".join(json.dumps(r) + "\n" for r in requests))
        server.stdin.flush()
        try:
            for line in server.stdout:
                message = json.loads(line)
                if message.get("id") == 2:
                    return list(message["result"]["data"][0]["hooks"])
        finally:
            server.kill()
    raise AssertionError("codex app-server ended without answering hooks/list")


@pytest.mark.slow
def test_the_real_codex_counts_the_hooks_setup_wrote_as_trusted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Against ``codex app-server`` itself: our hooks trusted; another tool's hook that the
    user trusted (with the hash Codex reported) still trusted after it moved."""
    codex = shutil.which("codex")
    if codex is None:
        pytest.skip("the Codex CLI is not installed (npm install @openai/codex puts `codex` here)")
    home, project = tmp_path / "codex", tmp_path / "proj"
    home.mkdir()
    project.mkdir()
    linked = tmp_path / "linked-codex-home"  # Codex names hooks by its home's real path
    linked.symlink_to(home)
    older = Hook("/old/venv/bin/memory-pipeline capture", 30)
    (home / "hooks.json").write_text(
        hooks_file_text({"Stop": [{"hooks": [older.to_json()]}, {"hooks": [THEIRS]}]})
    )
    [listed] = [
        h for h in hooks_listed(codex, linked, project) if h["command"] == "notify-send done"
    ]
    (home / "config.toml").write_text(
        f'{CONFIG}\n[hooks.state."{listed["key"]}"]\ntrusted_hash = "{listed["currentHash"]}"\n'
    )
    assert setup_codex(linked, project, monkeypatch, capsys, "--hooks")[0] == 0
    status = {
        (h["command"], h["eventName"], h["key"].rsplit(":", 2)[-2]): h["trustStatus"]
        for h in hooks_listed(codex, linked, project)
    }
    ours = codex_hooks()
    assert status == {
        (ours["SessionStart"].command, "sessionStart", "0"): "trusted",
        (ours["UserPromptSubmit"].command, "userPromptSubmit", "0"): "trusted",
        (THEIRS["command"], "stop", "0"): "trusted",  # moved from group 1, its trust with it
        (ours["Stop"].command, "stop", "1"): "trusted",
    }

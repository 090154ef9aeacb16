"""`memory-pipeline setup claude-code` in real project folders, and the servers it sets up.

The written ``.mcp.json`` is read back and its server started the way a client starts it
(command, args, the entry's env over the client's own) with the MCP SDK's stdio client.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import tomllib
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from memory_pipeline.cli import main
from memory_pipeline.cli.setup import SERVER_NAME, server_command, shipped_agents
from memory_pipeline.spaces import marked_space
from serving.harness import REPO, structured

OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith(("HYBRID_RAG_", "MEMORY_PIPELINE_")):
            monkeypatch.delenv(key)


def setup_in(
    folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *flags: str
) -> tuple[int, str, str]:
    """``memory-pipeline setup claude-code FLAGS`` run in ``folder``: exit code, stdout, stderr."""
    folder.mkdir(parents=True, exist_ok=True)
    monkeypatch.chdir(folder)
    try:
        code = main(["setup", "claude-code", *flags])
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def entry_of(folder: Path) -> dict[str, Any]:
    return dict(json.loads((folder / ".mcp.json").read_text())["mcpServers"][SERVER_NAME])


def test_a_fresh_folder_gets_one_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "My Project"
    code, out, err = setup_in(project, monkeypatch, capsys)
    assert code == 0, err
    space = marked_space(project.resolve())
    assert space.startswith("my-project-")
    command, *args = server_command()
    assert json.loads((project / ".mcp.json").read_text()) == {
        "mcpServers": {
            SERVER_NAME: {
                "type": "stdio",
                "command": command,
                "args": args,
                "env": {"HYBRID_RAG_SPACE": space, **OFFLINE},
            }
        }
    }
    assert Path(command).is_absolute()
    assert "${" not in (project / ".mcp.json").read_text()
    assert not list(project.glob("*.part"))
    # The printed equivalents hold the same command, args and env.
    line = next(ln for ln in out.splitlines() if ln.startswith("claude mcp add"))
    words = shlex.split(line)
    assert words[:6] == ["claude", "mcp", "add", SERVER_NAME, "--scope", "project"]
    assert words[words.index("--") + 1 :] == [command, *args]
    assert f"HYBRID_RAG_SPACE={space}" in words
    toml_text = out[out.index(f"[mcp_servers.{SERVER_NAME}]") :]
    codex = tomllib.loads(toml_text)["mcp_servers"][SERVER_NAME]
    assert codex == {
        "command": command,
        "args": args,
        "env": {"HYBRID_RAG_SPACE": space, **OFFLINE},
    }


def test_read_spaces_and_explicit_storage_are_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "proj"
    flags = ("--space", "team-a", "--read-space", "shared", "--db", "m.db", "--index", "idx")
    code, _, err = setup_in(project, monkeypatch, capsys, *flags)
    assert code == 0, err
    assert entry_of(project)["env"] == {
        "HYBRID_RAG_SPACE": "team-a",
        "HYBRID_RAG_READ_SPACES": "shared",
        "HYBRID_RAG_DB_PATH": str(project / "m.db"),
        "HYBRID_RAG_INDEX_PATH": str(project / "idx"),
        **OFFLINE,
    }


def test_other_servers_and_keys_are_kept_and_a_rerun_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    other = {"command": "npx", "args": ["-y", "other"], "env": {"TOKEN": "${TOKEN}"}}
    old = {"type": "stdio", "command": "/old/python", "args": ["-m", "serving"]}
    existing = {"mcpServers": {"other": other, SERVER_NAME: old}, "note": [1, 2]}
    (project / ".mcp.json").write_text(json.dumps(existing))
    assert setup_in(project, monkeypatch, capsys)[0] == 0
    written = json.loads((project / ".mcp.json").read_text())
    assert written["note"] == [1, 2]
    assert list(written["mcpServers"]) == ["other", SERVER_NAME]
    assert written["mcpServers"]["other"] == other
    assert written["mcpServers"][SERVER_NAME]["command"] == server_command()[0]
    first = (project / ".mcp.json").read_bytes()
    code, out, _ = setup_in(project, monkeypatch, capsys)
    assert code == 0 and "already set up" in out
    assert (project / ".mcp.json").read_bytes() == first


@pytest.mark.parametrize(
    "text",
    ['{"mcpServers": {"other": ', "[1, 2]", '{"mcpServers": []}', "not json"],
    ids=["truncated", "a list", "servers not an object", "not json"],
)
def test_an_unusable_mcp_json_is_refused_and_left_alone(
    text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    (project / ".mcp.json").write_text(text)
    code, out, err = setup_in(project, monkeypatch, capsys)
    assert code == 2 and out == ""
    assert f"error: {project / '.mcp.json'} is not" in err
    assert "left as it was" in err
    assert (project / ".mcp.json").read_text() == text
    assert sorted(p.name for p in project.iterdir()) == [".mcp.json"]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--space", "Team A"), "error: --space: space name 'Team A' is not valid"),
        (("--space=-x",), "error: --space: space name '-x' is not valid"),
        (("--read-space", "Shared!"), "error: --read-space: space name 'Shared!' is not valid"),
    ],
)
def test_space_flags_are_checked(
    flags: tuple[str, ...],
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = setup_in(tmp_path / "proj", monkeypatch, capsys, *flags)
    assert (code, out) == (2, "")
    assert message in err
    assert not (tmp_path / "proj" / ".mcp.json").exists()


@pytest.mark.parametrize(
    ("folder", "name"),
    [
        ("proj", "proj"),
        ("My Project", "my-project"),
        ("Foo_Bar.v2", "foo_bar.v2"),
        ("--weird  name!!", "weird-name"),
        ("x" * 80, "x" * 57),
        ("メモ app", "app"),
        ("メモ", "project"),
    ],
)
def test_the_space_is_the_folders_name_and_a_mark_of_its_path(
    folder: str,
    name: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = setup_in(tmp_path / folder, monkeypatch, capsys)
    assert code == 0, err
    space = entry_of(tmp_path / folder)["env"]["HYBRID_RAG_SPACE"]
    mark = hashlib.sha256(str((tmp_path / folder).resolve()).encode()).hexdigest()[:6]
    assert space == f"{name}-{mark}"
    assert len(space) <= 64
    assert f"space {space!r}" in out
    assert f"project root: {(tmp_path / folder).resolve()}" in out


def test_the_shipped_agents_are_the_repositorys() -> None:
    repo = {
        p.name: p.read_text(encoding="utf-8") for p in (REPO / ".claude" / "agents").glob("*.md")
    }
    assert len(repo) == 3
    assert shipped_agents() == repo


def test_agents_are_written_and_a_changed_one_is_kept_without_force(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "proj"
    agents = project / ".claude" / "agents"
    code, out, err = setup_in(project, monkeypatch, capsys, "--agents")
    assert code == 0, err
    shipped = shipped_agents()
    assert {p.name: p.read_text() for p in agents.iterdir()} == shipped
    mine = agents / "rag-memory.md"
    mine.write_text("my own version\n")
    code, out, err = setup_in(project, monkeypatch, capsys, "--agents")
    assert code == 0
    assert mine.read_text() == "my own version\n"
    assert "skipped .claude/agents/rag-memory.md" in err and "--force" in err
    assert "unchanged .claude/agents/doc-to-memory.md" in out
    code, out, _ = setup_in(project, monkeypatch, capsys, "--agents", "--force")
    assert code == 0 and "wrote .claude/agents/rag-memory.md" in out
    assert mine.read_text() == shipped["rag-memory.md"]


# ------------------------------------------------------------- the servers it sets up
def client_env(home: Path, **extra: str) -> dict[str, str]:
    """What a client's own environment adds: a home of its own, the test embedder, this
    checkout on the path."""
    return {
        "HOME": str(home),
        "XDG_DATA_HOME": str(home / "data"),
        "XDG_CACHE_HOME": str(home / "cache"),
        "HYBRID_RAG_EMBEDDING_MODEL": "hashing",
        "PYTHONPATH": str(REPO),
        **extra,
    }


def as_a_client_starts_it(project: Path, env: dict[str, str]) -> StdioServerParameters:
    entry = entry_of(project)
    return StdioServerParameters(
        command=entry["command"],
        args=entry["args"],
        env={**env, **entry["env"]},
        cwd=project,
    )


async def remember(project: Path, env: dict[str, str], text: str, title: str) -> None:
    async with Client(as_a_client_starts_it(project, env)) as client:
        out = structured(await client.call_tool("ingest_text", {"text": text, "title": title}))
        assert out["results"][0]["status"] == "ingested"


async def titles_found(project: Path, env: dict[str, str], query: str) -> set[str]:
    async with Client(as_a_client_starts_it(project, env)) as client:
        out = structured(await client.call_tool("hybrid_search", {"query": query}))
        return {chunk["title"] for chunk in out["chunks"]}


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_written_server_starts_and_remembers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "alpha"
    assert setup_in(project, monkeypatch, capsys)[0] == 0
    env = client_env(tmp_path / "home")
    await remember(project, env, "Violins are tuned in fifths.", "strings")
    assert await titles_found(project, env, "violins tuned fifths") == {"strings"}


@pytest.mark.slow
@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_two_projects_share_one_memory_but_not_their_notes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    alpha, beta, gamma = tmp_path / "alpha", tmp_path / "beta", tmp_path / "gamma"
    assert setup_in(alpha, monkeypatch, capsys)[0] == 0
    assert setup_in(beta, monkeypatch, capsys)[0] == 0
    alpha_space = entry_of(alpha)["env"]["HYBRID_RAG_SPACE"]
    assert setup_in(gamma, monkeypatch, capsys, "--read-space", alpha_space)[0] == 0
    # Nothing names a memory: every project's server uses the user's one default memory.
    env = client_env(tmp_path / "home")
    await remember(alpha, env, "Violins are tuned in fifths.", "alpha strings")
    await remember(beta, env, "Violins in beta are tuned in fourths.", "beta strings")
    query = "violins tuned"
    assert await titles_found(alpha, env, query) == {"alpha strings"}
    assert await titles_found(beta, env, query) == {"beta strings"}
    assert await titles_found(gamma, env, query) == {"alpha strings"}
    assert [p.name for p in (tmp_path / "home" / "data" / "memory-pipeline").glob("*.db")] == [
        "memory.db"
    ]


def hooks_of(folder: Path) -> dict[str, Any]:
    return dict(json.loads((folder / ".claude" / "settings.json").read_text())["hooks"])


def test_hooks_are_merged_beside_the_users_own_and_a_rerun_adds_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "proj"
    theirs = {"type": "command", "command": "notify-send bye"}
    settings = project / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(
        json.dumps(
            {
                "permissions": {"allow": ["Bash(ls)"]},
                "hooks": {"SessionEnd": [{"hooks": [theirs]}], "Stop": [{"hooks": [theirs]}]},
            }
        )
    )
    code, out, err = setup_in(project, monkeypatch, capsys, "--hooks")
    assert code == 0, err
    cli = str(Path(server_command()[0]).parent / "memory-pipeline")
    if not Path(cli).is_file():  # a checkout without the console script
        cli = shlex.join([server_command()[0], "-m", "memory_pipeline.cli"])
    ours = {
        event: {"hooks": [{"type": "command", "command": f"{cli} {words}", "timeout": timeout}]}
        for event, words, timeout in (
            ("SessionEnd", "capture", 5),
            ("PreCompact", "capture", 5),
            ("SessionStart", "recall --hook --start-prompt-helper", 10),
            ("UserPromptSubmit", "recall --prompt", 5),
        )
    }
    assert hooks_of(project) == {
        "SessionEnd": [{"hooks": [theirs]}, ours["SessionEnd"]],
        "Stop": [{"hooks": [theirs]}],
        "SessionStart": [ours["SessionStart"]],
        "UserPromptSubmit": [ours["UserPromptSubmit"]],
        "PreCompact": [ours["PreCompact"]],
    }
    assert json.loads(settings.read_text())["permissions"] == {"allow": ["Bash(ls)"]}
    assert out.count(", added)") == 4 and f"hook SessionEnd → {cli} capture (5 s, added)" in out
    before = settings.read_text()
    code, out, err = setup_in(project, monkeypatch, capsys, "--hooks")
    assert code == 0, err
    assert settings.read_text() == before
    assert out.count(", already there)") == 4 and "added)" not in out


def test_hooks_carry_a_chosen_space(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = setup_in(tmp_path / "proj", monkeypatch, capsys, "--hooks", "--space", "work")
    assert code == 0, err
    [group] = hooks_of(tmp_path / "proj")["SessionEnd"]
    assert group["hooks"][0]["command"].endswith(" capture --space work")


def test_the_recall_hook_reads_the_spaces_the_server_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = setup_in(
        tmp_path / "proj", monkeypatch, capsys, "--hooks", "--read-space", "shared"
    )
    assert code == 0, err
    [start] = hooks_of(tmp_path / "proj")["SessionStart"]
    assert start["hooks"][0]["command"].endswith(
        " recall --hook --start-prompt-helper --read-space shared"
    )
    [prompt] = hooks_of(tmp_path / "proj")["UserPromptSubmit"]
    assert prompt["hooks"][0]["command"].endswith(" recall --prompt --read-space shared")
    [end] = hooks_of(tmp_path / "proj")["SessionEnd"]
    assert end["hooks"][0]["command"].endswith(" capture")  # capture writes its own space only


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"hooks": {', "is not valid JSON"),
        ("[1]", "is not a JSON object"),
        ('{"hooks": {"SessionEnd": {}}}', '"hooks" is not an object of lists'),
    ],
    ids=["broken", "a list", "hooks of the wrong shape"],
)
def test_unusable_settings_are_refused_and_nothing_is_written(
    text: str,
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    project = tmp_path / "proj"
    settings = project / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(text)
    code, out, err = setup_in(project, monkeypatch, capsys, "--hooks")
    assert (code, out) == (2, "")
    assert message in err and "left as it was" in err
    assert settings.read_text() == text
    assert not (project / ".mcp.json").exists()


def test_an_older_setup_keeps_its_folder_name_space_and_is_told_how_to_leave_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A .mcp.json written when setup named the folder alone is not split by a new run:
    the server keeps writing where the project's memory is; setup says how to move it."""
    project = tmp_path / "proj"
    old = {"mcpServers": {SERVER_NAME: {"type": "stdio", "env": {"HYBRID_RAG_SPACE": "proj"}}}}
    project.mkdir()
    (project / ".mcp.json").write_text(json.dumps(old))
    code, out, err = setup_in(project, monkeypatch, capsys, "--hooks")
    assert code == 0, err
    assert entry_of(project)["env"]["HYBRID_RAG_SPACE"] == "proj"
    marked = marked_space(project.resolve())
    assert f"memory-pipeline spaces --merge proj {marked} --apply" in out
    assert f"setup claude-code --space {marked}" in out
    code, out, err = setup_in(project, monkeypatch, capsys, "--space", marked)
    assert code == 0, err
    assert entry_of(project)["env"]["HYBRID_RAG_SPACE"] == marked
    assert "--merge" not in out

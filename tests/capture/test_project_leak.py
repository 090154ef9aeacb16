"""Two projects named ``api``, one memory: nothing of one reaches the other.

Each is a real git repository set up with ``setup claude-code --hooks``; its sessions are
captured by the hook commands ``setup`` wrote, run as Claude Code runs them (a shell, the
payload on stdin, from a subfolder); its notes go in and its searches come out through the
MCP server its ``.mcp.json`` starts, over stdio with the MCP SDK's client; the session
start's recall is the hook ``setup`` wrote. The two share the user's one memory (no
storage is named) and see only their own.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from mcp import Client

from memory_pipeline.locations import capture_dir
from serving.harness import structured
from tests.capture.helpers import wait_idle, write_transcript
from tests.capture.test_project_spaces import repository
from tests.cli.test_setup import (
    as_a_client_starts_it,
    client_env,
    entry_of,
    hooks_of,
    remember,
    setup_in,
)


def run_hook(project: Path, event: str, cwd: Path, env: dict[str, str], data: dict) -> str:
    """The command ``setup`` wrote for ``event``, as Claude Code runs it: its output."""
    [group] = hooks_of(project)[event]
    command = group["hooks"][0]["command"]
    body = {"hook_event_name": event, "cwd": str(cwd), "session_id": cwd.name, **data}
    done = subprocess.run(
        ["sh", "-c", command],
        input=json.dumps(body),
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return done.stdout


async def search(project: Path, env: dict[str, str], query: str) -> str:
    async with Client(as_a_client_starts_it(project, env)) as client:
        out = structured(await client.call_tool("hybrid_search", {"query": query, "top_k": 20}))
        return "\n".join(chunk["content"] for chunk in out["chunks"])


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_two_projects_named_alike_never_see_each_others_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    one = repository(tmp_path / "clients" / "one" / "api")
    two = repository(tmp_path / "clients" / "two" / "api")
    for project in (one, two):
        assert setup_in(project, monkeypatch, capsys, "--hooks")[0] == 0
    spaces = {entry_of(p)["env"]["HYBRID_RAG_SPACE"] for p in (one, two)}
    assert len(spaces) == 2 and all(s.startswith("api-") for s in spaces)
    home = tmp_path / "home"
    env = client_env(home)
    secret_of = {one: "kestrel", two: "ptarmigan"}
    for project, word in secret_of.items():
        # A session worked in a subfolder, captured as it ends ...
        said = f"Our client's design decision for the api: the {word} retry schedule."
        log = tmp_path / "claude" / f"{word}.jsonl"
        write_transcript(log, word, 2, str(project / "src"))
        text = log.read_text().replace(f"In session {word} turn 1", said)
        log.write_text(text)
        run_hook(project, "SessionEnd", project / "src", env, {"transcript_path": str(log)})
        # ... and a note given to the project's own server.
        await remember(project, env, f"Note: the {word} queue holds invoices.", f"{word} note")
    wait_idle(capture_dir(home / "data" / "memory-pipeline" / "memory.db"))
    for project, word in secret_of.items():
        (other,) = set(secret_of.values()) - {word}
        found = await search(project, env, "design decision retry schedule queue invoices")
        assert word in found and other not in found
        recalled = run_hook(project, "SessionStart", project / "src", env, {"source": "startup"})
        assert word in recalled and other not in recalled

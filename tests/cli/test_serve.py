"""``memory-pipeline serve``: the MCP server behind the command line, with ``python -m serving``'s
arguments (one definition in ``serving.__main__``), driven by a real MCP client over stdio."""

from __future__ import annotations

import argparse
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from memory_pipeline.cli.main import build_parser
from serving.__main__ import add_arguments
from serving.harness import StoreLayout, structured
from tests.cli.test_commands import commands
from tests.conftest import CONSOLE_SCRIPT


def _described(parser: argparse.ArgumentParser) -> list[tuple[object, ...]]:
    return [
        (tuple(a.option_strings), a.dest, a.default, a.choices, a.help, type(a).__name__)
        for a in parser._actions
    ]


def test_serve_takes_exactly_the_servers_arguments() -> None:
    server = argparse.ArgumentParser()
    add_arguments(server)
    serve = commands(build_parser())["serve"]
    assert _described(serve) == _described(server)
    assert serve.prog == "memory-pipeline serve"
    assert "--model-load {lazy,eager,background}" in serve.format_help()


def test_serve_is_handed_over_before_the_other_commands_load() -> None:
    """``memory-pipeline serve`` goes straight to the server's parser (what an agent waits
    for imports no other command's modules), and shows the same help as in the whole
    parser."""
    code = (
        "import sys\nfrom memory_pipeline.cli.main import main\n"
        "try:\n    main(['serve', '--port', 'x'])\nexcept SystemExit as exit:\n"
        "    print(exit.code, 'memory_pipeline.cli.commands' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout == "2 False\n", done.stderr
    assert "usage: memory-pipeline serve" in done.stderr
    shown = subprocess.run(
        [sys.executable, "-c", CONSOLE_SCRIPT, "serve", "--help"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    whole = commands(build_parser())["serve"].format_help()
    assert shown.returncode == 0 and shown.stdout.split() == whole.split()


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["--port", "x"], {}, "argument --port: invalid int value: 'x'"),
        (["--log-level", "LOUD"], {}, "argument --log-level: invalid choice: 'LOUD'"),
        ([], {"HYBRID_RAG_MODEL_LOAD": "soon"}, "HYBRID_RAG_MODEL_LOAD='soon'; use lazy"),
        (["--http", "--host", "0.0.0.0"], {}, "refusing to serve HTTP on 0.0.0.0 without a token"),
    ],
)
def test_serve_refuses_bad_arguments_before_serving(
    tmp_path: Path, args: list[str], env: dict[str, str], message: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", CONSOLE_SCRIPT, "serve", *args],
        env=StoreLayout(tmp_path).env(**env),
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert message in done.stderr
    assert not (tmp_path / "memory.db").exists()


def test_building_the_parser_does_not_load_the_mcp_sdk() -> None:
    """Every command builds the whole parser, serve's arguments included: that stays cheap."""
    code = (
        "import sys; from memory_pipeline.cli.main import build_parser; build_parser(); "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'mcp', 'uvicorn', 'torch'}))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout) == (0, "[]\n"), done.stderr


@pytest.mark.anyio
async def test_serve_answers_an_mcp_client_over_stdio(tmp_path: Path) -> None:
    layout = StoreLayout(tmp_path)
    params = StdioServerParameters(
        command=sys.executable,
        args=["-c", CONSOLE_SCRIPT, "serve", "--space", "notes"],
        env=layout.env(),
        cwd=layout.docs,
    )
    note = {"text": "Violas sit between violins and cellos.", "title": "strings"}
    async with Client(params) as client:
        stored = structured(await client.call_tool("ingest_text", note))["results"][0]
        found = structured(await client.call_tool("hybrid_search", {"query": "violas"}))
    assert found["chunks"][0]["doc_id"] == stored["doc_id"]
    with sqlite3.connect(f"file:{layout.db}?mode=ro", uri=True) as db:  # --space reached it
        assert db.execute("SELECT space FROM documents").fetchall() == [("notes",)]

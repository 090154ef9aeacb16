"""Which memory a command uses inside a checkout where ``make run`` or ``make demo`` keeps
one, through the real commands (and the real ``make``) in a checkout with their layout.

HOME and XDG_DATA_HOME point into tmp_path: nothing here touches the real home.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from memory_pipeline.alerts import CHECK, FAILED, Alert, AlertLog
from tests.cli.test_memory_location import REPO, cli

NOTE = "# Fusion\n\nReciprocal rank fusion merges two ranked lists.\n"


def checkout(tmp_path: Path) -> Path:
    """A folder laid out as a checkout: the files that mark one, and ``make``'s own."""
    root = tmp_path / "checkout"
    root.mkdir()
    for name in ("Makefile", "workspace.yaml", "pyproject.toml"):
        shutil.copy2(REPO / name, root / name)  # copy2: make must see the stamp as newer
    (root / "memory_pipeline").mkdir()
    return root


def fill_make_run_memory(root: Path, home: Path) -> Path:
    """The memory ``make run`` keeps, with a note in it and one alert in its log."""
    (root / "note.md").write_text(NOTE)
    data = {"HYBRID_RAG_DB_PATH": "data/memory.db", "HYBRID_RAG_INDEX_PATH": "data/indices"}
    done = cli(root, home, "ingest", "note.md", **data)
    assert done.returncode == 0, done.stderr
    AlertLog(root / "data" / "alerts.jsonl").append(
        Alert(CHECK, "documents:sources_parse", FAILED, "WARN", "1 source file failed: a.md")
    )
    return root / "data"


def test_a_command_in_a_checkout_names_the_memory_it_uses_and_the_way_to_the_other(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    root = checkout(tmp_path)
    fill_make_run_memory(root, home)
    (root / "docs").mkdir()
    own = home / "data" / "memory-pipeline"
    for cwd in (root, root / "docs"):
        done = cli(cwd, home, "search", "reciprocal rank fusion")
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "no results"  # the user's own memory is empty
        first = done.stderr.splitlines()[0]
        assert str(own) in first and "make run" in first and "search Q=" in first, first
        assert ("make search" in first) == (cwd == root), first  # else make -C the root
        # the variables it names point the same command at the pipeline's memory
        named = dict(re.findall(r"(HYBRID_RAG_\w+_PATH)=(\S+?)\)?(?:\s|$)", first))
        assert set(named) == {"HYBRID_RAG_DB_PATH", "HYBRID_RAG_INDEX_PATH"}, first
        pointed = cli(cwd, home, "search", "reciprocal rank fusion", **named)
        assert pointed.returncode == 0, pointed.stderr
        assert "Reciprocal rank fusion" in pointed.stdout
        assert "checkout" not in pointed.stderr  # a setting chose: nothing to say

    alerts = cli(root, home, "alerts")
    assert alerts.returncode == 0 and "no alerts yet" in alerts.stdout
    first = alerts.stderr.splitlines()[0]
    assert "`make alerts`" in first and "--log data/alerts.jsonl" in first, first
    logged = cli(root, home, "alerts", "--log", "data/alerts.jsonl")
    assert "1 source file failed: a.md" in logged.stdout and not logged.stderr


def test_outside_a_checkout_nothing_is_said(tmp_path: Path) -> None:
    home, elsewhere = tmp_path / "home", tmp_path / "elsewhere"
    home.mkdir()
    root = checkout(tmp_path)
    fill_make_run_memory(root, home)
    elsewhere.mkdir()
    for command in (("search", "fusion"), ("alerts",)):
        done = cli(elsewhere, home, *command)
        assert done.returncode == 0 and not done.stderr, done.stderr


@pytest.mark.slow
def test_make_demo_ends_with_a_command_that_works_as_printed(tmp_path: Path) -> None:
    """The real ``make demo`` and ``make search`` in a checkout whose ``.venv`` is this one."""
    venv = Path(sys.prefix)
    if not (venv / ".installed").is_file() or shutil.which("make") is None:
        pytest.skip("needs make and the virtual environment `make install` made")
    home = tmp_path / "home"
    home.mkdir()
    root = checkout(tmp_path)
    (root / ".venv").symlink_to(venv)
    # Nor the make that may run these tests (make test): its MAKEFLAGS and MAKELEVEL would
    # make the inner make print "Entering directory" lines and pass on its variables.
    inherited = ("HYBRID_RAG_", "XDG_DATA", "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")
    env = {k: v for k, v in os.environ.items() if not k.startswith(inherited)}
    env.update(HOME=str(home), XDG_DATA_HOME=str(home / "data"), PYTHONPATH=str(REPO))
    env["HYBRID_RAG_EMBEDDING_MODEL"] = "hashing"

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            argv, cwd=root, env=env, capture_output=True, text=True, timeout=600, check=False
        )

    demo = run("make", "demo")
    assert demo.returncode == 0, demo.stderr
    [last] = [line for line in demo.stdout.splitlines() if "; try: " in line]
    hint = last.split("; try: ", 1)[1]
    assert hint.startswith(".venv/bin/memory-pipeline search --db data/demo/memory.db"), hint
    tried = run(*shlex.split(hint))
    assert tried.returncode == 0, tried.stderr
    assert "Reciprocal Rank Fusion" in tried.stdout and not tried.stderr
    # the make target the notice names for the demo's memory
    found = run("make", "search", "DATA=data/demo", "Q=how are two ranked lists fused?")
    assert found.returncode == 0, found.stderr
    assert "Reciprocal Rank Fusion" in found.stdout
    assert run("make", "search").returncode == 2  # no Q: a usage line, not a search of ""

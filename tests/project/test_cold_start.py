"""Import only what a command needs: what a fresh process has loaded after each first step.

A command line that only parses its flags, and the MCP server before it builds the
memory, load none of the heavy libraries (the database toolkit, the migration tool,
the vector and BM25 indices, the array library, the neural runtimes); opening a store
whose schema is current does not load the migration tool, and ``recall``, which a
session waits on, loads only the store. Each case runs in a new
interpreter, so what it finds in ``sys.modules`` is what that step imported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("sqlalchemy", "alembic", "faiss", "tantivy", "numpy", "torch", "onnxruntime")

CASES = {
    "the CLI's parser": (
        "from memory_pipeline.cli.main import build_parser; build_parser()",
        HEAVY,
    ),
    "the console script's entry and the capture hook": (
        "import memory_pipeline.cli.capture; from memory_pipeline.cli import main",
        (*HEAVY, "pydantic", "yaml"),
    ),
    "the server's entry point and its settings": (
        "import serving.__main__ as m; from memory_pipeline.config import Settings; "
        "m.parse_args([]); Settings.from_env({})",
        HEAVY,
    ),
    "recall (a SessionStart hook) on a current store": (
        "from memory_pipeline.cli.main import main; main(['recall', '--db', URL[10:]])",
        ("alembic", "faiss", "tantivy", "torch", "onnxruntime"),
    ),
    "opening a store whose schema is current": (
        "from memory_pipeline.store import Store; Store(URL).engine.dispose()",
        ("alembic",),
    ),
}


def _loaded(code: str, url: str) -> set[str]:
    script = (
        f"import json, sys; URL = {url!r}; {code}; "
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, cwd=ROOT, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    return set(json.loads(out.stdout.splitlines()[-1]))


@pytest.mark.parametrize(("code", "absent"), CASES.values(), ids=list(CASES))
def test_a_step_imports_nothing_it_does_not_use(
    code: str, absent: tuple[str, ...], tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'memory.db'}"
    _loaded("from memory_pipeline.store import Store; Store(URL).engine.dispose()", url)
    assert sorted(set(absent) & _loaded(code, url)) == []


def test_the_schema_head_known_without_the_migration_tool_is_alembics() -> None:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    from memory_pipeline.store import engine

    cfg = Config()
    cfg.set_main_option("script_location", str(engine.MIGRATIONS))
    assert ScriptDirectory.from_config(cfg).get_current_head() == engine.HEAD_REVISION

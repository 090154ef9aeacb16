"""A command that needs an extra this install leaves out says which, in one line.

The installs without torch or Dagster are stood in for by a process in which those
modules cannot be imported (``sys.modules[name] = None``, what Python does for a module
that is not there); ``test_installed_wheel`` runs the real install without them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CONSOLE_SCRIPT

TORCH_LINE = "pip install 'memory-pipeline[torch]'"
MINILM = "sentence-transformers/all-MiniLM-L6-v2"


def without(*modules: str) -> str:
    """``python -c`` code that runs the console script with ``modules`` unimportable."""
    blocked = "".join(f"sys.modules[{m!r}] = None; " for m in modules)
    return f"import sys; {blocked}{CONSOLE_SCRIPT.removeprefix('import sys; ')}"


def run(code: str, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=300
    )


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("HYBRID_RAG_")}
    note = tmp_path / "note.md"
    note.write_text("The cache layer keeps entries for five minutes.\n", encoding="utf-8")
    return {
        **base,
        "HYBRID_RAG_DB_PATH": str(tmp_path / "memory.db"),
        "HYBRID_RAG_INDEX_PATH": str(tmp_path / "indices"),
        "HYBRID_RAG_ARCHIVE_PATH": str(tmp_path / "archive"),
        "HYBRID_RAG_MODEL_CACHE": str(tmp_path / "cache"),
        "HF_HUB_OFFLINE": "1",
    }


def one_line_naming(done: subprocess.CompletedProcess[str], line: str) -> None:
    """Exit 2 and one error line (the model's unpacking bar may come before it)."""
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    [message] = [text for text in done.stderr.splitlines() if text.startswith("error:")]
    assert line in message, message


def test_a_model_on_sentence_transformers_without_torch_names_the_extra(
    env: dict[str, str], tmp_path: Path
) -> None:
    done = run(
        without("sentence_transformers", "torch"),
        "ingest",
        str(tmp_path / "note.md"),
        env={**env, "HYBRID_RAG_EMBEDDING_MODEL": MINILM},
    )
    one_line_naming(done, TORCH_LINE)
    assert MINILM in done.stderr and "docs/install.md" in done.stderr


def test_the_default_model_on_the_torch_runtime_without_torch_names_the_extra(
    env: dict[str, str], tmp_path: Path
) -> None:
    torch_runtime = {**env, "HYBRID_RAG_EMBEDDING_RUNTIME": "torch"}
    note = str(tmp_path / "note.md")
    done = run(without("sentence_transformers", "torch"), "ingest", note, env=torch_runtime)
    one_line_naming(done, TORCH_LINE)
    assert "multilingual-e5-small" in done.stderr


def test_the_same_command_runs_where_the_extra_is_installed(
    env: dict[str, str], tmp_path: Path
) -> None:
    done = run(
        CONSOLE_SCRIPT,
        "ingest",
        str(tmp_path / "note.md"),
        env={**env, "HYBRID_RAG_EMBEDDING_MODEL": MINILM},
    )
    assert done.returncode == 0, done.stderr


def test_a_cross_encoder_without_torch_is_skipped_and_stats_names_the_extra(
    env: dict[str, str],
) -> None:
    """A cross-encoder that cannot load never fails a search (``load_reranker``): the
    status that ``stats`` prints says why, and which extra to install."""
    reranked = {
        **env,
        "HYBRID_RAG_EMBEDDING_MODEL": "hashing",
        "HYBRID_RAG_RERANKER_MODEL": "cross-encoder/ms-marco-MiniLM-L-6-v2",
    }
    done = run(without("sentence_transformers", "torch"), "stats", env=reranked)
    assert done.returncode == 0, done.stderr
    [line] = [text for text in done.stdout.splitlines() if text.startswith("reranker:")]
    assert line.startswith("reranker: none (cross-encoder unavailable:") and TORCH_LINE in line


def test_the_pipeline_without_dagster_names_the_extra(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['dagster'] = None; "
        "from memory_pipeline.pipeline.devserver import main; sys.exit(main())"
    )
    done = run(code, "check", "--home", str(tmp_path / "home"), "--port", "1", env=dict(os.environ))
    assert done.returncode != 0
    [message] = done.stderr.strip().splitlines()
    assert "pip install 'memory-pipeline[pipeline]'" in message, message

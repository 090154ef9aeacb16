"""Every `memory-pipeline` command once through `main()`, on a real memory in tmp_path.

One row per command (``CASES``): what a good run exits with and prints (the top-level
keys of ``--json`` where the command has it), and one bad argument with the message it
must put on stderr. A command the parser knows without a row fails
``test_every_command_has_a_row``. ``serve`` runs until its MCP client leaves: it has no
row here, tests/cli/test_serve.py drives it through a client.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
import yaml

from memory_pipeline import spool
from memory_pipeline.cli import main
from memory_pipeline.cli.main import READER_GONE, build_parser
from memory_pipeline.evaluation.results import EvalRun
from memory_pipeline.locations import capture_dir
from memory_pipeline.system import doc_id_for
from tests.conftest import CONSOLE_SCRIPT, SHARED

DOCS = {
    "fusion.md": "---\nknowledge_type: principle\nimportance: 0.9\n---\n\n# Fusion\n\n"
    "Reciprocal rank fusion adds one over k plus rank across the dense and sparse lists.",
    "bm25.md": "---\nknowledge_type: paper\nimportance: 0.8\n---\n\n# BM25\n\n"
    "Okapi BM25 ranks documents by term frequency and inverse document frequency.",
    "launch.md": "---\nknowledge_type: news\nimportance: 0.2\n---\n\n# Launch\n\n"
    "The search platform launched internally last week with a new dashboard.",
}
SOURCES_YAML = "state: state/sources-state.json\nroots:\n  - name: notes\n    path: roots/notes\n"

SEARCH_KEYS = {"query", "hits", "stats"}
HIT_KEYS = {
    "chunk_id", "doc_id", "chunk_index", "content", "knowledge_type", "importance", "tags",
    "access_count", "created_at", "source_date", "score", "stage_scores", "title", "source", "turns",
}  # fmt: skip
HEALTH_KEYS = {"findings", "healthy", "checked_at", "index_version", "timings", "backend"}
STATS_KEYS = {
    "documents", "chunks", "by_knowledge_type", "importance_set", "tagged_chunks",
    "distinct_tags", "top_tags", "access_buckets", "total_accesses", "unindexed_chunks",
    "vectors_by_model", "index", "embedder", "reranker", "reranker_status", "spaces", "generated_at",
    "importance_share", "tag_coverage", "redactions", "unclosed_tags", "captures",
}  # fmt: skip
DUPLICATES_KEYS = {
    "document_groups", "chunk_pairs", "threshold", "method", "model_id", "vectors_searched",
    "skipped_vectors", "truncated", "generated_at",
}  # fmt: skip
HISTORY_KEYS = {
    "at",
    "space",
    "actor",
    "doc_id",
    "chunk_index",
    "field",
    "before",
    "after",
    "review",
}
SCRUB_KEYS = {"spaces", "applied", "found", "by_kind", "changes", "places", "purged"}
FORGET_KEYS = {
    "run_id", "dry_run", "params", "live_chunks", "candidates", "archived", "limit", "refused",
    "by_type", "examples", "archive_path", "index_version", "index_error", "timings_s",
}  # fmt: skip
RESTORE_KEYS = {
    "selector", "selected", "restored", "reused_vectors", "reembedded", "documents_recreated",
    "new_ids", "skipped", "not_archived", "index_version", "index_error", "seconds",
}  # fmt: skip
CAPTURE_STATUS_KEYS = {
    "folder", "counts", "waiting", "set_aside", "ledgers_set_aside", "worker_failure", "notice",
}  # fmt: skip
STATUS_ROW_KEYS = {"path", "root", "kind", "state", "reason", "documents"}


@dataclass
class Ctx:
    """The memory every row runs against, and the values its arguments refer to."""

    dir: Path
    values: dict[str, str] = field(default_factory=dict)

    def common(self) -> list[str]:
        return ["--db", str(self.dir / "memory.db"), "--index", str(self.dir / "indices")]

    def fill(self, args: tuple[str, ...]) -> list[str]:
        return [a.format(**self.values) for a in args]


@dataclass(frozen=True)
class Case:
    args: tuple[str, ...]  # after the command words and the storage flags
    stdout: str  # a fragment a good run prints
    bad_args: tuple[str, ...]
    bad_message: str  # a fragment of what a bad run prints on stderr
    code: int = 0
    json_keys: set[str] | None = None  # top-level keys (each row's keys for a JSON list)
    before: Callable[[Ctx], None] | None = None
    check: Callable[[Ctx, Any], None] | None = None  # on the parsed JSON, or the stdout text


def argv_for(ctx: Ctx, command: str, *args: str) -> list[str]:
    """The command words, this memory's storage flags, the hashing embedder, then ``args``."""
    return [*command.split(), *ctx.common(), "--model", "hashing", *args]


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """``main(argv)``'s exit code (argparse's own exit included), stdout and stderr."""
    try:
        code = main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def _sql(ctx: Ctx, statement: str) -> Any:
    engine = sa.create_engine(f"sqlite:///{ctx.dir / 'memory.db'}")
    try:
        with engine.begin() as conn:
            result = conn.execute(sa.text(statement))
            return result.scalar() if result.returns_rows else None
    finally:
        engine.dispose()


def _forget_news(ctx: Ctx) -> None:
    """Archive the news note (importance 0.2), so there is a run to restore."""
    args = ("--apply", "--importance-threshold", "0.5", "--max-fraction", "0.5")
    assert main(argv_for(ctx, "forget", *args)) == 0
    ctx.values["run_id"] = _sql(ctx, "SELECT run_id FROM forgetting_runs")


def _ingest_unindexed(ctx: Ctx) -> None:
    assert main(argv_for(ctx, "ingest", "--no-index", str(ctx.dir / "new.md"))) == 0


def _a_token() -> str:
    """A GitHub token's shape, made here (the repository holds none)."""
    import random
    import string

    return "ghp_" + "".join(random.Random(7).choices(string.ascii_letters + string.digits, k=36))


def _plant_secret(ctx: Ctx) -> None:
    """A token in a stored chunk, as a memory filled before redaction holds one."""
    _sql(ctx, f"UPDATE chunks SET content = content || ' push with {_a_token()}'")


def _check_scrub(ctx: Ctx, out: dict[str, Any]) -> None:
    assert out["by_kind"] == {"github-token": out["found"]} and out["found"] >= 3
    assert out["changes"]["chunks"] == out["found"] and not out["applied"]
    assert _a_token()[4:16] not in json.dumps(out)  # the kind and the place, never the value


def _set_fusion_importance(ctx: Ctx, importance: float, actor: str) -> None:
    """The fusion note's importance set through the Python API, recorded as ``actor``'s."""
    from memory_pipeline.config import Settings
    from memory_pipeline.embedding.base import HashingEmbedder
    from memory_pipeline.system import MemorySystem

    settings = Settings(
        db_path=ctx.dir / "memory.db", index_path=ctx.dir / "indices", model="hashing"
    )
    system = MemorySystem(settings, embedder=HashingEmbedder())
    try:
        system.set_chunk_tags(ctx.values["fusion_id"], 0, importance=importance, actor=actor)
    finally:
        system.close()


def _retag_fusion(ctx: Ctx) -> None:
    """A person raised the fusion note's importance (recorded as cli's)."""
    _set_fusion_importance(ctx, 1.0, "cli")


def _agent_retags_fusion(ctx: Ctx) -> None:
    """The agent set the fusion note's importance over MCP (as its tool records it)."""
    _set_fusion_importance(ctx, 0.1, "mcp")


def _check_review(ctx: Ctx, out: list[dict[str, Any]]) -> None:
    [change] = out
    assert (change["doc_id"], change["actor"], change["field"]) == (
        ctx.values["fusion_id"], "mcp", "importance",
    )  # fmt: skip
    assert (change["before"], change["after"], change["review"]) == (0.9, 0.1, None)


def _check_history(ctx: Ctx, out: list[dict[str, Any]]) -> None:
    [change] = out
    assert (change["doc_id"], change["chunk_index"], change["actor"]) == (
        ctx.values["fusion_id"], 0, "cli",
    )  # fmt: skip
    assert (change["field"], change["before"], change["after"]) == ("importance", 0.9, 1.0)


def _forget_dates(ctx: Ctx) -> None:
    _sql(ctx, "UPDATE documents SET source_date = NULL, source_date_rule = NULL")


def _check_ingest(ctx: Ctx, out: str) -> None:
    assert out.split()[:2] == ["ingested", doc_id_for((ctx.dir / "new.md").read_bytes())]


def _check_search(ctx: Ctx, data: dict[str, Any]) -> None:
    assert data["query"] == "reciprocal rank fusion"
    assert data["hits"][0]["doc_id"] == ctx.values["fusion_id"]
    assert all(set(h) == HIT_KEYS for h in data["hits"])
    assert data["stats"]["unindexed_searched"] == 0


def _check_health(ctx: Ctx, data: dict[str, Any]) -> None:
    assert data["healthy"] is True and data["index_version"] == 1


def _check_stats(ctx: Ctx, data: dict[str, Any]) -> None:
    assert (data["documents"], data["chunks"], data["embedder"]) == (3, 3, "hashing-bow-384")


def _check_spaces(ctx: Ctx, data: dict[str, Any]) -> None:
    [space] = data["spaces"]
    assert (space["space"], space["documents"], space["chunks"], space["roots"]) == (
        "default",
        3,
        3,
        [],
    )
    assert data["this_project"]["root"] == str(ctx.dir.resolve())


def _check_duplicates(ctx: Ctx, data: dict[str, Any]) -> None:
    assert (data["vectors_searched"], data["chunk_pairs"], data["threshold"]) == (3, [], 0.9)


def _check_forget(ctx: Ctx, data: dict[str, Any]) -> None:
    assert data["dry_run"] is True and data["archived"] == 0
    assert (data["live_chunks"], data["candidates"]) == (3, 1)
    assert data["examples"][0]["doc_id"] == ctx.values["launch_id"]


def _check_restore(ctx: Ctx, data: dict[str, Any]) -> None:
    assert (data["selected"], data["restored"], data["reused_vectors"]) == (1, 1, 1)


def _check_status(ctx: Ctx, data: list[dict[str, Any]]) -> None:
    assert [(Path(r["path"]).name, r["root"], r["state"]) for r in data] == [
        ("note.md", "notes", "new")
    ]


def _check_eval(ctx: Ctx, out: str) -> None:
    [report] = (ctx.dir / "reports").glob("*.json")
    evaluated = EvalRun.load(report)
    assert [v.name for v in evaluated.variants] == ["bm25", "hybrid"]
    assert evaluated.n_queries == 2
    assert evaluated.variant("bm25").summary["hit_rate@3"] == 1.0


def _check_index_line(change: str, held: int) -> Callable[[Ctx, str], None]:
    """The whole line update-index or rebuild-index prints; only the seconds vary."""
    line = re.compile(
        rf"index version 2 {re.escape(change)} {held} vectors, {held} BM25 docs, "
        r"\d+\.\d\ds \(local\)\n"
    )

    def check(ctx: Ctx, out: str) -> None:
        assert line.fullmatch(out), out

    return check


def _check_alerts(ctx: Ctx, data: dict[str, Any]) -> None:
    assert data["log"] == str(ctx.dir / "alerts.jsonl")  # beside the index folder
    assert data["unreadable_lines"] == 0


def _claude_code_session(ctx: Ctx) -> Path:
    """A Claude Code session log (the sample's format) in ``sessions/``."""
    [sample] = (SHARED / "samples" / "claude-code-projects").glob("*/*.jsonl")
    copy = ctx.dir / "sessions" / sample.name
    copy.parent.mkdir(exist_ok=True)
    copy.write_bytes(sample.read_bytes())
    return copy


def _claude_code_sessions(ctx: Ctx) -> None:
    _claude_code_session(ctx)


def _pending_capture(ctx: Ctx) -> None:
    """A session a hook recorded as pending in this memory's spool."""
    session = _claude_code_session(ctx)
    capture = spool.Capture(session.stem, str(session), "proj", str(ctx.dir), "SessionEnd")
    spool.write_pending(capture_dir(ctx.dir / "memory.db"), capture)


def _check_capture_status(ctx: Ctx, out: dict[str, Any]) -> None:
    """The pending capture is listed, in the spool beside the database given by --db."""
    assert out["folder"] == str(capture_dir(ctx.dir / "memory.db"))
    [waiting] = out["waiting"]
    assert (waiting["state"], waiting["space"]) == ("pending", "proj")
    assert out["counts"]["waiting"] == 1 and out["notice"] == ""


def _check_setup(ctx: Ctx, out: str) -> None:
    """The storage flags given are written as they were, absolute."""
    env = json.loads((ctx.dir / ".mcp.json").read_text())["mcpServers"]["hybrid-rag"]["env"]
    assert env["HYBRID_RAG_DB_PATH"] == str(ctx.dir / "memory.db")
    assert env["HYBRID_RAG_EMBEDDING_MODEL"] == "hashing"


CASES: dict[str, Case] = {
    "ingest": Case(
        args=("{dir}/new.md",),
        stdout="1 chunks",
        bad_args=("{dir}/missing.md",),
        bad_message="missing.md: no such file",
        check=_check_ingest,
    ),
    "search": Case(
        args=("reciprocal rank fusion", "--json", "--stats", "--no-access"),
        stdout='"hits"',
        json_keys=SEARCH_KEYS,
        bad_args=("fusion", "-k", "0"),
        bad_message="error: top_k must be between 1 and",
        check=_check_search,
    ),
    "backfill-source-date": Case(
        args=(),
        stdout="3 documents would update (dry run",
        before=_forget_dates,
        bad_args=("--db", "{dir}/no-such-folder/memory.db"),
        bad_message="error: database folder",
    ),
    "update-index": Case(
        args=(),
        stdout="index version 2 (update): +1 -0, 4 vectors, 4 BM25 docs",
        before=_ingest_unindexed,
        bad_args=("--db", "{dir}/no-such-folder/memory.db"),
        bad_message="error: database folder",
        check=_check_index_line("(update): +1 -0,", 4),
    ),
    "rebuild-index": Case(
        args=(),
        stdout="index version 2 (rebuild): 3 vectors, 3 BM25 docs",
        bad_args=("--model", "other-model"),
        bad_message="have no vector of model 'other-model'",
        check=_check_index_line("(rebuild):", 3),
    ),
    "health": Case(
        args=("--json",),
        stdout='"healthy"',
        json_keys=HEALTH_KEYS,
        bad_args=("--no-such-flag",),
        bad_message="unrecognized arguments: --no-such-flag",
        check=_check_health,
    ),
    "stats": Case(
        args=("--json",),
        stdout='"documents"',
        json_keys=STATS_KEYS,
        bad_args=("--json", "extra"),
        bad_message="unrecognized arguments: extra",
        check=_check_stats,
    ),
    "duplicates": Case(
        args=("--json", "--threshold", "0.9"),
        stdout='"chunk_pairs"',
        json_keys=DUPLICATES_KEYS,
        bad_args=("--threshold", "1.5"),
        bad_message="argument --threshold: expected a number in (0, 1], got 1.5",
        check=_check_duplicates,
    ),
    "forget": Case(
        args=("--json", "--importance-threshold", "0.5"),
        stdout='"dry_run": true',
        json_keys=FORGET_KEYS,
        bad_args=("--score-threshold", "2"),
        bad_message="error: score_threshold must be a number in [0, 1], got 2",
        check=_check_forget,
    ),
    "scrub": Case(
        args=("--json",),
        stdout='"found"',
        json_keys=SCRUB_KEYS,
        before=_plant_secret,
        bad_args=("--apply", "--dry-run"),
        bad_message="not allowed with argument",
        check=_check_scrub,
    ),
    "history": Case(
        args=("--json",),
        stdout='"actor"',
        json_keys=HISTORY_KEYS,
        before=_retag_fusion,
        bad_args=("--limit", "0"),
        bad_message="argument --limit: expected a positive integer, got 0",
        check=_check_history,
    ),
    "review": Case(
        args=("--json",),
        stdout='"actor": "mcp"',
        json_keys=HISTORY_KEYS | {"id"},
        before=_agent_retags_fusion,
        bad_args=("--accept", "0"),
        bad_message="argument --accept: expected a positive integer, got 0",
        check=_check_review,
    ),
    "restore": Case(
        args=("--run-id", "{run_id}", "--json"),
        stdout='"restored": 1',
        json_keys=RESTORE_KEYS,
        before=_forget_news,
        bad_args=("--json",),
        bad_message="one of the arguments --run-id --doc-id --chunk-id is required",
        check=_check_restore,
    ),
    "sources status": Case(
        args=("--sources", "{dir}/sources.yaml", "--json"),
        stdout='"state": "new"',
        json_keys=STATUS_ROW_KEYS,
        bad_args=(),
        bad_message="error: no sources file: pass --sources FILE or set MEMORY_PIPELINE_SOURCES",
        check=_check_status,
    ),
    "sources sync": Case(
        args=("--sources", "{dir}/sources.yaml"),
        stdout="1 files to ingest, 0 removed: +1 new",
        bad_args=("--sources", "{dir}/missing.yaml"),
        bad_message="missing.yaml does not exist",
    ),
    "eval": Case(
        args=(
            *("--golden", "{dir}/golden.yaml", "--config", "bm25,hybrid", "--k-values", "1,3"),
            *("--output-dir", "{dir}/reports", "--no-chart", "--no-progress"),
        ),
        stdout="| variant |",
        bad_args=("--golden", "{dir}/golden.yaml", "--max-drop", "0.1"),
        bad_message="error: --max-drop needs --compare",
        check=_check_eval,
    ),
    "alerts": Case(
        args=("--json",),
        stdout='"alerts": []',
        json_keys={"log", "alerts", "unreadable_lines"},
        bad_args=("--limit", "0"),
        bad_message="argument --limit: expected a positive integer, got 0",
        check=_check_alerts,
    ),
    "setup": Case(
        args=("claude-code",),
        stdout=".mcp.json: server 'hybrid-rag' set up (space 'test_command",
        bad_args=("claude-code", "--space", "Team A"),
        bad_message="error: --space: space name 'Team A' is not valid",
        check=_check_setup,
    ),
    "recall": Case(
        args=("--budget", "200"),
        stdout="- [principle, importance 0.9] # Fusion Reciprocal rank fusion adds one over k",
        bad_args=("--budget", "0"),
        bad_message="argument --budget: expected a positive integer, got 0",
    ),
    "spaces": Case(
        args=("--json",),
        stdout='"this_project"',
        json_keys={"spaces", "this_project"},
        bad_args=("--json", "extra"),
        bad_message="unrecognized arguments: extra",
        check=_check_spaces,
    ),
    "import": Case(
        args=("claude_code", "{dir}/sessions", "--no-progress"),
        stdout="1 of 1 files: 1 sessions stored (1 new, 0 grown), 4 turns",
        before=_claude_code_sessions,
        bad_args=("claude_code", "{dir}/nowhere"),
        bad_message="/nowhere: no such file or folder",
    ),
    "capture": Case(  # --drain and the hook: tests/capture
        args=("--status", "--json"),
        stdout='"waiting"',
        json_keys=CAPTURE_STATUS_KEYS,
        before=_pending_capture,
        bad_args=("--status", "--bogus"),
        bad_message="unrecognized arguments: --bogus",
        check=_check_capture_status,
    ),
    "demo": Case(
        args=("--query", "Why should old news fade?"),
        stdout="ingesting 4 sample documents with model hashing",
        bad_args=("--query",),
        bad_message="argument --query: expected one argument",
    ),
}


def commands(
    parser: argparse.ArgumentParser, prefix: str = ""
) -> dict[str, argparse.ArgumentParser]:
    """Every runnable command path of the parser (``search``, ``sources sync``) → its parser."""
    found: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                path = f"{prefix} {name}".strip()
                found |= commands(sub, path) or {path: sub}
    return found


def test_every_command_has_a_row() -> None:
    parsers = commands(build_parser())
    # serve and ui run until stopped: tests/cli/test_serve.py and tests/ui run them.
    assert set(parsers) == {*CASES, "serve", "ui"}
    with_json = {
        name for name, p in parsers.items() if any("--json" in a.option_strings for a in p._actions)
    }
    # Every command with --json has its output shape checked, with --json passed.
    assert with_json == {name for name, case in CASES.items() if case.json_keys is not None}
    assert all("--json" in CASES[name].args for name in with_json)


@pytest.fixture
def ctx(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Ctx:
    """Three ingested notes (through ``main``), a sources root with one new file, a golden set."""
    for key in list(os.environ):
        if key.startswith(("HYBRID_RAG_", "MEMORY_PIPELINE_")):
            monkeypatch.delenv(key)
    monkeypatch.setenv("HYBRID_RAG_ARCHIVE_PATH", str(tmp_path / "archive"))
    monkeypatch.setenv("HYBRID_RAG_EMBEDDING_MODEL", "hashing")
    monkeypatch.setenv("HYBRID_RAG_MODEL_CACHE", str(tmp_path / "models"))
    monkeypatch.chdir(tmp_path)
    context = Ctx(tmp_path, {"dir": str(tmp_path)})
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text, encoding="utf-8")
    ids = {name: doc_id_for((docs / name).read_bytes()) for name in DOCS}
    context.values.update(fusion_id=ids["fusion.md"], launch_id=ids["launch.md"])
    (tmp_path / "new.md").write_text("# New\n\nA note about violins and cellos.", encoding="utf-8")
    (tmp_path / "roots" / "notes").mkdir(parents=True)
    (tmp_path / "roots" / "notes" / "note.md").write_text("# Note\n\nZebras.", encoding="utf-8")
    (tmp_path / "sources.yaml").write_text(SOURCES_YAML, encoding="utf-8")
    golden = {
        "name": "cli",
        "queries": [
            {"id": "rrf", "query": "reciprocal rank fusion", "relevant": [ids["fusion.md"]]},
            {"id": "bm25", "query": "inverse document frequency", "relevant": [ids["bm25.md"]]},
        ],
    }
    (tmp_path / "golden.yaml").write_text(yaml.safe_dump(golden), encoding="utf-8")
    code, _, err = run(argv_for(context, "ingest", *map(str, sorted(docs.iterdir()))), capsys)
    assert code == 0, err
    return context


def test_ingest_warns_of_a_tag_a_file_never_closes(
    ctx: Ctx, capsys: pytest.CaptureFixture[str]
) -> None:
    path = ctx.dir / "tags.md"
    path.write_text("# Tags\n\nWrap a span in <private> to keep it out.\n\nViolas.\n")
    code, out, err = run(argv_for(ctx, "ingest", "--no-index", str(path)), capsys)
    assert code == 0 and "ingested" in out
    assert f"warning: {path.resolve()}:3: <private> is never closed" in err
    code, out, _ = run(argv_for(ctx, "stats"), capsys)
    assert "documents stored whole after a <private> never closed: 1" in out


@pytest.mark.parametrize("name", list(CASES))
def test_command_runs(name: str, ctx: Ctx, capsys: pytest.CaptureFixture[str]) -> None:
    case = CASES[name]
    if case.before:
        case.before(ctx)
        capsys.readouterr()
    code, out, err = run(argv_for(ctx, name, *ctx.fill(case.args)), capsys)
    assert code == case.code, err
    assert case.stdout in out
    result: Any = out
    if case.json_keys is not None:
        result = json.loads(out)
        rows = result if isinstance(result, list) else [result]
        assert rows and all(set(row) == case.json_keys for row in rows)
    if case.check:
        case.check(ctx, result)


@pytest.mark.parametrize("name", list(CASES))
def test_command_refuses_a_bad_argument(
    name: str, ctx: Ctx, capsys: pytest.CaptureFixture[str]
) -> None:
    case = CASES[name]
    code, out, err = run(argv_for(ctx, name, *ctx.fill(case.bad_args)), capsys)
    assert code == 2
    assert case.bad_message in err
    assert out == ""


def run_with_reader_gone(argv: list[str]) -> tuple[int, str]:
    """The command in its own process, its stdout a pipe whose reader left at once
    (``memory-pipeline stats | head -1`` with a quick ``head``); its exit code and stderr."""
    proc = subprocess.Popen(
        [sys.executable, "-c", CONSOLE_SCRIPT, *argv],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode(errors="replace")
    return proc.wait(timeout=300), err


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CASES))
def test_command_ends_quietly_when_its_reader_leaves(
    name: str, ctx: Ctx, capsys: pytest.CaptureFixture[str]
) -> None:
    case = CASES[name]
    if case.before:
        case.before(ctx)
        capsys.readouterr()
    code, err = run_with_reader_gone(argv_for(ctx, name, *ctx.fill(case.args)))
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert code == READER_GONE, err  # every row prints on stdout


def test_an_unusable_database_url_is_an_error_line(
    ctx: Ctx, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(["update-index", "--database-url", "nope://x", "--model", "hashing"], capsys)
    assert code == 2
    assert "error:" in err and "nope://x" in err


def test_search_fuses_each_rewrite(ctx: Ctx, capsys: pytest.CaptureFixture[str]) -> None:
    query = ("zebra", "-k", "1", "--json", "--stats", "--no-access")
    code, out, err = run(argv_for(ctx, "search", *query), capsys)
    assert code == 0, err
    assert [h["doc_id"] for h in json.loads(out)["hits"]] != [ctx.values["launch_id"]]
    rewrites = ("--rewrite", "dashboard launched internally", "--rewrite", "new dashboard")
    code, out, err = run(argv_for(ctx, "search", *query, *rewrites), capsys)
    assert code == 0, err
    found = json.loads(out)
    assert [h["doc_id"] for h in found["hits"]] == [ctx.values["launch_id"]]
    assert (found["query"], found["stats"]["phrasings"]) == ("zebra", 3)
    code, out, err = run(argv_for(ctx, "search", "zebra", "--rewrite", " "), capsys)
    assert (code, out) == (2, "")
    assert "error: rewrites[0] must be a non-empty string" in err
    assert "--rewrite TEXT" in commands(build_parser())["search"].format_help()


def test_search_reads_a_time_in_the_query_against_now(
    ctx: Ctx, capsys: pytest.CaptureFixture[str]
) -> None:
    query = ("launched yesterday", "--json", "--stats", "--no-access", "--now", "2023-05-10")
    code, out, err = run(argv_for(ctx, "search", *query), capsys)
    assert code == 0, err
    notes = json.loads(out)["stats"]["notes"]
    assert any("the query names 9 May 2023" in n for n in notes), notes
    code, out, err = run(argv_for(ctx, "search", "launched", "--now", "10/05/2023"), capsys)
    assert (code, out) == (2, "")
    assert "--now" in err and "YYYY-MM-DD" in err and "10/05/2023" in err

"""Recall: the session-start block, read from a real seeded memory (SQLite in tmp_path)."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from memory_pipeline.config import Settings
from memory_pipeline.embedding.base import HashingEmbedder
from memory_pipeline.memory.recall import Section, estimate_tokens, fit, recall_block
from memory_pipeline.memory.scoring import MemoryParams
from memory_pipeline.sources.conversations import Conversation, Message
from memory_pipeline.spaces import Spaces
from memory_pipeline.store import Store
from memory_pipeline.system import MemorySystem
from tests.conftest import CONSOLE_SCRIPT, make_settings

ROOT = Path(__file__).resolve().parents[2]
SPACE = "project-a"
NOW = dt.datetime(2026, 12, 2, 9, 0, tzinfo=dt.UTC)
NOTES = [  # text, title, knowledge_type, importance, source_date
    (
        "Never commit generated indices; rebuild them from the database.",
        "rules",
        "principle",
        None,
        "2026-01-05",
    ),
    (
        "Chunk sizes above 512 tokens hurt recall on the golden set.",
        "chunking",
        "experiment",
        0.9,
        "2026-11-20",
    ),
    ("Release 2.0 moved the archive to JSONL files.", "release", "news", 0.75, "2026-11-25"),
    ("The staging server is slow on Mondays.", "gossip", "news", 0.3, "2026-11-30"),
    ("A half-life of fourteen days suits news.", "decay", "experiment", 0.5, "2026-10-01"),
    ("会議メモ: 重要度の閾値は 0.7 にする。", "会議", "principle", 0.8, "2026-11-28"),
    ("Reviews: " + "every change needs a test that fails first. " * 8, "review", None, 0.7, None),
]
SESSIONS = [  # session id, title, last activity, first human turn
    (
        "s-old",
        "Set up the pgvector backend",
        "2026-10-01T10:00:00+00:00",
        "How do I point the memory at PostgreSQL?",
    ),
    (
        "s-mid",
        "Fix the flaky import test",
        "2026-11-29T16:30:00+00:00",
        "Why does test_cold_start fail on CI only?",
    ),
    (
        "s-new",
        "Plan the recall hook",
        "2026-12-01T08:15:00+00:00",
        "Print the project's principles when a session starts.",
    ),
]


def _conversation(session_id: str, title: str, last: str, ask: str) -> Conversation:
    at = dt.datetime.fromisoformat(last)
    return Conversation(
        origin="claude-code",
        session_id=session_id,
        title=title,
        started_at=at - dt.timedelta(hours=1),
        last_activity=at,
        messages=(
            Message("human", at - dt.timedelta(hours=1), ask),
            Message("assistant", at, f"Answer about {title.lower()}."),
        ),
    )


def seed(settings: Settings) -> None:
    """Two projects' notes and sessions, and a forgotten note that once was important."""
    memory = MemorySystem(settings, embedder=HashingEmbedder())
    try:
        # Archived by an importance cut before anything else is stored (it alone is a candidate).
        memory.ingest_text(
            "Forgotten rule: always deploy on Fridays.", "forgotten", {"importance": 0.72}
        )
        report = memory.run_forgetting_batch(
            memory=MemoryParams(importance_threshold=0.8), dry_run=False, max_fraction=1.0
        )
        assert report.archived == 1
        for text, title, kind, importance, day in NOTES:
            meta: dict[str, object] = {"knowledge_type": kind} if kind else {}
            if day is not None:
                meta["source_date"] = day
            if importance is not None:
                meta["importance"] = importance
            memory.ingest_text(text, title, meta)
        for session in SESSIONS:
            conv = _conversation(*session)
            memory.ingest_loaded([conv.to_loaded()], conv.metadata(), update_index=False)
        other = memory.bound(Spaces.bound("project-b"))
        other.ingest_text(
            "Project B principle: ship on Tuesdays.", "b-rules", {"knowledge_type": "principle"}
        )
        conv = _conversation("s-b", "Project B session", "2026-12-01T12:00:00+00:00", "B ask")
        other.ingest_loaded([conv.to_loaded()], conv.metadata(), update_index=False)
    finally:
        memory.close()


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    s = make_settings(tmp_path, space=SPACE)
    seed(s)
    return s


def _block(settings: Settings, budget: int = 1500, spaces: Spaces | None = None) -> str:
    store = Store(settings.url, spaces=spaces or settings.spaces(), read_only=True)
    try:
        return recall_block(store, budget=budget, now=NOW)
    finally:
        store.close()


def test_the_block_holds_the_spaces_principles_important_notes_and_latest_sessions(
    settings: Settings,
) -> None:
    block = _block(settings)
    notes, sessions = block.split("## Recent sessions")
    # Principles first (by importance, then newest), then notes of importance ≥ 0.7.
    order = ["会議メモ", "Never commit generated", "Chunk sizes above 512", "Release", "Reviews"]
    assert [notes.index(t) for t in order] == sorted(notes.index(t) for t in order)
    for absent in ("staging server", "half-life", "Forgotten rule", "Project B", "B ask"):
        assert absent not in block
    # The latest session first, each with its date and first human turn.
    assert sessions.index("Plan the recall hook") < sessions.index("Fix the flaky import test")
    assert "2026-12-01 (yesterday) Plan the recall hook — first ask: Print the project's" in block
    assert "2026-11-29 (3 days ago)" in block
    assert "— rules (" in block  # each note names its document
    assert "[note, importance 0.7] Reviews: every change needs a test that fails first." in block
    assert " … — review (" in block  # a long note is cut, and says so
    assert notes.count("— review (") == 1  # a note stored in several chunks: one line
    assert estimate_tokens(block) <= 1500


def test_a_read_space_brings_the_other_projects_notes(settings: Settings) -> None:
    block = _block(settings, spaces=Spaces.bound(SPACE, ["project-b"]))
    assert "Project B principle" in block and "Project B session" in block


@pytest.mark.parametrize("budget", [60, 150, 250, 300, 350, 1500])
def test_a_small_budget_keeps_whole_lines_and_says_what_it_left_out(
    settings: Settings, budget: int
) -> None:
    whole = _block(settings)
    full = whole.splitlines()
    block = _block(settings, budget)
    assert estimate_tokens(block) <= budget
    if budget >= estimate_tokens(whole):
        assert block == whole
    elif block:
        *shown, last = block.splitlines()
        assert last.startswith("(") and "more not shown within the recall budget" in last
        items = [line for line in shown if line.startswith("- ")]
        n_more = int(last[1:].split()[0])
        assert items == [line for line in full if line.startswith("- ")][: len(items)]
        assert len(items) + n_more == len([line for line in full if line.startswith("- ")])


def test_a_budget_too_small_for_one_item_prints_nothing(settings: Settings) -> None:
    assert _block(settings, 30) == ""


def test_an_empty_memory_or_space_recalls_nothing(tmp_path: Path, settings: Settings) -> None:
    assert _block(settings, spaces=Spaces.bound("nobody")) == ""
    empty = make_settings(tmp_path / "empty")
    (tmp_path / "empty").mkdir()
    Store(empty.url).close()
    assert _block(empty) == ""


@pytest.mark.parametrize(
    ("items", "budget", "expected"),
    [
        ((), 100, ""),
        (("- a",), 100, "# h\n\n## s\n- a\n"),
        (("- a", "- b" * 40), 20, ""),
        (
            ("- a", "- b" * 40),
            35,
            "# h\n\n## s\n- a\n\n(1 more not shown within the recall budget; search the memory for them)\n",
        ),
    ],
)
def test_fit(items: tuple[str, ...], budget: int, expected: str) -> None:
    assert fit(["# h"], [Section("## s", items)] if items else [], budget) == expected


@pytest.mark.parametrize(("text", "tokens"), [("", 0), ("abc", 1), ("abcd", 2), ("会議", 2)])
def test_estimate_tokens(text: str, tokens: int) -> None:
    assert estimate_tokens(text) == tokens


# ---------------------------------------------------------------- the command line


def _cli(
    settings: Settings, *args: str, stdin: str = "", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    import os

    base = {k: v for k, v in os.environ.items() if not k.startswith("HYBRID_RAG_")}
    flags = ["--db", str(settings.db_path), "--index", str(settings.index_path)]
    return subprocess.run(
        [sys.executable, "-c", CONSOLE_SCRIPT, "recall", *flags, *args],
        input=stdin,
        capture_output=True,
        text=True,
        env={**base, "PYTHONPATH": str(ROOT), **(env or {})},
        cwd=settings.db_path.parent,
        check=False,
    )


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "Project-A"
    set_up(folder, SPACE)
    yield folder


def set_up(folder: Path, space: str) -> None:
    """A project whose .mcp.json names ``space`` for the memory's server, as setup writes it."""
    (folder / "src").mkdir(parents=True)
    entry = {"mcpServers": {"hybrid-rag": {"env": {"HYBRID_RAG_SPACE": space}}}}
    (folder / ".mcp.json").write_text(json.dumps(entry))


def _payload(cwd: Path) -> str:
    return json.dumps(
        {"cwd": str(cwd), "session_id": "x", "hook_event_name": "SessionStart", "source": "startup"}
    )


def test_the_hook_takes_the_space_from_the_payloads_cwd(settings: Settings, project: Path) -> None:
    out = _cli(settings, "--hook", stdin=_payload(project))
    assert out.returncode == 0, out.stderr
    hook = json.loads(out.stdout)["hookSpecificOutput"]
    assert hook["hookEventName"] == "SessionStart"
    assert "Never commit generated indices" in hook["additionalContext"]
    assert "Project B" not in hook["additionalContext"]
    # From a subfolder, the same project.
    inner = _cli(settings, "--hook", stdin=_payload(project / "src"))
    assert json.loads(inner.stdout) == json.loads(out.stdout)
    # Another folder is another project: its space holds nothing of project-a's.
    set_up(project.parent / "project-b", "project-b")
    other = _cli(settings, "--hook", stdin=_payload(project.parent / "project-b" / "src"))
    context = json.loads(other.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "Project B principle" in context and "Never commit" not in context
    # --space wins over the payload's folder.
    chosen = _cli(settings, "--hook", "--space", "project-b", stdin=_payload(project))
    assert json.loads(chosen.stdout) == json.loads(other.stdout)


def test_the_block_is_the_same_across_processes(settings: Settings, project: Path) -> None:
    first = _cli(settings, "--space", SPACE, "--budget", "250")
    second = _cli(settings, "--space", SPACE, "--budget", "250")
    assert first.returncode == 0, first.stderr
    assert first.stdout == second.stdout
    assert first.stdout.startswith("# Project memory (space 'project-a')")
    assert estimate_tokens(first.stdout) <= 250 and "more not shown" in first.stdout


@pytest.mark.parametrize(
    "stdin",
    ["", "not json", "[1, 2]", '{"session_id": "x"}', '{"cwd": 3}', '{"cwd": "relative/folder"}'],
)
def test_a_bad_payload_never_breaks_the_session(settings: Settings, stdin: str) -> None:
    out = _cli(settings, "--hook", stdin=stdin)
    assert (out.returncode, out.stdout) == (0, "")
    assert "memory-pipeline recall: nothing recalled" in out.stderr


def test_an_unreadable_memory_never_breaks_the_session(settings: Settings, project: Path) -> None:
    settings.db_path.write_bytes(b"this is not a database" * 100)
    out = _cli(settings, "--hook", stdin=_payload(project))
    assert (out.returncode, out.stdout) == (0, "")
    assert "nothing recalled" in out.stderr


def test_no_memory_yet_prints_nothing_and_makes_none(tmp_path: Path, project: Path) -> None:
    settings = make_settings(tmp_path / "none")
    (tmp_path / "none").mkdir()
    out = _cli(settings, "--hook", stdin=_payload(project))
    assert (out.returncode, out.stdout, out.stderr) == (0, "", "")
    assert not settings.db_path.exists()


def test_the_hook_notes_the_block_it_handed_over(settings: Settings, project: Path) -> None:
    """For the memory's pages (``memory-pipeline ui``): the block, the session, the space."""
    out = _cli(settings, "--hook", stdin=_payload(project))
    handed = json.loads(out.stdout)["hookSpecificOutput"]["additionalContext"]
    store = Store(settings.url, spaces=Spaces.bound(SPACE))
    try:
        [record] = store.handed(10)
        assert (record.kind, record.session, record.space) == ("recall", "x", SPACE)
        assert record.block and record.block in handed
        assert store.bound(Spaces.bound("project-b")).handed(10) == []
    finally:
        store.close()

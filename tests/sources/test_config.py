"""The sources file: parsing, defaults per kind, glob matching, scanning."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_pipeline.errors import InvalidInputError
from memory_pipeline.metadata import KnowledgeType
from memory_pipeline.sources.sources_file import SourceKind, glob_regex, load_sources
from memory_pipeline.sources.status import scan
from tests.test_pipeline_support import make_corpus


@pytest.mark.parametrize(
    ("pattern", "path", "hit"),
    [
        ("**/*.md", "a.md", True),
        ("**/*.md", "x/y/a.md", True),
        ("*.md", "x/a.md", False),
        ("**/agent-*.jsonl", "agent-1.jsonl", True),
        ("**/agent-*.jsonl", "proj/agent-1.jsonl", True),
        ("**/agent-*.jsonl", "proj/session.jsonl", False),
        ("notes/**", "notes/a/b.txt", True),
        ("?.txt", "ab.txt", False),
        ("**/conversations.json", "export-2025/conversations.json", True),
    ],
)
def test_glob_regex(pattern: str, path: str, hit: bool) -> None:
    assert bool(glob_regex(pattern).match(path)) is hit


def test_roots_resolve_against_the_file_and_kinds_fill_defaults(tmp_path: Path) -> None:
    corpus = make_corpus(tmp_path)
    cfg = load_sources(corpus.sources_file)
    by_name = {r.name: r for r in cfg.roots}
    assert by_name["notes"].path == corpus.notes.resolve()
    assert by_name["notes"].knowledge_type is KnowledgeType.PRINCIPLE
    assert by_name["notes"].importance == 0.8 and by_name["notes"].tags == ("team",)
    code = by_name["claude-code"]
    assert code.kind is SourceKind.CLAUDE_CODE
    assert code.knowledge_type is KnowledgeType.EXPERIMENT  # conversations default to experiment
    assert code.patterns == ("**/*.jsonl",) and "**/agent-*.jsonl" in code.exclude
    assert cfg.state_path == (tmp_path / "state" / "sources-state.json").resolve()


def test_scan_picks_pattern_matches_and_skips_hidden_and_excluded(tmp_path: Path) -> None:
    corpus = make_corpus(tmp_path)
    (corpus.notes / ".hidden.md").write_text("# no")
    (corpus.notes / ".git").mkdir()
    (corpus.notes / ".git" / "x.md").write_text("# no")
    (corpus.notes / "image.png").write_bytes(b"\x89PNG")
    sub_agent = corpus.session_file.parent / "agent-1234.jsonl"
    sub_agent.write_text(corpus.session_file.read_text())
    names = {f.path.name: f.root.name for f in scan(load_sources(corpus.sources_file))}
    assert names == {
        "fusion.md": "notes",
        "decay.md": "notes",
        "bm25.md": "papers",
        corpus.session_file.name: "claude-code",
        "conversations.json": "claude-ai",
    }


def test_a_missing_root_folder_is_skipped_not_an_error(tmp_path: Path) -> None:
    corpus = make_corpus(tmp_path)
    for f in corpus.papers.iterdir():
        f.unlink()
    corpus.papers.rmdir()
    assert all(f.root.name != "papers" for f in scan(load_sources(corpus.sources_file)))


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("roots: []", "roots"),
        ("roots:\n  - path: a\n    knowledge_type: gossip", "knowledge_type"),
        ("roots:\n  - path: a\n    importance: 2", "importance"),
        ("roots:\n  - path: a\n    colour: red", "colour"),
        ("roots:\n  - path: a\n    kind: slack", "kind"),
        ("roots:\n  - {name: x, path: a}\n  - {name: x, path: b}", "two roots are named"),
        ("- just a list", "mapping"),
        ("roots: [", "YAML"),
    ],
)
def test_bad_sources_files_say_what_is_wrong(tmp_path: Path, text: str, fragment: str) -> None:
    path = tmp_path / "sources.yaml"
    path.write_text(text)
    with pytest.raises(InvalidInputError, match=fragment):
        load_sources(path)


def test_a_missing_sources_file_names_the_setting(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="MEMORY_PIPELINE_SOURCES"):
        load_sources(tmp_path / "nope.yaml")


@pytest.mark.parametrize(
    ("kind", "patterns", "picked", "skipped"),
    [
        (
            SourceKind.CODEX,
            ("**/rollout-*.jsonl",),
            "2026/10/14/rollout-2026-10-14T09-12-03-0199a1b2.jsonl",
            "history.jsonl",
        ),
        (SourceKind.CHATGPT, ("**/conversations.json",), "conversations.json", "chat.html"),
    ],
)
def test_codex_and_chatgpt_roots_are_accepted_with_their_defaults(
    tmp_path: Path, kind: SourceKind, patterns: tuple[str, ...], picked: str, skipped: str
) -> None:
    path = tmp_path / "sources.yaml"
    path.write_text(f"roots:\n  - path: export\n    kind: {kind.value}\n")
    [root] = load_sources(path).roots
    assert root.kind is kind and root.patterns == patterns and root.exclude == ()
    assert root.knowledge_type is KnowledgeType.EXPERIMENT
    assert root.matches(root.path / picked) and not root.matches(root.path / skipped)

"""Codex CLI and ChatGPT roots through the real sync: stored once, skipped after, and a
file that cannot be read refused whole with its name while the other root goes on."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from memory_pipeline.embedding.base import HashingEmbedder
from memory_pipeline.sources.ledger import open_ledger, read_ledger
from memory_pipeline.sources.sources_file import SourcesConfig, load_sources
from memory_pipeline.sources.status import FileState, sources_status
from memory_pipeline.sources.sync import SyncReport, apply_sync, plan_sync
from memory_pipeline.system import MemorySystem
from tests.conftest import make_settings
from tests.test_pipeline_support import FIXTURES

CODEX_IDS = ("0199a1b2-3c4d-7e5f-8a9b-0c1d2e3f4a5b", "0196a8f2-51c7-7d30-b2e4-9e81c3d05a77")
CHATGPT_IDS = ("6710c0de-0a1b-4c2d-8e3f-4a5b6c7d8e9f", "6711d1ef-1b2c-4d3e-9f40-5b6c7d8e9fa0")


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[MemorySystem]:
    mem = MemorySystem(make_settings(tmp_path), embedder=HashingEmbedder())
    yield mem
    mem.close()


@pytest.fixture
def roots(tmp_path: Path) -> dict[str, Path]:
    """A Codex sessions folder and a ChatGPT export folder, both roots of one sources file."""
    codex, chatgpt = tmp_path / "codex" / "sessions", tmp_path / "chatgpt-export"
    shutil.copytree(FIXTURES / "codex-sessions", codex)
    shutil.copytree(FIXTURES / "chatgpt-export", chatgpt)
    (tmp_path / "sources.yaml").write_text(
        f"state: {tmp_path / 'state.json'}\nroots:\n"
        f"  - name: codex\n    path: {codex}\n    kind: codex\n"
        f"  - name: chatgpt\n    path: {chatgpt}\n    kind: chatgpt\n",
        encoding="utf-8",
    )
    return {"codex": codex, "chatgpt": chatgpt, "sources": tmp_path / "sources.yaml"}


def sync(memory: MemorySystem, cfg: SourcesConfig, paths: list[str] | None = None) -> SyncReport:
    with open_ledger(cfg.state_path) as ledger:
        return apply_sync(memory, cfg, plan_sync(memory.store, cfg, ledger, paths=paths), ledger)


def states(memory: MemorySystem, cfg: SourcesConfig) -> dict[str, FileState]:
    return {
        s.path.name: s.state for s in sources_status(memory.store, cfg, read_ledger(cfg.state_path))
    }


def test_both_kinds_are_stored_once_and_a_second_sync_is_a_no_op(
    memory: MemorySystem, roots: dict[str, Path]
) -> None:
    cfg = load_sources(roots["sources"])
    assert set(states(memory, cfg).values()) == {FileState.NEW}
    first = sync(memory, cfg)
    assert first.documents_added == 4 and not first.failed  # the empty ChatGPT chat is skipped
    assert set(states(memory, cfg).values()) == {FileState.INGESTED}
    for sid, origin, day in [
        (CODEX_IDS[0], "codex", "2026-10-14"),
        (CODEX_IDS[1], "codex", "2025-05-07"),
        (CHATGPT_IDS[0], "chatgpt", "2026-09-30"),
        (CHATGPT_IDS[1], "chatgpt", "2026-10-02"),
    ]:
        [doc] = memory.store.documents_by_source(f"text:{origin}:{sid}")
        assert doc.knowledge_type == "experiment" and str(doc.source_date) == day
        assert memory.find_by_tag(f"transcript_of:{sid}")
    counts = memory.store.counts()

    again = sync(memory, cfg)  # a full scan plans nothing
    assert again.documents_added == again.documents_replaced == again.documents_removed == 0
    every = [str(p) for p in roots["codex"].rglob("*.jsonl")]
    every.append(str(roots["chatgpt"] / "conversations.json"))
    explicit = sync(memory, cfg, paths=every)  # what the change sensor would hand over
    assert explicit.sessions_skipped == 4 and not explicit.failed
    assert explicit.documents_added == explicit.documents_replaced == 0
    assert memory.store.counts() == counts


@pytest.mark.parametrize(
    ("kind", "name", "content", "says"),
    [
        ("chatgpt", "conversations.json", "{not json", "not valid JSON"),
        ("chatgpt", "conversations.json", '{"conversations": []}', "JSON array"),
        ("chatgpt", "conversations.json", '[{"uuid": "x", "chat_messages": []}]', "ChatGPT"),
        ("codex", "rollout-2026-01-01T00-00-00-x.jsonl", "not json\n{torn", "none of its 2"),
    ],
)
def test_an_unreadable_file_is_refused_whole_and_the_other_root_goes_on(
    memory: MemorySystem, roots: dict[str, Path], kind: str, name: str, content: str, says: str
) -> None:
    folder = roots[kind]
    if kind == "chatgpt":
        (folder / name).write_text(content, encoding="utf-8")
        bad = folder / name
    else:
        shutil.rmtree(folder)
        folder.mkdir()
        bad = folder / name
        bad.write_text(content, encoding="utf-8")
    cfg = load_sources(roots["sources"])
    report = sync(memory, cfg)
    assert list(report.failed) == [str(bad)]
    assert str(bad) in report.failed[str(bad)] and says in report.failed[str(bad)]
    assert states(memory, cfg)[name] is FileState.FAILED
    # Nothing of the bad file is stored, all of the other root is.
    ids = {"codex": CODEX_IDS, "chatgpt": CHATGPT_IDS}
    for origin, sids in ids.items():
        for sid in sids:
            held = memory.store.documents_by_source(f"text:{origin}:{sid}")
            assert len(held) == (0 if origin == kind else 1)
    assert memory.counts()["documents"] == 2

"""Two writers storing the same bytes at once: one stores, the other is told it is unchanged."""

from __future__ import annotations

from pathlib import Path

from memory_pipeline.system import MemorySystem


def test_same_content_stored_between_check_and_insert(system: MemorySystem, tmp_path: Path) -> None:
    path = tmp_path / "race.md"
    path.write_text("# Race\n\nthe same bytes twice", encoding="utf-8")
    original = system.store.get_document
    calls = {"n": 0}

    def stale_then_real(doc_id: str):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] == 1:  # our pre-insert check runs before the other writer commits
            other = MemorySystem(system.settings, embedder=system.embedder)
            other.ingest([path], update_index=False)
            other.close()
            return None
        return original(doc_id)

    system.store.get_document = stale_then_real  # type: ignore[method-assign]
    result = system.ingest([path], update_index=False)[0]
    assert result.status == "unchanged" and "concurrently" in result.message
    assert system.store.counts() == {"documents": 1, "chunks": 1}


def test_same_file_stored_between_the_two_checks_is_unchanged(
    system: MemorySystem, tmp_path: Path
) -> None:
    """The other writer commits after our "is it stored?" check but before we look for older
    versions of the source: we must not replace its copy by ours and call it "replaced"."""
    path = tmp_path / "race.md"
    path.write_text("# Race\n\nthe same bytes from two writers", encoding="utf-8")
    original = system.store.get_document
    calls = {"n": 0}
    theirs: list[int] = []

    def stale_then_real(doc_id: str):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] == 1:
            other = MemorySystem(system.settings, embedder=system.embedder)
            other.ingest([path], update_index=False)
            theirs.extend(other.store.all_ids().tolist())
            other.close()
            return None
        return original(doc_id)

    system.store.get_document = stale_then_real  # type: ignore[method-assign]
    result = system.ingest([path], update_index=False)[0]
    assert result.status == "unchanged", result
    assert result.replaced_doc_id is None
    assert system.store.counts() == {"documents": 1, "chunks": 1}
    assert system.store.all_ids().tolist() == theirs  # their copy stands, not deleted and redone

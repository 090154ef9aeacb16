"""source_date: explicit metadata, front matter, file name, mtime — in that order."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pytest
import sqlalchemy as sa

from memory_pipeline.ingest.dates import DateRule, date_from_name, derive_source_date
from memory_pipeline.store.schema import Chunk, Document
from memory_pipeline.system import MemorySystem

MTIME = dt.datetime(2023, 3, 4, 5, 6, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("2024-05-01-notes.md", dt.date(2024, 5, 1)),
        ("log_20231231.txt", dt.date(2023, 12, 31)),
        ("meeting.2022_01_09.md", dt.date(2022, 1, 9)),
        ("v12345678.md", None),  # inside a longer number
        ("2024-13-40.md", None),  # not a calendar date
        ("notes.md", None),
    ],
)
def test_date_from_name(name: str, expected: dt.date | None) -> None:
    assert date_from_name(name) == expected


@pytest.mark.parametrize(
    ("explicit", "front", "name", "mtime", "rule"),
    [
        (dt.date(2020, 1, 1), dt.date(2021, 1, 1), "2022-01-01.md", MTIME, DateRule.METADATA),
        (None, dt.date(2021, 1, 1), "2022-01-01.md", MTIME, DateRule.FRONT_MATTER),
        (None, None, "2022-01-01.md", MTIME, DateRule.FILE_NAME),
        (None, None, "plain.md", MTIME, DateRule.MTIME),
        (None, None, None, None, None),
    ],
)
def test_rule_order(explicit, front, name, mtime, rule) -> None:  # type: ignore[no-untyped-def]
    day, got = derive_source_date(
        explicit=explicit, front_matter=front, path=Path(name) if name else None, modified_at=mtime
    )
    assert got == rule
    if rule is DateRule.MTIME:
        assert day == MTIME.date()


def _touch(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    stamp = MTIME.timestamp()
    os.utime(path, (stamp, stamp))
    return path


def test_ingest_records_date_and_rule(system: MemorySystem, tmp_path: Path) -> None:
    named = _touch(tmp_path / "2024-02-03 standup.md", "# Standup\n\nwe shipped")
    plain = _touch(tmp_path / "plain.md", "# Plain\n\nnothing dated here")
    front = _touch(tmp_path / "fm.md", "---\ndate: 2021-06-07\n---\n# FM\n\nbody")
    results = system.ingest([named, plain, front])
    docs = {Path(r.source).name: system.store.get_document(r.doc_id) for r in results}
    got = {name: (d.source_date, d.source_date_rule) for name, d in docs.items() if d}
    assert got == {
        "2024-02-03 standup.md": (dt.date(2024, 2, 3), "file_name"),
        "plain.md": (MTIME.date(), "mtime"),
        "fm.md": (dt.date(2021, 6, 7), "front_matter"),
    }
    explicit = system.ingest_text("x y z", title="t", metadata={"source_date": "2019-09-09"})
    doc = system.store.get_document(explicit.doc_id)
    assert doc is not None and (doc.source_date, doc.source_date_rule) == (
        dt.date(2019, 9, 9),
        "metadata",
    )


def test_backfill_is_a_dry_run_until_applied(system: MemorySystem, tmp_path: Path) -> None:
    path = _touch(tmp_path / "2024-02-03.md", "# Old\n\nlegacy row without a date")
    doc_id = system.ingest([path])[0].doc_id
    with system.store.write() as s:  # a row from before dates were derived
        s.execute(sa.update(Document).values(source_date=None, source_date_rule=None))
        s.execute(sa.update(Chunk).values(source_date=None))
    plan = system.backfill_source_date()
    assert plan == [(doc_id, str(path.resolve()), "2024-02-03", "file_name")]
    assert system.store.get_document(doc_id).source_date is None  # type: ignore[union-attr]
    system.backfill_source_date(apply=True)
    assert system.store.get_document(doc_id).source_date == dt.date(2024, 2, 3)  # type: ignore[union-attr]
    assert {c.source_date for c in system.store.document_chunks(doc_id)} == {dt.date(2024, 2, 3)}
    assert system.backfill_source_date() == []

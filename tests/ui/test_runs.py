"""The overview's "last runs of the pipeline": read from the run storage of a real Dagster
instance (the instance file ``make run`` writes), held equal to what Dagster itself says
of its runs; each way of having none says why; and the page lists them."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest
from starlette.testclient import TestClient

from memory_pipeline.embedding.base import HashingEmbedder
from memory_pipeline.pipeline.instance import write_instance
from memory_pipeline.system import MemorySystem
from memory_pipeline.ui.app import build_app, cookie_name
from memory_pipeline.ui.runs import HOME_ENV, PipelineRun, home_from, last_runs, runs_url
from tests.conftest import make_settings
from tests.ui.pipeline_runs import failing_job, run_jobs, tidy_job

TOKEN = "t0ken-for-the-tests"
PORT = 8765


def same_as_dagster(read: list[PipelineRun], records: list[dg.RunRecord]) -> None:
    assert [r.run_id for r in read] == [rec.dagster_run.run_id for rec in records]
    for run, rec in zip(read, records, strict=True):
        assert run.job == rec.dagster_run.job_name
        assert run.status == rec.dagster_run.status.value
        assert run.started == dt.datetime.fromtimestamp(rec.start_time, dt.UTC)
        assert run.ended == dt.datetime.fromtimestamp(rec.end_time, dt.UTC)
        assert run.seconds is not None and run.seconds >= 0
        assert run.created.tzinfo is dt.UTC


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "dagster_home"
    write_instance(home)
    return home


def test_the_runs_are_those_dagster_recorded_newest_first(home: Path) -> None:
    records = run_jobs(home, [tidy_job, failing_job, tidy_job])
    runs = last_runs(home)
    assert runs.note == "" and runs.home == home
    same_as_dagster(runs.runs, records)
    assert [(r.job, r.status) for r in runs.runs] == [
        ("tidy_job", "SUCCESS"),
        ("failing_job", "FAILURE"),
        ("tidy_job", "SUCCESS"),
    ]
    assert [r.run_id for r in last_runs(home, limit=2).runs] == [r.run_id for r in runs.runs[:2]]


def test_an_instance_with_the_default_storage_is_read_too(tmp_path: Path) -> None:
    home = tmp_path / "plain_home"
    home.mkdir()  # no storage in dagster.yaml: Dagster keeps its runs in the home itself
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    records = run_jobs(home, [tidy_job])
    same_as_dagster(last_runs(home).runs, records)


def test_each_way_of_having_no_runs_says_why(tmp_path: Path, home: Path) -> None:
    assert "--dagster-home" in last_runs(None).note
    assert last_runs(tmp_path / "nowhere").note == f"No Dagster home at {tmp_path / 'nowhere'}."
    assert last_runs(home).note.startswith("No run yet")
    (home / "dagster.yaml").write_text("storage: {mysql: {mysql_url: mysql://x}}\n")
    assert "keeps the runs in mysql" in last_runs(home).note
    (home / "dagster.yaml").write_text("storage: [unclosed\n")
    assert last_runs(home).note.startswith("Could not read")
    (home / "dagster.yaml").write_text("storage: {postgres: {postgres_url: {env: NO_SUCH_VAR}}}\n")
    assert "PostgreSQL" in last_runs(home).note


def test_a_run_storage_that_cannot_be_read_is_a_note_not_an_error(home: Path) -> None:
    run_jobs(home, [tidy_job])
    url = runs_url(home)
    assert url is not None
    database = home / "storage" / "history" / "runs.db"
    database.write_bytes(b"not a database at all" * 100)
    assert last_runs(home).note.startswith("Could not read the pipeline's runs:")


def test_the_home_comes_from_the_flag_else_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(HOME_ENV, raising=False)
    assert home_from(None) is None
    monkeypatch.setenv(HOME_ENV, str(tmp_path / "env_home"))
    assert home_from(None) == tmp_path / "env_home"
    assert home_from(str(tmp_path / "flag_home")) == tmp_path / "flag_home"


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[MemorySystem]:
    system = MemorySystem(make_settings(tmp_path / "memory"), embedder=HashingEmbedder())
    yield system
    system.close()


def _overview(memory: MemorySystem, home: Path | None) -> str:
    app = build_app(memory, token=TOKEN, host="127.0.0.1", port=PORT, dagster_home=home)
    client = TestClient(app, base_url=f"http://127.0.0.1:{PORT}", follow_redirects=False)
    client.cookies.set(cookie_name(PORT), TOKEN)
    page = client.get("/")
    assert page.status_code == 200
    return page.text


def test_the_overview_lists_the_last_runs(memory: MemorySystem, home: Path) -> None:
    assert "No run yet" in _overview(memory, home)  # an empty memory shows them too
    records = run_jobs(home, [failing_job, tidy_job])
    memory.ingest_text("A note so that the memory is not empty.", title="note")
    html = _overview(memory, home)
    section = html.split("The pipeline's last runs", 1)[1].split("<h2>", 1)[0]
    assert section.index("tidy_job") < section.index("failing_job")  # newest first
    assert "succeeded" in section and "failed" in section
    for rec in records:
        assert rec.dagster_run.run_id[:8] in section
    assert "--dagster-home" in _overview(memory, None)

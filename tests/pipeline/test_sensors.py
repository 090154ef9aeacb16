"""Sensors: their run requests and cursors for new, changed, deleted and unchanged files."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from memory_pipeline.index import watcher
from memory_pipeline.index.versions import read_current
from memory_pipeline.pipeline.definitions import build_definitions
from memory_pipeline.pipeline.ingestion.checks import sources_ingested
from memory_pipeline.pipeline.ingestion.jobs import ingest_job
from memory_pipeline.pipeline.ingestion.sensors import (
    FAILING_AFTER,
    MAX_LISTED_PATHS,
    backoff_seconds,
    build_pending_index_sensor,
    source_files_sensor,
)
from memory_pipeline.pipeline.maintenance.sensors import first_publication_sensor
from memory_pipeline.pipeline.resources import MemoryResource
from memory_pipeline.spaces import Spaces
from tests.test_pipeline_support import Corpus, make_corpus


@pytest.fixture
def corpus(tmp_path: Path) -> Corpus:
    return make_corpus(tmp_path)


@pytest.fixture
def instance() -> dg.DagsterInstance:
    return dg.DagsterInstance.ephemeral()


def tick(
    sensor: dg.SensorDefinition,
    corpus: Corpus,
    instance: dg.DagsterInstance,
    cursor: str | None,
    **env: str,
) -> dg.SensorResult | dg.SkipReason:
    defs = build_definitions(corpus.env(**env))
    with dg.build_sensor_context(
        instance=instance, cursor=cursor, resources=dict(defs.resources), definitions=defs
    ) as context:
        return sensor(context)  # type: ignore[return-value]


def paths_in(request: dg.RunRequest) -> tuple[list[str], list[str]]:
    config: dict[str, Any] = request.run_config["ops"]["source_files"]["config"]
    return config.get("paths", []), config.get("deleted", [])


def run_request(
    corpus: Corpus, instance: dg.DagsterInstance, request: dg.RunRequest, **env: str
) -> dg.ExecuteInProcessResult:
    """Run what the sensor asked for, as the daemon would (in process, on the same instance)."""
    defs = build_definitions(corpus.env(**env))
    job = defs.resolve_job_def(ingest_job.name)
    return job.execute_in_process(
        run_config=request.run_config, instance=instance, tags=request.tags
    )


def age_attempts(cursor: str | None, seconds: float) -> str:
    """The cursor as if its requests were made ``seconds`` earlier (past the backoff)."""
    data = json.loads(cursor or "{}")
    for attempt in data["asked"].values():
        attempt["at"] -= seconds
    return json.dumps(data)


def skipped(result: dg.SensorResult) -> str:
    reason = result.skip_reason
    return reason.skip_message or "" if reason else ""


def only_requests(result: dg.SensorResult | dg.SkipReason) -> list[dg.RunRequest]:
    assert isinstance(result, dg.SensorResult), result
    return list(result.run_requests or [])


def only_request(result: dg.SensorResult | dg.SkipReason) -> dg.RunRequest:
    assert isinstance(result, dg.SensorResult), result
    [request] = result.run_requests or []
    return request


def test_new_files_request_an_ingest_run_with_their_paths(
    corpus: Corpus, instance: dg.DagsterInstance
) -> None:
    result = tick(source_files_sensor, corpus, instance, None)
    request = only_request(result)
    changed, deleted = paths_in(request)
    assert {Path(p).name for p in changed} == {
        "fusion.md",
        "decay.md",
        "bm25.md",
        corpus.session_file.name,
        "conversations.json",
    }
    assert deleted == []
    cursor = json.loads(result.cursor or "")  # type: ignore[union-attr]
    assert cursor["files"] == {}  # nothing is settled until the store holds it
    assert set(cursor["asked"]) == set(changed)
    assert {a["attempts"] for a in cursor["asked"].values()} == {1}
    assert request.run_key and request.run_key.startswith("sources-")
    # A first request asks nothing again: no retry count beside Dagster's own retry tags
    # (``dagster/retry_number``), which a retry of this run copies these tags next to.
    assert request.tags == {"memory_pipeline/changed": "5", "memory_pipeline/deleted": "0"}


def test_files_in_the_store_request_nothing_and_are_not_read_again(
    corpus: Corpus, instance: dg.DagsterInstance
) -> None:
    first = tick(source_files_sensor, corpus, instance, None)
    assert run_request(corpus, instance, only_request(first)).success
    again = tick(source_files_sensor, corpus, instance, first.cursor)  # type: ignore[union-attr]
    assert isinstance(again, dg.SensorResult) and not again.run_requests
    assert "every one of 5 files under 4 roots is in the store" in skipped(again)
    cursor = json.loads(again.cursor or "")
    assert len(cursor["files"]) == 5 and cursor["asked"] == {}


def test_changed_and_deleted_files_are_named_in_the_run_config(
    corpus: Corpus, instance: dg.DagsterInstance
) -> None:
    first = tick(source_files_sensor, corpus, instance, None)
    assert run_request(corpus, instance, only_request(first)).success
    settled = tick(source_files_sensor, corpus, instance, first.cursor)  # type: ignore[union-attr]
    changed_file, deleted_file = corpus.notes / "decay.md", corpus.papers / "bm25.md"
    changed_file.write_text(changed_file.read_text() + "\nmore")
    stamp = time.time() + 5  # a rewrite within the mtime granularity still changes the size
    os.utime(changed_file, (stamp, stamp))
    deleted_file.unlink()
    new_file = corpus.notes / "new.md"
    new_file.write_text("# New\n\nnew knowledge")
    result = tick(source_files_sensor, corpus, instance, settled.cursor)  # type: ignore[union-attr]
    request = only_request(result)
    changed, deleted = paths_in(request)
    assert changed == sorted([str(changed_file), str(new_file)])
    assert deleted == [str(deleted_file)]
    assert request.run_key != only_request(first).run_key
    assert run_request(corpus, instance, request).success
    done = tick(source_files_sensor, corpus, instance, result.cursor)  # type: ignore[union-attr]
    assert isinstance(done, dg.SensorResult) and not done.run_requests
    cursor = json.loads(done.cursor or "")
    assert str(deleted_file) not in cursor["files"] and str(new_file) in cursor["files"]
    assert cursor["asked"] == {}


def test_a_run_that_never_ingested_its_files_is_asked_again_after_a_backoff(
    corpus: Corpus, instance: dg.DagsterInstance
) -> None:
    """The killed-worker case: the run was asked for, it died, the files are not in."""
    first = tick(source_files_sensor, corpus, instance, None)
    asked = only_request(first)
    soon = tick(source_files_sensor, corpus, instance, first.cursor)  # type: ignore[union-attr]
    assert isinstance(soon, dg.SensorResult) and not soon.run_requests
    assert "5 files not in the store after a run" in skipped(soon)
    assert "asking again in" in skipped(soon)

    later = age_attempts(soon.cursor, backoff_seconds(1) + 1)
    retry = only_request(tick(source_files_sensor, corpus, instance, later))
    assert paths_in(retry) == paths_in(asked)
    assert retry.run_key != asked.run_key  # a new key: Dagster would drop a repeated one
    assert retry.tags["memory_pipeline/files_asked_again"] == "5"
    assert "memory_pipeline/retried" not in retry.tags

    cursor: str | None = later
    for attempt in range(2, FAILING_AFTER + 1):  # keeps failing: backoff doubles, it is named
        result = tick(source_files_sensor, corpus, instance, cursor)
        assert isinstance(result, dg.SensorResult) and result.run_requests
        waiting = tick(source_files_sensor, corpus, instance, result.cursor)
        assert isinstance(waiting, dg.SensorResult) and not waiting.run_requests
        assert (
            json.loads(waiting.cursor or "")["asked"][str(corpus.notes / "fusion.md")]["attempts"]
            == attempt
        )
        cursor = age_attempts(waiting.cursor, backoff_seconds(attempt) + 1)
    assert backoff_seconds(FAILING_AFTER) == 4 * backoff_seconds(1)
    named = tick(source_files_sensor, corpus, instance, cursor)
    assert isinstance(named, dg.SensorResult)
    waiting = tick(source_files_sensor, corpus, instance, named.cursor)
    assert isinstance(waiting, dg.SensorResult)
    assert f"5 files still not in after {FAILING_AFTER} or more runs" in skipped(waiting)

    # The run finally goes through: nothing is asked any more.
    assert run_request(corpus, instance, only_request(named)).success
    done = tick(source_files_sensor, corpus, instance, named.cursor)
    assert isinstance(done, dg.SensorResult) and not done.run_requests
    assert json.loads(done.cursor or "")["asked"] == {}


def test_a_file_changed_during_its_backoff_is_asked_for_at_once(
    corpus: Corpus, instance: dg.DagsterInstance
) -> None:
    first = tick(source_files_sensor, corpus, instance, None)
    note = corpus.notes / "fusion.md"
    note.write_text(note.read_text() + "\nedited")
    result = tick(source_files_sensor, corpus, instance, first.cursor)  # type: ignore[union-attr]
    assert paths_in(only_request(result)) == ([str(note)], [])


def test_a_recorded_parse_failure_is_not_retried_until_the_file_changes(
    corpus: Corpus, instance: dg.DagsterInstance
) -> None:
    broken = corpus.claude_ai / "broken" / "conversations.json"
    broken.parent.mkdir()
    broken.write_text("{ not json", encoding="utf-8")
    first = tick(source_files_sensor, corpus, instance, None)
    assert str(broken) in paths_in(only_request(first))[0]
    assert run_request(corpus, instance, only_request(first)).success
    after = tick(source_files_sensor, corpus, instance, first.cursor)  # type: ignore[union-attr]
    assert isinstance(after, dg.SensorResult) and not after.run_requests
    assert str(broken) in json.loads(after.cursor or "")["files"]
    broken.write_text("{ still not json }", encoding="utf-8")  # changed: tried again
    fixed = tick(source_files_sensor, corpus, instance, after.cursor)
    assert paths_in(only_request(fixed)) == ([str(broken)], [])


def test_a_cursor_of_the_edge_triggered_sensor_is_checked_against_the_store(
    corpus: Corpus, instance: dg.DagsterInstance
) -> None:
    """The old sensor's cursor said "requested", not "stored": files it lists are re-checked."""
    from memory_pipeline.sources.status import scan

    cfg = build_definitions(corpus.env()).resources["sources"].config()  # type: ignore[union-attr]
    old = json.dumps({"files": {str(f.path): f.signature for f in scan(cfg)}})
    result = tick(source_files_sensor, corpus, instance, old)
    assert len(paths_in(only_request(result))[0]) == 5


def test_a_running_ingest_defers_the_request_and_the_cursor(
    corpus: Corpus, instance: dg.DagsterInstance
) -> None:
    defs = build_definitions(corpus.env())
    job = defs.resolve_job_def(ingest_job.name)
    instance.create_run_for_job(job, status=dg.DagsterRunStatus.STARTED)
    result = tick(source_files_sensor, corpus, instance, None)
    assert isinstance(result, dg.SkipReason)
    assert "waiting for ingest run" in (result.skip_message or "")


def test_huge_change_sets_ask_for_a_full_scan(corpus: Corpus, instance: dg.DagsterInstance) -> None:
    for i in range(MAX_LISTED_PATHS):
        (corpus.notes / f"n{i:04}.md").write_text(f"# Note {i}\n\nbody {i}")
    result = tick(source_files_sensor, corpus, instance, None)
    assert isinstance(result, dg.SensorResult)
    [request] = result.run_requests or []
    assert request.run_config["ops"]["source_files"]["config"] == {}


def test_no_sources_file_skips(corpus: Corpus, instance: dg.DagsterInstance) -> None:
    env = corpus.env()
    del env["MEMORY_PIPELINE_SOURCES"]
    defs = build_definitions(env)
    with dg.build_sensor_context(instance=instance, resources=dict(defs.resources)) as context:
        result = source_files_sensor(context)
    assert isinstance(result, dg.SkipReason) and "MEMORY_PIPELINE_SOURCES" in (
        result.skip_message or ""
    )


def test_pending_index_sensor_waits_for_a_quiet_queue_then_requests_one_update(
    corpus: Corpus, instance: dg.DagsterInstance
) -> None:
    sensor = build_pending_index_sensor(debounce_seconds=30)
    empty = tick(sensor, corpus, instance, None)
    assert isinstance(empty, dg.SensorResult) and not empty.run_requests
    assert json.loads(empty.cursor or "") == {}

    memory: MemoryResource = build_definitions(corpus.env()).resources["memory"]  # type: ignore[assignment]
    system = memory.system()
    system.ingest_text("An agent's note about FAISS segments.", "note 1")  # like MCP ingest
    burst = tick(sensor, corpus, instance, None)
    assert isinstance(burst, dg.SensorResult) and not burst.run_requests
    seen = json.loads(burst.cursor or "")
    assert seen["seq"] > 0

    system.ingest_text("A second note, same burst.", "note 2")
    still_busy = tick(sensor, corpus, instance, burst.cursor)
    assert isinstance(still_busy, dg.SensorResult) and not still_busy.run_requests
    assert json.loads(still_busy.cursor or "")["seq"] > seen["seq"]  # the clock restarts

    waiting = tick(sensor, corpus, instance, still_busy.cursor)
    assert isinstance(waiting, dg.SkipReason)  # quiet, but not for 30 s yet

    quiet = json.dumps({**json.loads(still_busy.cursor or ""), "since": time.time() - 31})
    ready = tick(sensor, corpus, instance, quiet)
    assert isinstance(ready, dg.SensorResult)
    [request] = ready.run_requests or []
    assert request.run_key == f"update-index-{json.loads(quiet)['seq']}"
    assert request.tags["memory_pipeline/pending_chunks"] == "2"

    system.update_index()  # the requested run takes the queue in
    done = tick(sensor, corpus, instance, ready.cursor)
    assert isinstance(done, dg.SensorResult) and not done.run_requests
    system.close()


def test_each_tick_of_the_pending_index_sensor_marks_the_index_as_watched(
    corpus: Corpus, instance: dg.DagsterInstance
) -> None:
    memory: MemoryResource = build_definitions(corpus.env()).resources["memory"]  # type: ignore[assignment]
    index = memory.settings().index_path
    assert watcher.watching(index) is None
    tick(build_pending_index_sensor(debounce_seconds=7), corpus, instance, None)
    watch = watcher.watching(index)
    assert watch is not None and (watch.interval, watch.debounce) == (10, 7)
    assert watcher.mark_path(index).parent == index.parent


def test_pending_index_sensor_leaves_queued_changes_to_a_running_ingest(
    corpus: Corpus, instance: dg.DagsterInstance
) -> None:
    sensor = build_pending_index_sensor(debounce_seconds=0)
    memory: MemoryResource = build_definitions(corpus.env()).resources["memory"]  # type: ignore[assignment]
    memory.system().ingest_text("A note", "note")
    first = tick(sensor, corpus, instance, None)
    assert isinstance(first, dg.SensorResult)
    defs = build_definitions(corpus.env())
    instance.create_run_for_job(
        defs.resolve_job_def(ingest_job.name), status=dg.DagsterRunStatus.STARTED
    )
    result = tick(sensor, corpus, instance, first.cursor)
    assert isinstance(result, dg.SkipReason) and "will take the queued changes in" in (
        result.skip_message or ""
    )


def test_pending_index_sensor_rebuilds_an_index_made_by_older_token_rules(
    corpus: Corpus, instance: dg.DagsterInstance
) -> None:
    sensor = build_pending_index_sensor(debounce_seconds=0)
    memory: MemoryResource = build_definitions(corpus.env()).resources["memory"]  # type: ignore[assignment]
    system = memory.system()
    system.ingest_text("卵は春に産む。", "note")
    system.update_index()
    assert not tick(sensor, corpus, instance, None).run_requests  # type: ignore[union-attr]
    # The published version as written before token rules were recorded.
    current = read_current(memory.settings().index_path)
    assert current is not None
    manifest = current[1] / "manifest.json"
    data = json.loads(manifest.read_text())
    del data["tokenizer"]
    manifest.write_text(json.dumps(data))
    result = tick(sensor, corpus, instance, None)
    assert isinstance(result, dg.SensorResult)
    [request] = result.run_requests or []
    assert request.run_key == f"update-index-token-rules-{current[0].version}"
    assert system.update_index().kind == "rebuild"  # what the requested run does
    assert not tick(sensor, corpus, instance, None).run_requests  # type: ignore[union-attr]
    system.close()


def test_the_first_publication_asks_for_one_evaluation_forgetting_and_scrub_report(
    corpus: Corpus, instance: dg.DagsterInstance
) -> None:
    before = tick(first_publication_sensor, corpus, instance, None)
    assert isinstance(before, dg.SkipReason) and "no index published" in (before.skip_message or "")
    ingest = only_request(tick(source_files_sensor, corpus, instance, None))
    assert run_request(corpus, instance, ingest).success

    defs = build_definitions(corpus.env())

    def launch(request: dg.RunRequest) -> None:
        job = defs.resolve_job_def(request.job_name or "")
        assert job.execute_in_process(run_config=request.run_config, instance=instance).success

    first = tick(first_publication_sensor, corpus, instance, None)
    [evaluate, scrub] = only_requests(first)
    assert (evaluate.job_name, scrub.job_name) == ("evaluate_retrieval", "scrub")
    assert scrub.run_config["ops"]["scrub_report"] == {"config": {"dry_run": True}}
    launch(scrub)  # a dry run: no model, asked for at once
    # While the evaluation runs, the report waits (one model load at a time).
    job = defs.resolve_job_def("evaluate_retrieval")
    running = instance.create_run_for_job(job, status=dg.DagsterRunStatus.STARTED)
    waiting = tick(first_publication_sensor, corpus, instance, None)
    assert isinstance(waiting, dg.SkipReason)
    assert "the forgetting report waits for the evaluation run" in (waiting.skip_message or "")
    instance.report_run_canceled(running)
    launch(evaluate)

    second = tick(first_publication_sensor, corpus, instance, None)
    [report] = only_requests(second)
    assert report.job_name == "forgetting"
    forgetting_config = report.run_config["ops"]["forgetting_candidates"]
    assert forgetting_config == {"config": {"dry_run": True}}
    launch(report)
    after = tick(first_publication_sensor, corpus, instance, None)
    assert isinstance(after, dg.SkipReason)
    assert after.skip_message == (
        "evaluated before; forgetting reported before; scrub reported before"
    )


def test_the_first_publication_without_a_golden_set_reports_forgetting_and_scrub(
    corpus: Corpus, instance: dg.DagsterInstance
) -> None:
    (corpus.base / "golden.yaml").unlink()
    ingest = only_request(tick(source_files_sensor, corpus, instance, None))
    assert run_request(corpus, instance, ingest).success
    result = tick(first_publication_sensor, corpus, instance, None)
    assert isinstance(result, dg.SensorResult)
    assert [r.job_name for r in result.run_requests or []] == ["forgetting", "scrub"]


def test_with_a_space_set_the_sensor_asset_and_check_look_where_the_run_wrote(
    corpus: Corpus, instance: dg.DagsterInstance
) -> None:
    """``HYBRID_RAG_SPACE`` and roots without a ``space:`` of their own: the files go to
    that space, and the sensor, ``source_files`` and ``sources_ingested`` find them there."""
    space = {"HYBRID_RAG_SPACE": "project-a"}
    first = tick(source_files_sensor, corpus, instance, None, **space)
    assert run_request(corpus, instance, only_request(first), **space).success

    # As in a run where the check opens the store before anything opens the system
    # (the hourly health_checks): resources opened afresh.
    resources = build_definitions(corpus.env(**space)).resources or {}
    check = sources_ingested(memory=resources["memory"], sources=resources["sources"])
    assert isinstance(check, dg.AssetCheckResult) and check.passed, check

    again = tick(source_files_sensor, corpus, instance, first.cursor, **space)  # type: ignore[union-attr]
    assert isinstance(again, dg.SensorResult) and not again.run_requests
    assert "every one of 5 files under 4 roots is in the store" in skipped(again)

    full = run_request(corpus, instance, dg.RunRequest(run_config={}), **space)
    plan = full.asset_materializations_for_node("source_files")[0].metadata
    assert plan["files_to_ingest"].value == 0 and plan["files_to_delete"].value == 0

    memory = resources["memory"]
    assert isinstance(memory, MemoryResource)
    try:
        store = memory.store()  # before system(): opened on its own, with the same binding
        assert store.spaces == memory.system().spaces == Spaces.bound("project-a")
    finally:
        memory.teardown_after_execution(None)

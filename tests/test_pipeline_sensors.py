"""Sensors: their run requests and cursors for new, changed, deleted and unchanged files."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from memory_pipeline.index.versions import read_current
from memory_pipeline.pipeline.definitions import build_definitions
from memory_pipeline.pipeline.ingestion.jobs import ingest_job
from memory_pipeline.pipeline.ingestion.sensors import (
    MAX_LISTED_PATHS,
    build_pending_index_sensor,
    source_files_sensor,
)
from memory_pipeline.pipeline.resources import MemoryResource
from tests.test_pipeline_support import Corpus, make_corpus


@pytest.fixture
def corpus(tmp_path: Path) -> Corpus:
    return make_corpus(tmp_path)


@pytest.fixture
def instance() -> dg.DagsterInstance:
    return dg.DagsterInstance.ephemeral()


def tick(
    sensor: dg.SensorDefinition, corpus: Corpus, instance: dg.DagsterInstance, cursor: str | None
) -> dg.SensorResult | dg.SkipReason:
    defs = build_definitions(corpus.env())
    with dg.build_sensor_context(
        instance=instance, cursor=cursor, resources=dict(defs.resources), definitions=defs
    ) as context:
        return sensor(context)  # type: ignore[return-value]


def paths_in(request: dg.RunRequest) -> tuple[list[str], list[str]]:
    config: dict[str, Any] = request.run_config["ops"]["source_files"]["config"]
    return config.get("paths", []), config.get("deleted", [])


def test_new_files_request_an_ingest_run_with_their_paths(
    corpus: Corpus, instance: dg.DagsterInstance
) -> None:
    result = tick(source_files_sensor, corpus, instance, None)
    assert isinstance(result, dg.SensorResult)
    [request] = result.run_requests or []
    changed, deleted = paths_in(request)
    assert {Path(p).name for p in changed} == {
        "fusion.md",
        "decay.md",
        "bm25.md",
        corpus.session_file.name,
        "conversations.json",
    }
    assert deleted == []
    cursor = json.loads(result.cursor or "")
    assert set(cursor["files"]) == set(changed)  # every file with its mtime:size signature
    assert request.run_key and request.run_key.startswith("sources-")


def test_unchanged_files_request_nothing_and_keep_the_cursor(
    corpus: Corpus, instance: dg.DagsterInstance
) -> None:
    first = tick(source_files_sensor, corpus, instance, None)
    assert isinstance(first, dg.SensorResult)
    again = tick(source_files_sensor, corpus, instance, first.cursor)
    assert isinstance(again, dg.SkipReason)
    assert "no changes in 5 files" in (again.skip_message or "")


def test_changed_and_deleted_files_are_named_in_the_run_config(
    corpus: Corpus, instance: dg.DagsterInstance
) -> None:
    first = tick(source_files_sensor, corpus, instance, None)
    assert isinstance(first, dg.SensorResult)
    changed_file, deleted_file = corpus.notes / "decay.md", corpus.papers / "bm25.md"
    changed_file.write_text(changed_file.read_text() + "\nmore")
    stamp = time.time() + 5  # a rewrite within the mtime granularity still changes the size
    os.utime(changed_file, (stamp, stamp))
    deleted_file.unlink()
    new_file = corpus.notes / "new.md"
    new_file.write_text("# New\n\nnew knowledge")
    result = tick(source_files_sensor, corpus, instance, first.cursor)
    assert isinstance(result, dg.SensorResult)
    [request] = result.run_requests or []
    changed, deleted = paths_in(request)
    assert changed == sorted([str(changed_file), str(new_file)])
    assert deleted == [str(deleted_file)]
    cursor = json.loads(result.cursor or "")["files"]
    assert str(deleted_file) not in cursor and str(new_file) in cursor
    assert request.run_key != first.run_requests[0].run_key  # type: ignore[index]


def test_a_running_ingest_defers_the_request_and_the_cursor(
    corpus: Corpus, instance: dg.DagsterInstance
) -> None:
    defs = build_definitions(corpus.env())
    job = defs.resolve_job_def(ingest_job.name)
    instance.create_run_for_job(job, status=dg.DagsterRunStatus.STARTED)
    result = tick(source_files_sensor, corpus, instance, None)
    assert isinstance(result, dg.SkipReason)
    assert "wait for ingest run" in (result.skip_message or "")


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

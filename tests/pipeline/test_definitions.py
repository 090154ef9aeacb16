"""The Definitions load (in-process and through the Dagster CLI); the instance file is valid."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import dagster as dg
import pytest
import yaml

from memory_pipeline.errors import InvalidInputError
from memory_pipeline.pipeline.definitions import build_definitions
from memory_pipeline.pipeline.instance import instance_config, write_instance
from memory_pipeline.pipeline.launcher import LocalRunLauncher
from tests.test_pipeline_support import ASSET_KEYS, make_corpus

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def defs(tmp_path: Path) -> dg.Definitions:
    return build_definitions(make_corpus(tmp_path).env())


def test_definitions_load_with_every_asset_check_job_sensor_and_schedule(
    defs: dg.Definitions,
) -> None:
    dg.Definitions.validate_loadable(defs)
    graph = defs.resolve_asset_graph()
    assert {k.to_user_string() for k in graph.get_all_asset_keys()} == ASSET_KEYS
    assert {(k.asset_key.to_user_string(), k.name) for k in graph.asset_check_keys} == {
        ("documents", "sources_parse"),
        ("documents", "sources_ingested"),
        ("chunks", "tagging_coverage"),
        ("embeddings", "vectors_valid"),
        ("search_index", "index_consistency"),
        ("retrieval_eval", "eval_regression"),
        ("scrub_report", "no_stored_secret"),
    }
    jobs = {"ingest_sources", "update_index", "forgetting", "scrub", "health_checks"}
    jobs.add("evaluate_retrieval")
    for name in jobs:
        assert defs.resolve_job_def(name).executor_def is dg.in_process_executor
    for name in ("source_files_sensor", "pending_index_sensor"):
        sensor = defs.resolve_sensor_def(name)
        assert sensor.default_status is dg.DefaultSensorStatus.RUNNING
    assert {s.name for s in defs.schedules or []} == {
        "weekly_forgetting_report",
        "hourly_health_checks",
        "nightly_evaluation",
    }


def test_index_writers_share_one_pool(defs: dg.Definitions) -> None:
    job = defs.resolve_job_def("ingest_sources")
    pools = {node.name: node.definition.pool for node in job.graph.node_dict.values()}
    assert pools["search_index"] == "index_writer"
    assert pools["documents_and_chunks"] == "source_ingest"
    forgetting = defs.resolve_job_def("forgetting")
    assert forgetting.graph.node_dict["forgetting_candidates"].definition.pool == "index_writer"
    assert defs.resolve_job_def("ingest_sources").tags["memory_pipeline/writer"] == "sources"


# Imports the repository's definitions.py in a fresh interpreter whose environment has
# no HYBRID_RAG_* or MEMORY_PIPELINE_* variable, sets them only then, and loads.
IMPORT_THEN_LOAD = """
import json, os, sys
sys.path.insert(0, sys.argv[1])
import definitions as root
os.environ.update(json.loads(sys.argv[2]))
loaded = root.defs()
memory, sources = loaded.resources["memory"], loaded.resources["sources"]
settings = memory.settings()
check = next(c for c in loaded.asset_checks if "tagging_coverage" in str(c.check_keys))
print(json.dumps({
    "db_path": str(settings.db_path),
    "index_path": str(settings.index_path),
    "archive_path": str(settings.archive_path),
    "model": settings.embedding.model,
    "max_chunk_size": settings.ingest.max_chunk_size,
    "fusion": settings.search.fusion,
    "sources_file": sources.sources_file,
    "check": next(iter(check.check_specs)).description,
}))
"""


def test_the_composition_root_reads_the_environment_only_when_loaded(tmp_path: Path) -> None:
    env = make_corpus(tmp_path).env(
        MEMORY_PIPELINE_TAG_COVERAGE_FLOOR="0.25", HYBRID_RAG_FUSION="rrf"
    )
    clean = {
        k: v for k, v in os.environ.items() if not k.startswith(("HYBRID_RAG_", "MEMORY_PIPELINE_"))
    }
    out = subprocess.run(
        [sys.executable, "-c", IMPORT_THEN_LOAD, str(REPO), json.dumps(env)],
        cwd=tmp_path,
        env=clean,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert out.returncode == 0, out.stderr
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert {k: loaded[k] for k in ("db_path", "index_path", "archive_path", "model")} == {
        "db_path": env["HYBRID_RAG_DB_PATH"],
        "index_path": env["HYBRID_RAG_INDEX_PATH"],
        "archive_path": env["HYBRID_RAG_ARCHIVE_PATH"],
        "model": "hashing",
    }
    assert (loaded["max_chunk_size"], loaded["fusion"]) == (64, "rrf")
    assert loaded["sources_file"] == env["MEMORY_PIPELINE_SOURCES"]
    assert "25%" in loaded["check"]


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("MEMORY_PIPELINE_TAG_COVERAGE_FLOOR", "1.5"),
        ("MEMORY_PIPELINE_INDEX_DEBOUNCE_SECONDS", "x"),
    ],
)
def test_bad_pipeline_settings_are_refused_by_name(tmp_path: Path, name: str, value: str) -> None:
    with pytest.raises(InvalidInputError, match=name):
        build_definitions(make_corpus(tmp_path).env(**{name: value}))


def test_dagster_cli_validates_the_workspace(tmp_path: Path) -> None:
    env = {**os.environ, **make_corpus(tmp_path).env(), "DAGSTER_HOME": str(tmp_path / "home")}
    (tmp_path / "home").mkdir()
    out = subprocess.run(
        [
            str(Path(sys.executable).parent / "dagster"),
            "definitions",
            "validate",
            "-w",
            "workspace.yaml",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "All code locations passed validation" in out.stdout + out.stderr


def test_the_instance_file_is_never_seen_half_written(tmp_path: Path) -> None:
    """A second ``make run`` rewrites dagster.yaml while the first one's Dagster may be
    reading it: every read sees a whole file, the old one or the new."""
    home = tmp_path / "home"
    path = write_instance(home)
    seen: list[object] = []
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            seen.append(yaml.safe_load(path.read_text(encoding="utf-8")))

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for _ in range(200):
            write_instance(home)
    finally:
        done.set()
        reader.join()
    assert seen and all(isinstance(config, dict) for config in seen)
    assert sorted(p.name for p in home.iterdir()) == ["dagster.yaml"]


def test_the_instance_file_loads_with_our_limits(tmp_path: Path) -> None:
    path = write_instance(tmp_path / "home")
    assert path == tmp_path / "home" / "dagster.yaml"
    with dg.DagsterInstance.from_config(str(tmp_path / "home")) as instance:
        assert instance.run_storage.__class__.__name__.startswith("Sqlite")
        settings = instance.get_settings("concurrency")
        assert settings["pools"]["default_limit"] == 1
        assert settings["runs"]["tag_concurrency_limits"] == [
            {"key": "memory_pipeline/writer", "limit": 1}
        ]
        assert instance.get_settings("telemetry") == {"enabled": False}
        # A dead run worker is noticed, its run failed, its slots freed; crashes are retried.
        assert type(instance.run_launcher) is LocalRunLauncher
        assert instance.run_launcher.supports_check_run_worker_health
        assert instance.run_monitoring_enabled
        assert instance.run_monitoring_settings["free_slots_after_run_end_seconds"] > 0
        assert instance.run_monitoring_max_resume_run_attempts == 0
        assert instance.run_retries_enabled
        assert not instance.run_retries_retry_on_asset_or_op_failure


def test_postgres_storage_reads_its_url_from_the_environment(tmp_path: Path) -> None:
    cfg = instance_config(tmp_path, "postgres")
    assert cfg["storage"] == {"postgres": {"postgres_url": {"env": "DAGSTER_PG_URL"}}}
    assert "DAGSTER_PG_URL" not in yaml.safe_dump(cfg["concurrency"])
    with pytest.raises(ValueError, match="storage"):
        instance_config(tmp_path, "mysql")

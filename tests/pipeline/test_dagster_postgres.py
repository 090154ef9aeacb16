"""Dagster on a shared deployment: instance storage on PostgreSQL, the memory on pgvector.

The instance file is the one ``make run`` writes with ``--storage postgres`` (the URL
read from ``DAGSTER_PG_URL`` when Dagster starts); the ingest job runs on it, its run
and materializations are rows in PostgreSQL, and the memory it filled (also on that
server, indexed by pgvector) answers at once.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import dagster as dg
import pytest
import sqlalchemy as sa

from memory_pipeline.embedding.base import HashingEmbedder
from memory_pipeline.pipeline.definitions import build_definitions
from memory_pipeline.pipeline.instance import POSTGRES_URL_ENV, write_instance
from memory_pipeline.system import MemorySystem
from memory_pipeline.ui.runs import last_runs
from tests.conftest import make_settings
from tests.test_pipeline_support import make_corpus


@pytest.mark.slow
def test_the_ingest_job_runs_on_postgres_instance_storage(
    tmp_path: Path,
    pgvector_server: str,
    pgvector_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    name = f"dagster_{uuid.uuid4().hex[:8]}"
    admin = sa.create_engine(pgvector_server, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(sa.text(f'CREATE DATABASE "{name}"'))
    dagster_url = pgvector_server.replace(
        "postgresql+psycopg://", "postgresql+psycopg2://", 1
    ).replace("/postgres?", f"/{name}?", 1)
    monkeypatch.setenv(POSTGRES_URL_ENV, dagster_url)
    home = tmp_path / "dagster_home"
    write_instance(home, "postgres")
    corpus = make_corpus(tmp_path)
    env = corpus.env(HYBRID_RAG_DATABASE_URL=pgvector_url, HYBRID_RAG_INDEX_BACKEND="pgvector")
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    defs = build_definitions(env)
    instance = dg.DagsterInstance.from_config(str(home))
    try:
        assert type(instance.run_storage).__name__ == "PostgresRunStorage"
        result = defs.resolve_job_def("ingest_sources").execute_in_process(instance=instance)
        assert result.success
        [run] = instance.get_runs()
        assert run.run_id == result.run_id
        materialized = {
            e.asset_key.to_user_string() for e in result.get_asset_materialization_events()
        }
        assert {"documents", "chunks", "search_index"} <= materialized
        # the viewer's overview reads the same run from PostgreSQL (ui/runs.py)
        shown = last_runs(home)
        assert shown.note == ""
        assert [(r.run_id, r.job, r.status) for r in shown.runs] == [
            (run.run_id, "ingest_sources", "SUCCESS")
        ]
        assert shown.runs[0].seconds is not None
    finally:
        instance.dispose()
    engine = sa.create_engine(pgvector_server.replace("/postgres?", f"/{name}?", 1))
    with engine.connect() as c:  # Dagster's own rows, in PostgreSQL
        assert c.execute(sa.text("SELECT count(*) FROM runs")).scalar() == 1
        assert c.execute(sa.text("SELECT count(*) FROM event_logs")).scalar() > 0
    engine.dispose()
    with admin.connect() as c:
        c.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()
    settings = make_settings(
        tmp_path / "reader", database_url=pgvector_url, backend="pgvector", max_chunk_size=64
    )
    memory = MemorySystem(settings, embedder=HashingEmbedder())
    try:
        assert memory.published() is not None and memory.counts()["chunks"] > 0
        assert memory.query(
            "memory", memory.settings.search_request(top_k=3, record_access=False)
        ).hits
    finally:
        memory.close()

"""MemoryResource carries the core's Settings into Dagster and back.

``MemoryResource.from_settings(settings).settings()`` is how every asset, check and
sensor gets its memory's configuration; a setting the resource does not carry silently
takes its default inside Dagster, whatever the environment said. The database URL
travels as a ``dg.EnvVar``: the UI shows the variable's name, never the password.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from memory_pipeline.config import ENV_VARS, Settings
from memory_pipeline.pipeline.definitions import build_definitions
from memory_pipeline.pipeline.resources import MemoryResource

# Every setting away from its default, so a setting that falls back to it is caught.
CUSTOM = Settings(
    db_path=Path("/data/memory/custom.db"),
    index_path=Path("/data/memory/custom-indices"),
    archive_path=Path("/data/memory/custom-archive"),
    database_url="postgresql+psycopg:///custom?host=/var/run/postgresql",
    space="project-a",
    read_spaces=("shared", "docs"),
    model="hashing",
    model_cache=Path("/data/models"),
    reranker="/data/models/cross-encoder",
    embed_batch_size=7,
    runtime="torch",
    threads=3,
    max_chunk_size=128,
    chunk_overlap=16,
    top_n=20,
    fusion="rrf",
    rrf_k=10,
    max_file_bytes=1_000_000,
    max_session_line_bytes=2_000_000,
    turn_context_before=3,
    turn_context_after=0,
    turn_dates=False,
    turn_vectors="joined",
    redact="off",
    redact_allow="AKIAIOSFODNN7EXAMPLE",
    ivf_threshold=5_000,
    dense_index="hnsw",
    time_weight=0.3,
    freq_weight=0.2,
    importance_threshold=0.1,
    half_lives=(("news", 7.0), ("paper", None)),
    guaranteed_types=("principle", "paper"),
    guaranteed_importance_threshold=0.5,
    guaranteed_candidates_limit=5,
    speaker_boost=0.5,
    score_threshold=0.1,
    grace_days=7.0,
    max_fraction=0.5,
    recall_budget=700,
    prompt_recall=False,
    prompt_recall_budget=200,
    prompt_recall_floor=0.9,
    prompt_recall_bm25_floor=4.0,
    prompt_recall_helper=False,
    prompt_recall_idle=60.0,
    allowed_roots="/data/notes",
    allow_hard_links=True,
    http_token="a-secret-token",
    tools="all",
    backend="qdrant",
    pgvector_ef_search=200,
    qdrant_url="http://qdrant.example:6333",
    qdrant_api_key="a-qdrant-key",
    qdrant_mode="local",
    qdrant_path=Path("/data/qdrant"),
    chroma_url="http://chroma.example:8000",
    chroma_path=Path("/data/chroma"),
    collection="team_memory",
)
# A serving secret stays with the server: the pipeline neither needs nor shows it.
NOT_CARRIED = {"HYBRID_RAG_HTTP_TOKEN"}


def _value(settings: Settings, var: str) -> object:
    section, name = ENV_VARS[var]
    return getattr(getattr(settings, section) if section else settings, name)


def test_the_custom_settings_change_every_field() -> None:
    """A new setting must get a non-default value in CUSTOM to be checked here."""
    default = Settings()
    assert [v for v in ENV_VARS if _value(CUSTOM, v) == _value(default, v)] == []


@pytest.mark.parametrize("var", sorted(set(ENV_VARS) - NOT_CARRIED))
def test_every_setting_survives_the_round_trip(var: str) -> None:
    back = MemoryResource.from_settings(CUSTOM).settings()
    assert _value(back, var) == _value(CUSTOM, var)


def test_the_round_trip_gives_back_the_same_settings() -> None:
    back = MemoryResource.from_settings(CUSTOM).settings()
    assert back == CUSTOM.replace(http_token=None)


def test_the_resource_shows_only_what_differs_from_the_defaults() -> None:
    resource = MemoryResource.from_settings(Settings(top_n=20))
    assert resource.variables == {"HYBRID_RAG_TOP_N": "20"}
    assert resource.database_url is None


def test_the_database_url_reaches_dagster_as_a_variable_reference(tmp_path: Path) -> None:
    url = "postgresql+psycopg://memory:s3cret-pw@db.example/memory"
    env = {"HYBRID_RAG_DATABASE_URL": url, "HYBRID_RAG_TOP_N": "20"}
    memory = build_definitions(env).resources["memory"]
    assert isinstance(memory, MemoryResource)
    assert isinstance(memory.database_url, dg.EnvVar)
    assert memory.database_url.env_var_name == "HYBRID_RAG_DATABASE_URL"
    assert "s3cret" not in repr(memory.variables) and "s3cret" not in repr(memory.database_url)


def test_the_url_is_resolved_from_the_run_environment(tmp_path: Path) -> None:
    """The run worker (not the definitions) reads the URL: a fresh interpreter proves it."""
    script = (
        "import os\n"
        "from memory_pipeline.pipeline.definitions import build_definitions\n"
        "memory = build_definitions(dict(os.environ)).resources['memory']\n"
        "print(memory.settings().database_url)\n"
    )
    url = f"sqlite:///{tmp_path / 'memory.db'}"
    out = subprocess.run(
        [sys.executable, "-c", script],
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "HYBRID_RAG_DATABASE_URL": url},
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == url


def test_a_bad_variable_in_the_resource_is_refused_by_name() -> None:
    resource = MemoryResource(variables={"HYBRID_RAG_TOP_N": "many"})
    with pytest.raises(ValueError, match="HYBRID_RAG_TOP_N"):
        resource.settings()


def test_the_system_a_run_opens_uses_the_configured_settings(tmp_path: Path) -> None:
    configured = CUSTOM.replace(
        db_path=tmp_path / "memory.db",
        index_path=tmp_path / "indices",
        archive_path=tmp_path / "archive",
        model_cache=tmp_path / "models",
        database_url=None,
        reranker=None,
        http_token=None,
        backend="local",
    )
    resource = MemoryResource.from_settings(configured)
    system = resource.system()
    try:
        assert system.settings == configured
        assert system.writer.ivf_threshold == configured.index.ivf_threshold
    finally:
        resource.teardown_after_execution(None)

"""MemoryResource carries the core's Settings into Dagster and back.

``MemoryResource.from_settings(settings).settings()`` is how every asset, check and
sensor gets its memory's configuration; a field the resource does not carry silently
takes its default inside Dagster, whatever the environment said.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from memory_pipeline.config import Settings
from memory_pipeline.pipeline.resources import MemoryResource

# Every field away from its default, so a field that falls back to it is caught.
CUSTOM = Settings(
    db_path=Path("/data/memory/custom.db"),
    index_path=Path("/data/memory/custom-indices"),
    archive_path=Path("/data/memory/custom-archive"),
    database_url="postgresql+psycopg:///custom?host=/var/run/postgresql",
    model="hashing",
    model_cache=Path("/data/models"),
    reranker="/data/models/cross-encoder",
    embed_batch_size=7,
    max_chunk_size=128,
    chunk_overlap=16,
    top_n=20,
    fusion="rrf",
    rrf_k=10,
    max_file_bytes=1_000_000,
    ivf_threshold=5_000,
    memory_time_weight=0.3,
    memory_freq_weight=0.2,
    memory_importance_threshold=0.1,
    memory_half_life_overrides=(("news", 7.0),),
    guaranteed_types=("principle", "paper"),
    guaranteed_importance_threshold=0.5,
    guaranteed_candidates_limit=5,
)
SETTINGS_FIELDS = [f.name for f in dataclasses.fields(Settings)]
CARRIED = [name for name in SETTINGS_FIELDS if name in MemoryResource.model_fields]
# Every Settings field is carried; a new field the resource forgets shows up here.
DROPPED: set[str] = set()


def test_the_custom_settings_change_every_field() -> None:
    """A new Settings field must get a non-default value in CUSTOM to be checked here."""
    default = Settings()
    same = [n for n in SETTINGS_FIELDS if getattr(CUSTOM, n) == getattr(default, n)]
    assert same == []


@pytest.mark.parametrize("name", CARRIED)
def test_every_carried_field_survives_the_round_trip(name: str) -> None:
    back = MemoryResource.from_settings(CUSTOM).settings()
    assert getattr(back, name) == getattr(CUSTOM, name)


def test_which_settings_fields_the_resource_does_not_carry() -> None:
    assert set(SETTINGS_FIELDS) - set(CARRIED) == DROPPED


def test_the_round_trip_gives_back_the_same_settings() -> None:
    assert MemoryResource.from_settings(CUSTOM).settings() == CUSTOM


def test_the_system_a_run_opens_uses_the_configured_settings(tmp_path: Path) -> None:
    configured = CUSTOM.with_overrides(
        db_path=tmp_path / "memory.db",
        index_path=tmp_path / "indices",
        archive_path=tmp_path / "archive",
        model_cache=tmp_path / "models",
    )
    configured = dataclasses.replace(configured, database_url=None, reranker=None)
    resource = MemoryResource.from_settings(configured)
    system = resource.system()
    try:
        assert system.settings == configured
        assert system.writer.ivf_threshold == configured.ivf_threshold
    finally:
        resource.teardown_after_execution(None)

"""Settings, read from the environment only at an entry point (CLI, server, Dagster)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from memory_pipeline.embedding.st import DEFAULT_BATCH_SIZE, DEFAULT_MODEL
from memory_pipeline.errors import InvalidInputError
from memory_pipeline.index.dense import DEFAULT_IVF_THRESHOLD
from memory_pipeline.ingest.chunking import (
    DEFAULT_CHUNK_OVERLAP,
    DEFAULT_MAX_CHUNK_SIZE,
    MIN_CHUNK_SIZE,
)
from memory_pipeline.ingest.loaders import DEFAULT_MAX_BYTES
from memory_pipeline.memory.scoring import MemoryParams
from memory_pipeline.search.fusion import parse_fusion
from memory_pipeline.search.params import MAX_TOP_N, SearchParams
from memory_pipeline.store.engine import sqlite_url


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "memory-pipeline" / "models"


_SEARCH = SearchParams()
_MEMORY = MemoryParams()


@dataclass(frozen=True)
class Settings:
    """Every setting with its default; each default is taken from the module that uses it."""

    db_path: Path = Path("hybrid_rag.db")
    index_path: Path = Path("indices")
    archive_path: Path = Path("archive")
    database_url: str | None = None
    model: str = DEFAULT_MODEL
    model_cache: Path = field(default_factory=default_cache_dir)
    reranker: str | None = None
    embed_batch_size: int = DEFAULT_BATCH_SIZE
    max_chunk_size: int = DEFAULT_MAX_CHUNK_SIZE
    chunk_overlap: int = DEFAULT_CHUNK_OVERLAP
    top_n: int = _SEARCH.top_n
    fusion: str = _SEARCH.fusion  # one of FUSIONS; see memory_pipeline/search/fusion.py
    rrf_k: int = _SEARCH.rrf_k
    max_file_bytes: int = DEFAULT_MAX_BYTES
    ivf_threshold: int = DEFAULT_IVF_THRESHOLD
    memory_time_weight: float = _MEMORY.time_weight
    memory_freq_weight: float = _MEMORY.freq_weight
    memory_importance_threshold: float = _MEMORY.importance_threshold
    memory_half_life_overrides: tuple[tuple[str, float | None], ...] = ()
    guaranteed_types: tuple[str, ...] = _SEARCH.guaranteed_types
    guaranteed_importance_threshold: float = _SEARCH.guaranteed_importance_threshold
    guaranteed_candidates_limit: int = _SEARCH.guaranteed_candidates_limit

    @property
    def url(self) -> str:
        return self.database_url or sqlite_url(self.db_path.resolve())

    def with_overrides(self, **changes: Any) -> Settings:
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    def __post_init__(self) -> None:
        for name, ok, expected in _CHECKS:
            if not ok(self):
                raise SettingsError(name, f"{name} must be {expected}, got {getattr(self, name)!r}")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Settings from HYBRID_RAG_* variables (the names of the original system).

        An empty variable means unset (the default). A malformed or out-of-range value
        is refused here, at the entry point, with the variable's name.
        """
        env = os.environ if env is None else env
        values: dict[str, Any] = {}
        for key, name in _ENV.items():
            raw = env.get(name, "")
            if raw == "":
                continue
            kind = _FIELD_TYPES[key]
            if kind is int:
                try:
                    values[key] = int(raw)
                except ValueError as exc:
                    raise InvalidInputError(
                        f"{name} must be an integer, got {env[name]!r}"
                    ) from exc
            elif kind is Path:
                values[key] = Path(raw)
            elif key == "fusion":
                values[key] = parse_fusion(env[name], name).value
            else:
                values[key] = raw
        try:
            return cls(**values)
        except SettingsError as exc:
            raise InvalidInputError(f"{_ENV.get(exc.field, exc.field)}: {exc}") from exc


class SettingsError(InvalidInputError):
    """A setting outside its range; ``field`` names it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


#: Field -> environment variable (the names of the system this one descends from).
_ENV: dict[str, str] = {
    "db_path": "HYBRID_RAG_DB_PATH",
    "index_path": "HYBRID_RAG_INDEX_PATH",
    "archive_path": "HYBRID_RAG_ARCHIVE_PATH",
    "database_url": "HYBRID_RAG_DATABASE_URL",
    "model": "HYBRID_RAG_EMBEDDING_MODEL",
    "model_cache": "HYBRID_RAG_MODEL_CACHE",
    "reranker": "HYBRID_RAG_RERANKER_MODEL",
    "fusion": "HYBRID_RAG_FUSION",
    "embed_batch_size": "HYBRID_RAG_EMBED_BATCH_SIZE",
    "max_chunk_size": "HYBRID_RAG_MAX_CHUNK_SIZE",
    "chunk_overlap": "HYBRID_RAG_CHUNK_OVERLAP",
    "top_n": "HYBRID_RAG_TOP_N",
    "max_file_bytes": "HYBRID_RAG_MAX_FILE_BYTES",
}
_FIELD_TYPES = {
    "db_path": Path,
    "index_path": Path,
    "archive_path": Path,
    "model_cache": Path,
    "embed_batch_size": int,
    "max_chunk_size": int,
    "chunk_overlap": int,
    "top_n": int,
    "max_file_bytes": int,
}
_FIELD_TYPES.update({k: str for k in _ENV if k not in _FIELD_TYPES})


def _unit(name: str) -> tuple[str, Any, str]:
    return name, lambda s: 0.0 <= getattr(s, name) <= 1.0, "a number in [0, 1]"


# Ranges of the settings; the limits are the ones the using modules enforce.
_CHECKS: tuple[tuple[str, Any, str], ...] = (
    ("embed_batch_size", lambda s: s.embed_batch_size >= 1, "at least 1"),
    (
        "max_chunk_size",
        lambda s: s.max_chunk_size >= MIN_CHUNK_SIZE,
        f"at least {MIN_CHUNK_SIZE} tokens",
    ),
    (
        "chunk_overlap",
        lambda s: 0 <= s.chunk_overlap < s.max_chunk_size / 2,
        "at least 0 and below half of the chunk size (HYBRID_RAG_MAX_CHUNK_SIZE)",
    ),
    ("top_n", lambda s: 1 <= s.top_n <= MAX_TOP_N, f"between 1 and {MAX_TOP_N}"),
    ("rrf_k", lambda s: s.rrf_k >= 0, "at least 0"),
    ("max_file_bytes", lambda s: s.max_file_bytes >= 1, "at least 1"),
    ("ivf_threshold", lambda s: s.ivf_threshold >= 1, "at least 1"),
    _unit("memory_time_weight"),
    _unit("memory_freq_weight"),
    _unit("memory_importance_threshold"),
    _unit("guaranteed_importance_threshold"),
    (
        "guaranteed_candidates_limit",
        lambda s: 0 <= s.guaranteed_candidates_limit <= 1000,
        "between 0 and 1000",
    ),
)

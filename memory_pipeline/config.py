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
from memory_pipeline.ingest.chunking import DEFAULT_CHUNK_OVERLAP, DEFAULT_MAX_CHUNK_SIZE
from memory_pipeline.ingest.loaders import DEFAULT_MAX_BYTES
from memory_pipeline.memory.scoring import MemoryParams
from memory_pipeline.search.fusion import parse_fusion
from memory_pipeline.search.params import SearchParams
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

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Settings from HYBRID_RAG_* variables (the names of the original system)."""
        env = os.environ if env is None else env
        s = cls()
        values: dict[str, Any] = {}
        if "HYBRID_RAG_DB_PATH" in env:
            values["db_path"] = Path(env["HYBRID_RAG_DB_PATH"])
        if "HYBRID_RAG_INDEX_PATH" in env:
            values["index_path"] = Path(env["HYBRID_RAG_INDEX_PATH"])
        if "HYBRID_RAG_ARCHIVE_PATH" in env:
            values["archive_path"] = Path(env["HYBRID_RAG_ARCHIVE_PATH"])
        if env.get("HYBRID_RAG_DATABASE_URL"):
            values["database_url"] = env["HYBRID_RAG_DATABASE_URL"]
        if env.get("HYBRID_RAG_EMBEDDING_MODEL"):
            values["model"] = env["HYBRID_RAG_EMBEDDING_MODEL"]
        if env.get("HYBRID_RAG_MODEL_CACHE"):
            values["model_cache"] = Path(env["HYBRID_RAG_MODEL_CACHE"])
        if env.get("HYBRID_RAG_RERANKER_MODEL"):
            values["reranker"] = env["HYBRID_RAG_RERANKER_MODEL"]
        if env.get("HYBRID_RAG_FUSION"):
            values["fusion"] = parse_fusion(env["HYBRID_RAG_FUSION"], "HYBRID_RAG_FUSION").value
        for key, name in (
            ("embed_batch_size", "HYBRID_RAG_EMBED_BATCH_SIZE"),
            ("max_chunk_size", "HYBRID_RAG_MAX_CHUNK_SIZE"),
            ("chunk_overlap", "HYBRID_RAG_CHUNK_OVERLAP"),
            ("top_n", "HYBRID_RAG_TOP_N"),
            ("max_file_bytes", "HYBRID_RAG_MAX_FILE_BYTES"),
        ):
            if env.get(name):
                try:
                    values[key] = int(env[name])
                except ValueError as exc:
                    raise InvalidInputError(
                        f"{name} must be an integer, got {env[name]!r}"
                    ) from exc
        return replace(s, **values)
